"""`speculab workload` in the terminal: the built-in sets, or one loaded workload's counts, lengths and checks.

Prompt text comes from user files: it is printed as plain text (no markup), and names are escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speculab.report.formatting import MISSING


def print_builtin_workloads(console: Console, sets: Sequence[Any]) -> None:
    """`sets`: the built-in sets as `harness.workload.builtin.list_builtin()` describes them."""
    table = Table("workload", "kind", "items", "description", title="built-in workloads (--workload builtin:NAME)")
    for b in sets:
        table.add_row(f"builtin:{b.name}", b.kind, str(b.count), b.description)
    console.print(table)


def print_workload(console: Console, o: Mapping[str, Any]) -> None:
    """A workload's overview (`harness.workload.sources.workload_overview`; lengths in approximate tokens), then the
    requests it previews, each clipped to 300 characters."""
    p, m = o["prompt_tokens_approx"], o["max_tokens"]
    console.print(f"[bold]{escape(o['name'])}[/]: {o['items']} requests ({o['distinct_prompts']} distinct prompts)")
    console.print(f"source: {o['source']}", highlight=False, markup=False)
    turns = o["conversation_turns"]
    if set(turns) != {"1"}:
        shape = ", ".join(f"{c} with {n} turn{'s' if n != '1' else ''}" for n, c in turns.items())
        console.print(
            f"conversations: {o['conversations']} ({shape}); turn k+1 is sent with the arm's own turn-k answer"
        )
        cats = ", ".join(f"{k} {v}" for k, v in o["conversation_categories"].items())
    else:
        cats = ", ".join(f"{k} {v}" for k, v in o["categories"].items())
    console.print(f"categories ({len(o['categories'])}): {cats}", highlight=False, markup=False)
    console.print(
        f"prompt length (approx. tokens): mean {p['mean']:.0f}, p50 {p['p50']:.0f}, p90 {p['p90']:.0f}, "
        f"max {p['max']:.0f}"
    )
    if o["items_with_max_tokens"]:
        console.print(
            f"max_tokens set on {o['items_with_max_tokens']} requests: mean {m['mean']:.0f}, p50 {m['p50']:.0f}, "
            f"max {m['max']:.0f}"
        )
    tr = o["trace"]
    if tr is not None:
        rate = f", {tr['rate_rps']:.3g} req/s on average" if tr["rate_rps"] else ""
        g = tr["gap_s"]
        console.print(
            f"arrivals: {tr['requests']} over {tr['span_s']:.3f} s{rate}; gap p50 {g['p50'] * 1000:.1f} ms, "
            f"p99 {g['p99'] * 1000:.1f} ms (replayed at these times, scaled by --trace-speed)"
            if g["n"]
            else f"arrivals: {tr['requests']} over {tr['span_s']:.3f} s"
        )
    checks = ", ".join(f"{k} {v}" for k, v in o["check_types"].items()) or "none"
    console.print(f"checks on {o['items_with_checks']} requests ({checks})", markup=False)
    if formats := o.get("response_formats"):  # a summary of an older speculab has no such key
        said = ", ".join(f"{k} {v}" for k, v in formats.items())
        console.print(f"response_format on {sum(formats.values())} requests ({said})", markup=False)
    for item in o.get("preview", ()):
        text = item["text"]
        clipped = text if len(text) <= 300 else text[:297] + "..."
        turn = f" turn {item['turn']}" if item["turn"] else ""
        heading = f"#{item['index']} {item['prompt_id']}{turn} [{item['category'] or MISSING}] seed {item['seed']}"
        console.rule(escape(heading), style="dim")
        console.print(clipped, highlight=False, markup=False)
