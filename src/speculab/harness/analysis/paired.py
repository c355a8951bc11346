"""Paired A/B comparisons: per-prompt ratios candidate/baseline and the verdict for one metric at one load (and,
for two runs that did not send the same prompts, `compare_unpaired`: the same verdict from two samples).

Every A/B number speculab reports is a ratio candidate/baseline of one metric for the same prompt (same index,
same seed, same limits), so prompt-to-prompt variation (long prompts are slow in both arms) cancels. We work in
log space: log ratios are symmetric (0.5x and 2x are equally far from 1), their mean is the log of the
geometric-mean ratio, and under "no difference" with exchangeable arms they are symmetric around 0, which is
exactly the assumption of the Wilcoxon signed-rank test. See docs/statistics.md.

At concurrency > 1 the pairs are not independent: requests that run at the same time share the machine's and the
batch's conditions (a stall, a batch's step time), so prompts sent together move together, and a test that counts
each prompt as a unit calls identical arms different far more often than 5% (bench/a_vs_a_mock.py: 36% at
concurrency 4). `concurrent_groups` cuts the send order into runs of as many prompts as were in flight, and the
verdict's units are those groups (their geometric-mean ratios), which are independent to the extent that runs of
that length do not overlap in time.
--------------------------------------------------------------------------------------------------------------
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from scipy import special

from speculab.harness.analysis.groups import MIN_PAIRS, groups_needed
from speculab.harness.stats import CONFIDENCE, POWER, Interval, bca_mean_bounds, resample_stat, t_interval
from speculab.harness.stats.ranks import (
    EXACT_SIGNED_RANK_MAX_N,
    hodges_lehmann_batch,
    hodges_lehmann_shift,
    rank_sum_critical_k,
    rank_sum_method,
    rank_sum_p,
    signed_rank_p,
)

N_RESAMPLES = 2000


class Direction(str, Enum):
    """The direction of a paired comparison (is there a detectable difference?); for time metrics "faster" means the
    candidate's values are lower. Kept beside the `Decision`, which is what the report leads with."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no detectable difference"
    INSUFFICIENT = "not enough paired data"


# The smallest change that matters, as a relative change of a metric: +-3 %. Two launches of one command differ by a
# few tenths of a percent on the engines here and by more on GPUs (docs/statistics.md, "The margin"): a difference
# below the margin is no reason to turn speculation on or off, however precisely it is measured.
DEFAULT_MARGIN = 0.03


class Decision(str, Enum):
    """The answer for one metric, from its interval and the margin m (docs/statistics.md, "Four answers"):
    the speedup interval entirely above 1 + m -> faster; entirely below 1 / (1 + m) -> slower; entirely within
    [1 / (1 + m), 1 + m] -> equivalent ("no difference larger than m"); straddling a margin -> inconclusive."""

    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    INSUFFICIENT = "not enough paired data"


def decide(speedup_low: float, speedup_high: float, margin: float) -> Decision:
    """The four answers from a speedup interval (> 1 = better) and a relative margin (0.03 = 3 %), symmetric on the
    log scale. With one (1 - a) interval this is two one-sided tests at a / 2 each for "equivalent", and one-sided
    tests at a / 2 of "beyond the margin" for faster and slower: the printed interval decides, by eye."""
    if not (math.isfinite(speedup_low) and math.isfinite(speedup_high) and speedup_low > 0 and margin >= 0):
        return Decision.INSUFFICIENT
    hi_bound, lo_bound = 1.0 + margin, 1.0 / (1.0 + margin)
    if speedup_low > hi_bound:
        return Decision.FASTER
    if speedup_high < lo_bound:
        return Decision.SLOWER
    if speedup_low >= lo_bound and speedup_high <= hi_bound:
        return Decision.EQUIVALENT
    return Decision.INCONCLUSIVE


def to_decide(
    speedup: float, speedup_low: float, speedup_high: float, margin: float, confidence: float, power: float = POWER
) -> float:
    """How many times today's units (prompts, groups, launches) would likely decide an inconclusive comparison:
    the interval narrows as 1 / sqrt(units), and it decides once (z_a + z_power) standard errors fit between the
    estimate and the nearer margin (the estimate taken as the truth). inf when the estimate sits on a margin; NaN
    without an interval."""
    if not (math.isfinite(speedup_low) and math.isfinite(speedup_high) and 0 < speedup_low < speedup_high):
        return float("nan")
    z_a = float(special.ndtri(0.5 + confidence / 2))
    se = (math.log(speedup_high) - math.log(speedup_low)) / (2 * z_a)
    distance = abs(abs(math.log(speedup)) - math.log1p(margin))
    if distance < 1e-9:  # on the margin (to rounding): no number of units is likely to decide it
        return math.inf
    return max(1.0, ((z_a + float(special.ndtri(power))) * se / distance) ** 2)


