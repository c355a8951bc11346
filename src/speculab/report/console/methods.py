"""`speculab methods` in the terminal: where the methods were read, then one row per method — here? why, flags.

Paths and model names come from the user's files and the engine's text: every cell is plain text (no markup).
Family-specific MTP methods that cannot run on this target (vLLM declares some 27) are folded into one row.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from speculab.report.phrases import reason_text

_STYLE = {"yes": "green", "no": "red", "unknown": "yellow"}


def _fold(rows: Sequence[Any]) -> list[tuple[str, str, str, str]]:
    """(method, available, why, flags) cells, each reason in words; the family-specific MTP rows that say no become
    one row."""
    out, folded = [], [r for r in rows if r.for_family is not None and r.available == "no"]
    for r in rows:
        if r in folded:
            continue
        out.append((r.method, r.available, reason_text(r.why), shlex.join(r.flags)))
    if folded:
        names = ", ".join(r.method for r in folded[:4]) + (", ..." if len(folded) > 4 else "")
        whys = {reason_text(r.why) for r in folded}
        why = whys.pop() if len(whys) == 1 else "for other model families than the target's"
        out.append((f"{len(folded)} family MTP methods ({names})", "no", why, ""))
    return out


def print_methods(console: Console, table: Any) -> None:
    """`table`: a `harness.servers.methods.table.MethodsTable`."""
    d = table.declared
    release = f" {d.release}" if d.release else ""
    console.print(Text(f"engine: {d.engine}{release}; methods from {d.source}"))
    if d.problem:
        console.print(Text(f"could not ask the engine: {d.problem}", style="yellow"))
    if (run := table.running) is not None:  # what the server said it runs (its /version), beside what it could
        spec = run.speculation
        now = (
            "plain decoding"
            if spec is None
            else f"{run.method} k={run.k}" + (f", {spec['model']}" if spec.get("model") else "")
        )
        console.print(Text(f"the server runs: {now} (its /version)"))
    given = table.given
    for label, facts in (("target", given.target), ("draft", given.draft), ("head", given.head)):
        if facts is not None:
            console.print(Text(f"{label}: {facts.path} ({facts.architecture or facts.head_kind or 'no architecture'})"))
    if not table.rows:
        console.print(Text("no speculation methods known for this engine; give candidate.command in the experiment"))
        return
    # folded, never cut: the flags are to be copied as they are
    t = Table(show_lines=False)
    t.add_column("method", overflow="fold", max_width=28)
    t.add_column("here", no_wrap=True)
    t.add_column("why", overflow="fold")
    t.add_column("flags it adds (k=4)", overflow="fold")
    for method, available, why, flags in _fold(table.rows):
        t.add_row(Text(method), Text(available, style=_STYLE.get(available, "")), Text(why), Text(flags))
    console.print(t)
