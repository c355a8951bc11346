"""One look of adaptive repeats: is every verdict decided yet? The verdict's own comparisons, at the look's level.

The lifecycle calls `take_look` after each repeat from `min` on: it reads what the run directory holds, builds the
comparisons at confidence 1 - alpha_j (the look's share of the 5 %, stats.sequential), and calls the experiment
decided when every candidate at every load is faster, slower or equivalent against the margin (or gated in a way
more repeats do not fix: errors, too few prompts); inconclusive ones go on.
"""

from __future__ import annotations

from pathlib import Path

from speculab.harness.analysis.figures import HEADLINE
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats.sequential import decided
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions

LOOK_RESAMPLES = 200  # the verdict follows the analytic signed-rank interval; bootstraps are only for reading


def take_look(out: Path, alpha: float) -> tuple[bool, list[ReportWarning]]:
    """(every verdict decided?, the comparisons still open: records of their TPOT decision, speedup and interval
    against the margin, worded by the report: "ngram-k4 at concurrency 8 (inconclusive: 1.02× [0.99–1.05] against
    the ±3% margin)")."""
    report = build_report(load_inputs(out), ReportOptions(n_resamples=LOOK_RESAMPLES, confidence=1 - alpha))
    open_ = []
    for lv in report.levels:
        for c in lv.comparisons:
            tp = c.metric(HEADLINE.name)
            if tp is None:
                continue
            if not decided(tp.decision, c.gate):
                fields = {"candidate": c.candidate, "at": lv.label, "decision": tp.decision, "speedup": tp.speedup}
                fields |= {"low": tp.speedup_low, "high": tp.speedup_high, "margin": tp.margin}
                open_.append(ReportWarning(WarningKind.LOOK_OPEN, fields=fields))
    return not open_, open_