def launch_ratio(effects: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Candidate/baseline ratio with the launch as the unit: `effects` are one log ratio per launch pair (repeat j of
    each arm, its own server processes), and the interval is Student's t over them (L - 1 degrees of freedom), so
    it carries launch-to-launch variance as well as the prompts' (each effect holds both)."""
    t = t_interval(effects, confidence)
    return Interval(math.exp(t.estimate), math.exp(t.low), math.exp(t.high), confidence, "t-launches", t.n)


MIN_LAUNCHES = 3  # launches per arm for the launch as the unit: with 2, t has 1 degree of freedom (x12.7 wide)


@dataclass(frozen=True, slots=True)
class PairedRatios:
    """Per-prompt ratios candidate/baseline over indices present, finite and > 0 in both arms."""

    indices: tuple[int, ...]
    ratios: tuple[float, ...]
    n_dropped: int  # indices present in either arm but unusable (missing in one, NaN, inf, <= 0)

    @property
    def n(self) -> int:
        return len(self.ratios)

    def log_ratios(self) -> np.ndarray:
        return np.log(np.asarray(self.ratios, dtype=float))

    def to_dict(self) -> dict[str, Any]:
        return {"indices": list(self.indices), "ratios": list(self.ratios), "n_dropped": self.n_dropped}


def paired_ratios(candidate: Mapping[int, float], baseline: Mapping[int, float]) -> PairedRatios:
    """candidate[i] / baseline[i] for every index i usable in both (finite and > 0), sorted by index."""
    keys = set(candidate) | set(baseline)
    indices: list[int] = []
    ratios: list[float] = []
    for i in sorted(keys):
        if i not in candidate or i not in baseline:
            continue
        c, b = float(candidate[i]), float(baseline[i])
        # Ratios of zero, negative or missing values have no meaning on a log scale (a TPOT of 0 is a one-token
        # answer, not an infinitely fast one); they are counted, not silently used.
        if math.isfinite(c) and math.isfinite(b) and c > 0 and b > 0:
            indices.append(i)
            ratios.append(c / b)
    return PairedRatios(tuple(indices), tuple(ratios), len(keys) - len(indices))


def grouped_ratios(pairs: PairedRatios, groups: Mapping[int, int]) -> PairedRatios:
    """One unit per group: the geometric mean of its pairs' ratios (mean log ratio), groups in order; `indices` are
    the group numbers. A pair whose index has no group is its own unit (after the groups), never dropped."""
    logs: dict[tuple[int, int], list[float]] = defaultdict(list)
    for i, r in zip(pairs.indices, pairs.ratios, strict=True):
        g = groups.get(i)
        logs[(0, g) if g is not None else (1, i)].append(math.log(r))
    keys = sorted(logs)
    ratios = tuple(math.exp(math.fsum(v) / len(v)) for v in (logs[k] for k in keys))
    return PairedRatios(tuple(k[1] for k in keys), ratios, pairs.n_dropped)


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """An interval and the bootstrap replicates it came from (kept for the crossover interval)."""

    interval: Interval
    replicates: np.ndarray  # shape [n_resamples]; same scale as interval.estimate


def bootstrap_geomean_ratio(
    ratios: PairedRatios, rng: np.random.Generator, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE
) -> BootstrapResult:
    """Geometric-mean ratio exp(mean log r) with a BCa bootstrap interval; replicates are ratios, not logs."""
    x = ratios.log_ratios()
    if x.size < 2:
        nan = float("nan")
        est = float(np.exp(x.mean())) if x.size else nan
        return BootstrapResult(Interval(est, nan, nan, confidence, "bootstrap-bca", int(x.size)), np.empty(0))
    theta = float(x.mean())
    reps = resample_stat(x, "mean", rng, n_resamples)
    if np.ptp(x) == 0:  # every pair has the same ratio: no sampling variability to speak of
        lo = hi = theta
    else:
        lo, hi = bca_mean_bounds(x, theta, reps, confidence)
    interval = Interval(math.exp(theta), math.exp(lo), math.exp(hi), confidence, "bootstrap-bca", int(x.size))
    return BootstrapResult(interval, np.exp(reps))


def bootstrap_median_ratio(
    ratios: PairedRatios, rng: np.random.Generator, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE
) -> BootstrapResult:
    """Median per-prompt ratio with a percentile bootstrap interval (BCa's jackknife is unreliable for medians)."""
    r = np.asarray(ratios.ratios, dtype=float)
    if r.size < 2:
        nan = float("nan")
        est = float(r[0]) if r.size else nan
        return BootstrapResult(Interval(est, nan, nan, confidence, "bootstrap-percentile", int(r.size)), np.empty(0))
    reps = resample_stat(r, "median", rng, n_resamples)
    lo, hi = np.quantile(reps, [0.5 - confidence / 2, 0.5 + confidence / 2])
    interval = Interval(float(np.median(r)), float(lo), float(hi), confidence, "bootstrap-percentile", int(r.size))
    return BootstrapResult(interval, reps)


def wilcoxon_log_ratios(ratios: PairedRatios) -> float:
    """Two-sided Wilcoxon signed-rank p of log ratios vs 0; 1.0 when every ratio is exactly 1; NaN if n < 2."""
    x = ratios.log_ratios()
    if x.size < 2:
        return float("nan")
    if not np.any(x != 0):
        return 1.0
    from scipy import stats as scipy_stats

    # zero_method="wilcox" drops exact ties (identical values in both arms carry no direction).
    return float(scipy_stats.wilcoxon(x, zero_method="wilcox", alternative="two-sided").pvalue)


def hodges_lehmann_ratio(ratios: PairedRatios, confidence: float = CONFIDENCE) -> Interval:
    """exp(Hodges-Lehmann log ratio) with the distribution-free signed-rank interval (exact for n <= 300)."""
    x = ratios.log_ratios()
    method = "signed-rank-exact" if x.size <= EXACT_SIGNED_RANK_MAX_N else "signed-rank-normal"
    if x.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, confidence, method, 0)
    est, lo, hi = hodges_lehmann_batch(x, confidence)
    return Interval(float(np.exp(est)), float(np.exp(lo)), float(np.exp(hi)), confidence, method, int(x.size))


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """The paired verdict for one metric at one load: candidate/baseline ratios, intervals, test and verdict.

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
    note: str = ""
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
            "note": self.note,
            "samples": list(self.samples),
        }


def min_detectable_change(interval: Interval, power: float = POWER) -> float:
    """Relative change detectable with `power` given a log-scale interval's width: exp((z_a + z_b) * SE) - 1."""
    if not (interval.low > 0 and interval.high > 0):
        return float("nan")
    z_a = float(special.ndtri(0.5 + interval.confidence / 2))
    se_log = (math.log(interval.high) - math.log(interval.low)) / (2 * z_a)
    return math.expm1((z_a + float(special.ndtri(power))) * se_log)


