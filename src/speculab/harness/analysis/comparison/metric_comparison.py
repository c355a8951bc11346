"""The result of comparing one metric between two arms at one load (`MetricComparison`), its `Direction`, and what
the paired and the unpaired comparison both derive from their verdict's interval: the decision against the margin
and the minimum detectable change."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import scipy

from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN, Decision, decide, to_decide
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.stats import POWER, Interval

N_RESAMPLES = 2000  # bootstrap resamples per interval, paired or unpaired


class Direction(str, Enum):
    """The direction of a paired comparison (is there a detectable difference?); for time metrics "faster" means the
    candidate's values are lower. Kept beside the `Decision`, which is what the report leads with."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no detectable difference"
    INSUFFICIENT = "not enough paired data"


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """The verdict for one metric at one load: candidate/baseline ratios, intervals, test and verdict (paired per
    prompt, or from two samples: `samples`).

    The verdict follows `hodges_lehmann_ratio` (exp of the Hodges-Lehmann shift of the log ratios, i.e. the
    typical per-prompt ratio) and its distribution-free signed-rank interval, which is also what `speedup` and
    `speedup_interval` report, so the verdict never contradicts the interval printed beside it; `wilcoxon_p` is the
    exact signed-rank p of the same statistic (p <= 1 - confidence exactly when that interval excludes 1).
    `geomean_ratio` (BCa bootstrap) and `median_ratio` (percentile bootstrap) are reported for reading, not for
    the verdict: the bootstrap under-covers with few heavy-tailed pairs (docs/statistics.md).

    `min_detectable_change` is the relative change (0.05 = 5%) that this run would have detected with 80% power
    at the chosen confidence: in log space (z_{1-a/2} + z_{power}) * SE, with SE taken from the verdict interval's
    half-width (half-width / z_{1-a/2}). A "no detectable difference" verdict always comes with it, so a reader
    knows whether "no difference" means "< 1%" or "< 40%".
    """

    metric: str
    n_pairs: int  # prompts usable in both arms
    n_dropped: int
    geomean_ratio: Interval  # BCa bootstrap; for reading (the verdict follows hodges_lehmann_ratio)
    median_ratio: Interval
    wilcoxon_p: float
    verdict: Direction
    min_detectable_change: float
    lower_is_better: bool
    # why there is no verdict, or what to read it with (a record the report words; None: nothing to say)
    note: ReportWarning | None = None
    # Bootstrap replicates of the geometric-mean ratio (candidate/baseline), kept for the crossover interval;
    # not part of to_dict() (thousands of numbers), nor of equality.
    replicates: tuple[float, ...] = field(default=(), repr=False, compare=False)
    # The verdict's interval; None only for comparisons built by hand (then the geometric mean stands in).
    hodges_lehmann_ratio: Interval | None = None
    # The units the intervals and the test count: groups of `group_size` prompts sent together (concurrency > 1),
    # or the prompts themselves (group_size 1, n_units == n_pairs). 0: not recorded (built by hand).
    n_units: int = 0
    group_size: int = 1
    # The answer against the margin (relative, 0.03 = 3 %), from the same interval as the verdict; `to_decide`: for
    # an inconclusive one, how many times today's units would likely decide it (`to_decide()`), else NaN.
    margin: float = DEFAULT_MARGIN
    decision: Decision = Decision.INSUFFICIENT
    to_decide: float = float("nan")
    # With >= MIN_LAUNCHES launches per arm: the interval over launch pairs (`launch_ratio`), which the verdict and
    # the decision follow instead of the prompts' interval; `launches` is how many launch pairs there were (1: the
    # launch effect is unmeasured, and the margin is what covers it).
    launch_ratio: Interval | None = None
    launches: int = 1
    # With >= 2 launch pairs: how far apart their effects lie (relative: exp(max - min) - 1), the launch effect seen
    # even where too few pairs make an interval of it; NaN with one
    launch_spread: float = float("nan")
    # An unpaired comparison (`compare_unpaired`): the usable requests of (candidate, baseline); () when paired
    samples: tuple[int, ...] = ()

    @property
    def verdict_ratio(self) -> Interval:
        """The interval the verdict and the decision follow (candidate/baseline)."""
        if self.launch_ratio is not None:
            return self.launch_ratio
        return self.hodges_lehmann_ratio if self.hodges_lehmann_ratio is not None else self.geomean_ratio

    @property
    def speedup(self) -> float:
        """baseline/candidate for a time metric (2.0 = twice as fast); candidate/baseline otherwise."""
        r = self.verdict_ratio
        return 1.0 / r.estimate if self.lower_is_better else r.estimate

    @property
    def speedup_interval(self) -> tuple[float, float]:
        r = self.verdict_ratio
        return (1.0 / r.high, 1.0 / r.low) if self.lower_is_better else (r.low, r.high)

    @property
    def verdict_basis(self) -> str:
        if self.launch_ratio is not None:
            return "launch_ratio"
        return "hodges_lehmann_ratio" if self.hodges_lehmann_ratio is not None else "geomean_ratio"

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.speedup_interval
        return {
            "metric": self.metric,
            "n_pairs": self.n_pairs,
            "n_dropped": self.n_dropped,
            "geomean_ratio": self.geomean_ratio.to_dict(),
            "median_ratio": self.median_ratio.to_dict(),
            "hodges_lehmann_ratio": self.verdict_ratio.to_dict(),
            "verdict_basis": self.verdict_basis,
            "wilcoxon_p": self.wilcoxon_p,
            "verdict": self.verdict.value,
            "margin": self.margin,
            "decision": self.decision.value,
            "to_decide": self.to_decide,
            "launches": self.launches,
            "launch_spread": self.launch_spread,
            "launch_ratio": self.launch_ratio.to_dict() if self.launch_ratio is not None else None,
            "min_detectable_change": self.min_detectable_change,
            "lower_is_better": self.lower_is_better,
            "n_units": self.n_units,
            "group_size": self.group_size,
            "speedup": self.speedup,
            "speedup_low": lo,
            "speedup_high": hi,
            "note": self.note.to_dict() if self.note is not None else None,
            "samples": list(self.samples),
        }


