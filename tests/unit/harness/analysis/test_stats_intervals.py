"""Intervals from repeats, Wilson proportions, McNemar, and the crossover load."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from speculab.harness.analysis.comparison.paired import compare_paired
from speculab.harness.analysis.crossover import CrossoverStatus, LoadSpeedup, crossover, first_crossings
from speculab.harness.stats import mcnemar, mcnemar_counts, repeat_ratio_interval, t_interval, wilson_interval


def test_t_interval_matches_hand_computation():
    iv = t_interval([10.0, 12.0, 14.0])
    # mean 12, sd 2, se 2/sqrt(3), t(0.975, 2) = 4.302653
    assert iv.estimate == 12.0 and iv.n == 3
    assert iv.high - 12.0 == pytest.approx(4.302653 * 2 / math.sqrt(3), rel=1e-6)
    single = t_interval([5.0])
    assert single.n == 1 and math.isnan(single.low) and single.estimate == 5.0


def test_repeat_ratio_interval_pairs_by_repeat():
    iv = repeat_ratio_interval([20.0, 22.0, 18.0], [10.0, 11.0, 9.0])
    assert iv.estimate == pytest.approx(2.0) and iv.low == pytest.approx(2.0) and iv.n == 3
    with pytest.raises(ValueError):
        repeat_ratio_interval([1.0], [1.0, 2.0])


def test_wilson_interval_known_values():
    iv = wilson_interval(8, 10)
    assert iv.estimate == 0.8
    assert iv.low == pytest.approx(0.4902, abs=1e-3) and iv.high == pytest.approx(0.9433, abs=1e-3)
    zero = wilson_interval(0, 20)
    assert zero.low == 0.0 and 0.1 < zero.high < 0.2  # Wald would give [0, 0]
    assert math.isnan(wilson_interval(0, 0).estimate)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_mcnemar_exact_and_chi_square():
    exact = mcnemar_counts(0, 6)
    assert exact.method == "exact-binomial" and exact.p_value == pytest.approx(2 * 0.5**6)
    assert mcnemar_counts(3, 3).p_value == pytest.approx(1.0)
    big = mcnemar_counts(10, 30)
    assert big.method == "chi2-continuity" and big.p_value == pytest.approx(0.002663, rel=1e-3)
    assert mcnemar_counts(0, 0).p_value == 1.0


def test_mcnemar_from_pass_maps_counts_only_discordant_common_pairs():
    base = {0: True, 1: True, 2: False, 3: False, 4: True}
    cand = {0: True, 1: False, 2: True, 3: False, 9: False}
    r = mcnemar(cand, base)
    assert (r.n_pairs, r.b, r.c) == (4, 1, 1)


def _curve(loads, speedups, width=0.05):
    return [LoadSpeedup(x, s, s * (1 - width), s * (1 + width)) for x, s in zip(loads, speedups, strict=True)]


def test_crossover_interpolates_log_speedup_between_bracketing_loads():
    pts = _curve([1, 4, 8, 16], [2.0, 1.5, 1.2, 0.8])
    c = crossover(pts)
    s1, s2 = math.log(1.2), math.log(0.8)
    assert c.status is CrossoverStatus.CROSSES
    assert c.load == pytest.approx(8 + 8 * s1 / (s1 - s2))
    assert c.method == "interval-endpoints"
    assert 8 <= c.low < c.load < c.high <= 16
    assert crossover(pts, log_load=True).load == pytest.approx(math.exp(math.log(8) + math.log(2) * s1 / (s1 - s2)))


def test_crossover_statuses_and_censoring():
    assert crossover(_curve([1, 2, 4], [1.5, 1.3, 1.1])).status is CrossoverStatus.ALWAYS_FASTER
    never = crossover(_curve([1, 2, 4], [0.9, 0.8, 0.7]))
    assert never.status is CrossoverStatus.NEVER_FASTER and never.load is None
    rises = crossover(_curve([1, 4], [1.0, 1.43]))  # not faster alone, faster under load: no crossing from above
    assert rises.status is CrossoverStatus.RISES and rises.load is None
    assert crossover(_curve([1], [2.0])).status is CrossoverStatus.TOO_FEW_LOADS
    # The upper curve never drops below 1: the interval runs past the highest load measured.
    wide = crossover(_curve([1, 2, 4], [1.5, 1.2, 0.97], width=0.1))
    assert wide.status is CrossoverStatus.CROSSES and wide.high_censored and wide.high == 4
    assert wide.to_dict()["status"] == "crosses"


def test_first_crossings_of_many_curves_at_once():
    # one implementation for the sweep's crossover and the load search (harness/search): each row its own curve
    loads = np.array([1.0, 4.0, 16.0])
    curves = np.array([[0.4, 0.2, -0.2], [0.4, -0.4, -0.6], [-0.1, 0.3, 0.2], [0.3, 0.2, 0.1], [0.2, 0.0, -1.0]])
    got = first_crossings(loads, curves, log_load=False)
    assert got[0] == pytest.approx(10.0) and got[1] == pytest.approx(2.5)
    assert got[2] == -math.inf and got[3] == math.inf
    assert got[4] == pytest.approx(4.0)  # reaching 0 exactly is the crossing
    assert first_crossings(loads, curves[:1], log_load=True)[0] == pytest.approx(8.0)  # halfway in log load


def test_crossover_from_bootstrap_replicates_of_synthetic_sweep():
    # Synthetic sweep: true speedup 2.0 at concurrency 1 falling linearly in log load to 0.7 at 32;
    # true crossover where log-linear curve hits 1.
    rng = np.random.default_rng(5)
    loads = [1, 2, 4, 8, 16, 32]
    true = {x: 2.0 * (0.7 / 2.0) ** (math.log(x) / math.log(32)) for x in loads}
    points = []
    for x in loads:
        n = 80
        prompt = rng.normal(-4, 0.4, n)
        base = np.exp(prompt + rng.normal(0, 0.1, n))
        cand = np.exp(prompt + rng.normal(0, 0.1, n)) / true[x]
        comparison = compare_paired("tpot_s", dict(enumerate(cand)), dict(enumerate(base)), rng, n_resamples=1000)
        points.append(LoadSpeedup.from_comparison(x, comparison))
    c = crossover(points, log_load=True)
    true_cross = math.exp(math.log(32) * math.log(2.0) / math.log(2.0 / 0.7))
    assert c.method == "bootstrap-replicates" and c.status is CrossoverStatus.CROSSES
    assert c.low < true_cross < c.high
    assert c.low >= 8 and c.high <= 16  # the bracketing loads
    assert c.load == pytest.approx(true_cross, rel=0.1)
    # Without replicates the endpoint method still brackets the truth (it is wider: pointwise bands).
    bare = crossover([LoadSpeedup(p.load, p.speedup, p.low, p.high) for p in points], log_load=True)
    assert bare.method == "interval-endpoints" and bare.low <= true_cross <= bare.high


def test_cluster_ratio_interval_is_the_ratio_of_sums_with_a_delta_method_t_interval():
    from speculab.harness.stats import cluster_ratio_interval

    iv = cluster_ratio_interval([8, 6, 9, 3], [10, 10, 10, 5])
    assert iv.estimate == pytest.approx(26 / 35) and iv.n == 4 and iv.method == "ratio-t (clusters)"
    r = 26 / 35
    resid = [8 - r * 10, 6 - r * 10, 9 - r * 10, 3 - r * 5]
    se = math.sqrt(4 / 3 * sum(x * x for x in resid)) / 35
    assert iv.high - iv.estimate == pytest.approx(scipy.stats.t.ppf(0.975, 3) * se)
    one = cluster_ratio_interval([3, 5], [0, 10])  # a cluster with nothing attempted carries nothing
    assert one.n == 1 and one.estimate == 0.5 and math.isnan(one.low)
    assert math.isnan(cluster_ratio_interval([], []).estimate)
