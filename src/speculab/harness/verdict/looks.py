"""One look of adaptive repeats: is every verdict decided yet? The verdict's own comparisons, at the look's level.

The lifecycle calls `decide` after each repeat from `min` on: it reads what the run directory holds, builds the
comparisons at confidence 1 - alpha_j (the look's share of the 5 %, analysis.sequential), and calls the experiment
decided when every candidate at every load is faster, slower, or no different with a minimum detectable change
below the threshold (or gated in a way more repeats do not fix: errors, too few prompts).
"""

from __future__ import annotations

from pathlib import Path

from speculab.harness.analysis.sequential import decided
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions

LOOK_RESAMPLES = 200  # the verdict follows the analytic signed-rank interval; bootstraps are only for reading


def decide(out: Path, alpha: float, mdc: float) -> tuple[bool, list[str]]:
    """(every verdict decided?, the comparisons still open: "ngram-k4 at concurrency 8 (could detect ±12%)")."""
    report = build_report(load_inputs(out), ReportOptions(n_resamples=LOOK_RESAMPLES, confidence=1 - alpha))
    open_ = []
    for lv in report.levels:
        for c in lv.comparisons:
            tp = c.metric("tpot_s")
            if tp is None:
                continue
            if not decided(tp.verdict, c.gate, tp.min_detectable_change, mdc):
                open_.append(f"{c.candidate} at {lv.label} (could detect ±{tp.min_detectable_change:.0%})")
    return not open_, open_
