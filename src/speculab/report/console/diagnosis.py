"""Terminal summary of `speculab diagnose`: the findings first (most latency first, each with its next step), then
the measured quantities, then warnings. Formats diagnosis.json; computes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speculab.report.formatting import pct, seconds
from speculab.report.html.diagnosis import headline_rows


def print_diagnosis(console: Console, doc: dict[str, Any], run_dir: Path | None) -> None:
    findings = doc.get("findings", [])
    if doc.get("interrupted"):
        console.print("[bold yellow]interrupted: a diagnosis of the phases that ran[/]")
    if findings:
        top = findings[0]
        console.print(
            f"[bold]Diagnosis: {escape(top['title'])} explains the most latency "
            f"({seconds(top['explained_s'])}, {pct(top['share'])} of an affected request).[/]"
        )
    else:
        console.print("[bold]Diagnosis: no cause explains a noticeable share of latency.[/]")
    for f in findings:
        console.print(
            f"\n[bold]{f['rank']}. {escape(f['title'])}[/]: {seconds(f['explained_s'])} "
            f"({pct(f['share'])}; affects {escape(f['affects'])})",
            highlight=False,
        )
        console.print(f"   evidence: {escape(f['evidence'])}", highlight=False)
        console.print(f"   [green]next:[/] {escape(f['next_step'])}", highlight=False)
    checked = doc.get("checked", [])
    if checked:
        below = ", ".join(f"{escape(c['title'])} {seconds(c['explained_s'])}" for c in checked)
        console.print(f"\n[dim]checked, below the thresholds: {below}[/]", highlight=False)
    if doc.get("disaggregation"):
        console.print(f"\n[bold]prefill/decode interference:[/] {escape(doc['disaggregation'])}", highlight=False)
    table = Table("measured", "value", show_header=False, box=None, padding=(0, 1))
    for k, v in headline_rows(doc):
        if k != "disaggregation":
            table.add_row(f"[bold]{escape(k)}[/]", escape(v))
    console.print()
    console.print(table)
    for w in doc.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    if run_dir is not None:
        console.print(
            f"\n{run_dir}/diagnosis.json (every number, seconds), diagnosis.html, requests.jsonl", highlight=False
        )
