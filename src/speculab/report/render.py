"""Re-render a saved A/B run: DIR/inputs.json + DIR/runs/... -> DIR/summary.json + DIR/report.html.

`speculab run` and `speculab demo` call `render_run_dir` once the run ends (interrupted runs too; a finished launch-mode
run adds the configuration to ship, written beside summary.json as recommended.yaml and recommended-flags.txt);
`speculab report DIR` calls it on any saved run, partial ones included. comparisons.csv, the paired comparisons as
one table, is written beside summary.json every time. The verdict is built by
`harness.verdict.build`; this module only reads, builds and writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.results.output_dir import check_render_target
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import REPORT_SCHEMA, Report, ReportOptions
from speculab.report.comparisons import write_comparisons
from speculab.report.html.page import write_html
from speculab.report.shipped import write_shipped
from speculab.report.summary import write_summary


def render_run_dir(
    root: Path,
    out_dir: Path | None = None,
    options: ReportOptions | None = None,
    ship: Callable[[Report], Report] | None = None,
) -> Report:
    """Read the saved inputs in `root`, build the report, write summary.json and report.html to out_dir (or root).
    `ship` (`speculab run`): the report with the configuration to ship added, written beside them too."""
    if not root.is_dir():
        raise UserError(f"{root}: no such directory; give the output directory of `speculab run` or `speculab demo`")
    inputs = load_inputs(root)
    if out_dir is not None and out_dir.resolve() != root.resolve():
        check_render_target(out_dir, REPORT_SCHEMA)
    report = build_report(inputs, options)
    if ship is not None:
        report = ship(report)
    target = out_dir or root
    try:
        write_summary(target, report)
        write_html(target, report, root)  # an unfinished run's page names the directory to resume: the run's own
        write_shipped(target, report)
        write_comparisons(target, report)
    except OSError as e:
        raise UserError(f"{target}: cannot write the report ({e.strerror}); choose another --output") from None
    return report