def min_detectable_change(interval: Interval, power: float = POWER) -> float:
    """Relative change detectable with `power` given a log-scale interval's width: exp((z_a + z_b) * SE) - 1."""
    if not (interval.low > 0 and interval.high > 0):
        return float("nan")
    z_a = float(scipy.special.ndtri(0.5 + interval.confidence / 2))
    se_log = (math.log(interval.high) - math.log(interval.low)) / (2 * z_a)
    return math.expm1((z_a + float(scipy.special.ndtri(power))) * se_log)


def direction(basis: Interval, lower_is_better: bool) -> Direction:
    """Faster, slower or no detectable difference from the verdict's ratio interval (candidate/baseline)."""
    if not basis.excludes(1.0):
        return Direction.NO_DIFFERENCE
    return Direction.FASTER if (basis.high < 1.0) == lower_is_better else Direction.SLOWER


def against_margin(
    basis: Interval, margin: float, lower_is_better: bool, confidence: float, verdict: Direction
) -> tuple[Decision, float]:
    """(the decision, `to_decide` for an inconclusive one else NaN) from the verdict's interval."""
    if verdict is Direction.INSUFFICIENT:
        return Decision.INSUFFICIENT, float("nan")
    # the speedup scale (> 1 = better), as `speedup_interval` reports it
    up = (
        (1 / basis.estimate, 1 / basis.high, 1 / basis.low)
        if lower_is_better
        else (basis.estimate, basis.low, basis.high)
    )
    decision = decide(up[1], up[2], margin)
    return decision, to_decide(*up, margin, confidence) if decision is Decision.INCONCLUSIVE else float("nan")