def compare_paired(
    metric: str,
    candidate: Mapping[int, float],
    baseline: Mapping[int, float],
    rng: np.random.Generator,
    *,
    lower_is_better: bool = True,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    groups: Mapping[int, int] | None = None,
    group_size: int = 1,
    margin: float = DEFAULT_MARGIN,
    launch_effects: Sequence[float] = (),
) -> MetricComparison:
    """Pair per-prompt values of one metric; the verdict (faster, slower or no detectable difference) and the
    decision against `margin` (faster, slower, equivalent, inconclusive) from one interval.

    The verdict follows the Hodges-Lehmann ratio's signed-rank interval (distribution-free; exact coverage for
    symmetric noise at any n): entirely below 1 -> the candidate's values are lower. That interval is the one
    `speedup_interval` reports, and the exact signed-rank p is the same test, so none of the three can disagree.
    The geometric-mean (BCa) and median (percentile) bootstrap intervals are computed for reading; `note` says
    when the geometric mean's interval would have decided differently (outliers or too few pairs).

    `groups` (prompt index -> group, from `concurrent_groups` with `group_size` prompts each): the units of every
    interval and of the test are the groups' geometric-mean ratios, not the prompts, because prompts that ran at
    the same time are not independent. At least MIN_PAIRS units are needed for a verdict.

    `launch_effects` (one log ratio per launch pair, `launch_effect`): with at least MIN_LAUNCHES of them the
    verdict and the decision follow `launch_ratio` over them instead, so the interval carries launch-to-launch
    variance; fewer, and the launch effect is unmeasured (`launches` says how many there were).
    """
    pairs = paired_ratios(candidate, baseline)
    units = grouped_ratios(pairs, groups) if groups is not None and group_size > 1 else pairs
    boot = bootstrap_geomean_ratio(units, rng, n_resamples, confidence)
    geo = boot.interval
    med = bootstrap_median_ratio(units, rng, n_resamples, confidence).interval
    hl = hodges_lehmann_ratio(units, confidence)
    p = signed_rank_p(units.log_ratios()) if units.n >= 2 else float("nan")
    note = ""
    launches = launch_ratio(launch_effects, confidence) if len(launch_effects) >= MIN_LAUNCHES else None
    basis = launches if launches is not None else hl
    if units.n < MIN_PAIRS:
        verdict, note = Direction.INSUFFICIENT, _too_few(pairs, units, group_size)
    else:
        verdict = _direction(basis, lower_is_better)
        if launches is None and geo.excludes(1.0) != hl.excludes(1.0):
            which = "excludes" if geo.excludes(1.0) else "includes"
            note = (
                f"the geometric-mean interval {which} 1 but the signed-rank interval (the verdict's) does not: "
                "borderline, or a few outlying pairs"
            )
    decision, needed = _against_margin(basis, margin, lower_is_better, confidence, verdict)
    return MetricComparison(
        metric=metric,
        n_pairs=pairs.n,
        n_dropped=pairs.n_dropped,
        geomean_ratio=geo,
        median_ratio=med,
        wilcoxon_p=p,
        verdict=verdict,
        min_detectable_change=min_detectable_change(basis),
        lower_is_better=lower_is_better,
        note=note,
        replicates=tuple(boot.replicates.tolist()),
        hodges_lehmann_ratio=hl,
        n_units=units.n,
        group_size=group_size if units is not pairs else 1,
        margin=margin,
        decision=decision,
        to_decide=needed,
        launch_ratio=launches,
        launches=max(1, len(launch_effects)),
        launch_spread=math.expm1(max(launch_effects) - min(launch_effects)) if len(launch_effects) >= 2 else math.nan,
    )


