"""Unpaired A/B comparisons: the verdict for one metric at one load from two samples, for two runs that did not send
the same prompts (in number, order or text), so no prompt has a partner (docs/statistics.md)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

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
from speculab.harness.stats import CONFIDENCE, Interval, resample_stat
from speculab.harness.stats.ranks import hodges_lehmann_shift, rank_sum_critical_k, rank_sum_method, rank_sum_p


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
    note = None
    if min(x.size, y.size) < MIN_PAIRS or rank_sum_critical_k(x.size, y.size, confidence) < 1:
        verdict = Direction.INSUFFICIENT
        fields = {"candidate": int(x.size), "baseline": int(y.size), "group_size": group_size, "needed": MIN_PAIRS}
        note = ReportWarning(WarningKind.METRIC_FEW_SAMPLES, fields=fields)
    else:
        verdict = direction(hl, lower_is_better)
    decision, needed = against_margin(hl, margin, lower_is_better, confidence, verdict)
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
