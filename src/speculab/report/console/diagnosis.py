"""Terminal summary of `speculab diagnose`: the findings first (most latency first, each with its next step), then
the measured quantities, then warnings. Formats diagnosis.json; computes nothing."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speculab.report.formatting import pct, seconds
from speculab.report.html.diagnosis import diagnosis_warnings, headline_rows
from speculab.report.words import disaggregation_text, finding_words


def print_diagnosis(console: Console, doc: dict[str, Any], run_dir: Path | None) -> None:
    """In a terminal rich wraps at words; piped (a file, `less`, `grep`) every line is printed whole, never cut at 80
    columns mid-phrase, and the measured quantities are `name  value` lines rather than a table that wraps its cells."""
    piped = not console.is_terminal
    say = functools.partial(console.print, soft_wrap=True) if piped else console.print
    findings = doc.get("findings", [])
    if doc.get("interrupted"):
        say("[bold yellow]interrupted: a diagnosis of the phases that ran[/]")
    if findings:
        top = findings[0]
        say(
            f"[bold]Diagnosis: {escape(finding_words(top).title)} explains the most latency "
            f"({seconds(top['explained_s'])}, {pct(top['share'])} of an affected request).[/]"
        )
    else:
        say("[bold]Diagnosis: no cause explains a noticeable share of latency.[/]")
    for f in findings:
        words = finding_words(f)
        say(
            f"\n[bold]{f['rank']}. {escape(words.title)}[/]: {seconds(f['explained_s'])} "
            f"({pct(f['share'])}; affects {escape(words.affects)})",
            highlight=False,
        )
        say(f"   evidence: {escape(words.evidence)}", highlight=False)
        say(f"   [green]next:[/] {escape(words.next_step)}", highlight=False)
    checked = doc.get("checked", [])
    if checked:
        below = ", ".join(f"{escape(finding_words(c).title)} {seconds(c['explained_s'])}" for c in checked)
        say(f"\n[dim]checked, below the thresholds: {below}[/]", highlight=False)
    if disaggregation := disaggregation_text(doc):
        say(f"\n[bold]prefill/decode interference:[/] {escape(disaggregation)}", highlight=False)
    rows = [(k, v) for k, v in headline_rows(doc) if k != "disaggregation"]
    say()
    if piped:
        width = max((len(k) for k, _ in rows), default=0)
        for k, v in rows:
            say(f"{escape(k):<{width}}  {escape(v)}", highlight=False)
    else:
        table = Table("measured", "value", show_header=False, box=None, padding=(0, 1))
        for k, v in rows:
            table.add_row(f"[bold]{escape(k)}[/]", escape(v))
        console.print(table)  # a terminal: aligned and word-wrapped
    for w in diagnosis_warnings(doc):
        say(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    if run_dir is not None:
        say(f"\n{run_dir}/diagnosis.json (every number, seconds), diagnosis.html, requests.jsonl", highlight=False)
