"""The console view of a comparison whose unit is the run (summary-only files): each load's figures side by side,
A's and B's (their runs' geometric mean), B/A, and the answer over runs or the summary-only label."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from speculab.harness.results.summary_file import SUMMARY_FILE
from speculab.harness.verdict.run_level import RunLevelLoad, RunLevelReport, RunMetric
from speculab.report.formatting import MISSING, is_number, num, seconds
from speculab.report.phrases import NO_PER_REQUEST, NOT_IN_FILE, run_level_phrase, warning_lines


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return NOT_IN_FILE
    return seconds(v) if unit == "s" else num(v, ",.1f", unit)


def _answer(m: RunMetric) -> str:
    if m.ratio is None:
        return NOT_IN_FILE if not (m.a and m.b) else NO_PER_REQUEST
    r = m.ratio
    # the speedup scale (> 1 = B better): a lower time is A / B
    est, low, high = (1 / r.estimate, 1 / r.high, 1 / r.low) if m.lower_is_better else (r.estimate, r.low, r.high)
    return run_level_phrase(m.decision.value if m.decision else None, est, low, high, m.margin)


def _total(counts: tuple[int | None, ...]) -> str:
    """A side's requests over its runs; "not in the file" where no run's file counts them."""
    known = [x for x in counts if x is not None]
    return num(sum(known), ",d") if known else NOT_IN_FILE


def _table(x: RunLevelLoad) -> Table:
    """One load's figures; the answer column only where the runs give an interval (else the title says why not)."""
    title = f"{x.level.label}: {x.runs_a} run(s) A, {x.runs_b} run(s) B; the unit is the run"
    if not x.has_interval:
        title += f"; {NO_PER_REQUEST}"
    t = Table(title=title, title_justify="left")
    cols = [("", "left"), ("A", "right"), ("B", "right"), ("B/A", "right")]
    for col, justify in [*cols, *([("answer", "left")] if x.has_interval else [])]:
        t.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for m in x.metrics:
        ratio = f"{m.point:.3f}" if is_number(m.point) else MISSING
        row = [m.label, _value(m.a_value, m.unit), _value(m.b_value, m.unit), ratio]
        t.add_row(*row, *([_answer(m)] if x.has_interval else []))
    for label, a, b in (("requests ok", x.completed_a, x.completed_b), ("requests failed", x.failed_a, x.failed_b)):
        t.add_row(label, _total(a), _total(b), "", *([""] if x.has_interval else []))
    return t


def run_level_renderable(report: RunLevelReport, out_dir: Path | None = None) -> Group:
    head = f"[bold]A[/] {escape(report.a_name)}  vs  [bold]B[/] {escape(report.b_name)}  (the unit is the run)"
    parts: list[object] = [head]
    parts += [_table(x) for x in report.loads]
    parts += [f"[dim]{escape(line)}[/]" for line in warning_lines(report.notes)]
    if out_dir is not None:
        parts.append(f"wrote {escape(str(out_dir / SUMMARY_FILE))}")
    return Group(*parts)  # type: ignore[arg-type]


def print_run_level(console: Console, report: RunLevelReport, out_dir: Path | None = None) -> None:
    console.print(run_level_renderable(report, out_dir))
