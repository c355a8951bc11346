"""Paired A/B comparisons: per-prompt ratios candidate/baseline and the verdict for one metric at one load (two runs
that did not send the same prompts are compared unpaired, in `comparison.unpaired`).

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
from dataclasses import dataclass
from typing import Any

import numpy as np

from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN
from speculab.harness.analysis.comparison.metric_comparison import (
    N_RESAMPLES,
    Direction,
    MetricComparison,
    against_margin,
    direction,
    min_detectable_change,
)
from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import CONFIDENCE, Interval, bca_mean_bounds, resample_stat, t_interval
from speculab.harness.stats.ranks import EXACT_SIGNED_RANK_MAX_N, hodges_lehmann_batch, signed_rank_p


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
    note = None
    launches = launch_ratio(launch_effects, confidence) if len(launch_effects) >= MIN_LAUNCHES else None
    basis = launches if launches is not None else hl
    if units.n < MIN_PAIRS:
        verdict, note = Direction.INSUFFICIENT, _too_few(pairs, units, group_size)
    else:
        verdict = direction(basis, lower_is_better)
        if launches is None and geo.excludes(1.0) != hl.excludes(1.0):
            # borderline, or a few outlying pairs: the reader is told the two intervals part
            note = ReportWarning(WarningKind.METRIC_INTERVALS_DISAGREE, fields={"excludes": geo.excludes(1.0)})
    decision, needed = against_margin(basis, margin, lower_is_better, confidence, verdict)
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


def _too_few(pairs: PairedRatios, units: PairedRatios, group_size: int) -> ReportWarning:
    """Why there is no verdict: too few pairs, or too few groups of prompts sent together (the fix: more prompts)."""
    if units is pairs:
        return ReportWarning(WarningKind.METRIC_FEW_PAIRS, fields={"pairs": pairs.n, "needed": MIN_PAIRS})
    fields = {"groups": units.n, "group_size": group_size, "pairs": pairs.n, "needed": MIN_PAIRS}
    return ReportWarning(WarningKind.METRIC_FEW_GROUPS, fields=fields)


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