def _direction(basis: Interval, lower_is_better: bool) -> Direction:
    """Faster, slower or no detectable difference from the verdict's ratio interval (candidate/baseline)."""
    if not basis.excludes(1.0):
        return Direction.NO_DIFFERENCE
    return Direction.FASTER if (basis.high < 1.0) == lower_is_better else Direction.SLOWER


def _too_few(pairs: PairedRatios, units: PairedRatios, group_size: int) -> str:
    if units is pairs:
        return f"only {pairs.n} usable pairs; need at least {MIN_PAIRS}"
    return f"only {units.n} groups of {group_size} prompts sent together ({pairs.n} pairs); " + groups_needed(
        group_size
    )


def _against_margin(
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


def launch_effect(
    candidate: Mapping[int, float],
    baseline: Mapping[int, float],
    groups: Mapping[int, int] | None = None,
    group_size: int = 1,
) -> float | None:
    """One launch pair's effect: the Hodges-Lehmann log ratio of its prompts (in their groups sent together, as the
    verdict counts them); None with fewer than 2 usable units."""
    pairs = paired_ratios(candidate, baseline)
    units = grouped_ratios(pairs, groups) if groups is not None and group_size > 1 else pairs
    if units.n < 2:
        return None
    return float(hodges_lehmann_batch(units.log_ratios(), CONFIDENCE)[0])


def _unit_logs(values: Mapping[int, float], group_size: int) -> tuple[np.ndarray, int, int]:
    """(log unit values, usable requests, dropped) of one arm: its values as units of `group_size` requests sent one
    after another (the mean log of each run), because requests in flight together share their conditions. A key is
    a request's index (its place in the arm's send order) or, each request its own sample, repeat << 32 | index:
    runs are cut by index within a repeat, before unusable values (not finite, <= 0) are left out, so a drop does not
    shift the runs after it."""
    size = max(1, group_size)
    runs: dict[tuple[int, int], list[float]] = defaultdict(list)
    usable = 0
    for key, v in values.items():
        if math.isfinite(v) and v > 0:
            runs[(key >> 32, (key & 0xFFFFFFFF) // size)].append(math.log(v))
            usable += 1
    units = [math.fsum(x) / len(x) for _, x in sorted(runs.items())]
    return np.asarray(units, dtype=float), usable, len(values) - usable


def compare_unpaired(
    metric: str,
    candidate: Mapping[int, float],
    baseline: Mapping[int, float],
    rng: np.random.Generator,
    *,
    lower_is_better: bool = True,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    group_size: int = 1,
    margin: float = DEFAULT_MARGIN,
) -> MetricComparison:
    """The verdict and the decision for one metric from two unpaired samples: two runs whose prompts differ (in
    number, order or text), so no prompt has a partner. Each arm's values are its own sample (indices are only its
    send order); the ratio is exp of the two-sample Hodges-Lehmann shift of the logs (the typical ratio between a
    candidate request and a baseline one) with its rank-sum interval, and the p is the rank-sum test it inverts.

    Valid when both arms drew their prompts from one distribution (the same workload, sampled twice): prompt-to-
    prompt variation is then noise in both samples rather than cancelled per pair, so the interval is wider than a
    paired one of as many prompts. At concurrency > 1 each arm's units are runs of `group_size` requests sent one
    after another, as in the paired case. `geomean_ratio` (two-sample percentile bootstrap of the mean logs, its
    replicates kept for the crossover) and `median_ratio` (ratio of the medians) are for reading."""
    x, n_c, drop_c = _unit_logs(candidate, group_size)
    y, n_b, drop_b = _unit_logs(baseline, group_size)
    nan = float("nan")
    est, lo, hi = hodges_lehmann_shift(x, y, confidence) if x.size and y.size else (nan, nan, nan)
    hl = Interval(
        math.exp(est), math.exp(lo), math.exp(hi), confidence, rank_sum_method(x.size, y.size), int(x.size + y.size)
    )
    q = (0.5 - confidence / 2, 0.5 + confidence / 2)
    if x.size >= 2 and y.size >= 2:
        reps = resample_stat(x, "mean", rng, n_resamples) - resample_stat(y, "mean", rng, n_resamples)
        glo, ghi = np.quantile(reps, q)
        meds = resample_stat(x, "median", rng, n_resamples) - resample_stat(y, "median", rng, n_resamples)
        mlo, mhi = np.quantile(meds, q)
    else:
        reps, glo, ghi, mlo, mhi = np.empty(0), nan, nan, nan, nan
    n = int(x.size + y.size)
    mean_diff = float(x.mean() - y.mean()) if x.size and y.size else nan
    med_diff = float(np.median(x) - np.median(y)) if x.size and y.size else nan
    geo = Interval(math.exp(mean_diff), math.exp(glo), math.exp(ghi), confidence, "bootstrap-percentile-2sample", n)
    med = Interval(math.exp(med_diff), math.exp(mlo), math.exp(mhi), confidence, "bootstrap-percentile-2sample", n)
    p = rank_sum_p(x, y) if x.size and y.size else nan
    note = ""
    if min(x.size, y.size) < MIN_PAIRS or rank_sum_critical_k(x.size, y.size, confidence) < 1:
        verdict = Direction.INSUFFICIENT
        unit = f"groups of {group_size} requests" if group_size > 1 else "requests"
        note = (
            f"only {x.size} candidate and {y.size} baseline {unit}; need at least {MIN_PAIRS} of each: send at "
            f"least {MIN_PAIRS * max(1, group_size)} requests in each run"
        )
    else:
        verdict = _direction(hl, lower_is_better)
    decision, needed = _against_margin(hl, margin, lower_is_better, confidence, verdict)
    return MetricComparison(
        metric=metric,
        n_pairs=0,
        n_dropped=drop_c + drop_b,
        geomean_ratio=geo,
        median_ratio=med,
        wilcoxon_p=p,
        verdict=verdict,
        min_detectable_change=min_detectable_change(hl),
        lower_is_better=lower_is_better,
        note=note,
        replicates=tuple(np.exp(reps).tolist()),
        hodges_lehmann_ratio=hl,
        n_units=n,
        group_size=max(1, group_size),
        margin=margin,
        decision=decision,
        to_decide=needed,
        samples=(n_c, n_b),
    )
