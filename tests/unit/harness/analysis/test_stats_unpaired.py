"""The unpaired comparison (`compare` of two runs that sent different prompts): the exact rank-sum distribution,
the two-sample Hodges-Lehmann shift with its interval, and the verdict built on them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from speculab.harness.analysis.comparison.margin import Decision
from speculab.harness.analysis.comparison.metric_comparison import Direction
from speculab.harness.analysis.comparison.unpaired import compare_unpaired
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import ranks
from speculab.harness.stats.ranks import (
    _rank_sum_cdf,
    hodges_lehmann_shift,
    rank_sum_cdf,
    rank_sum_critical_k,
    rank_sum_p,
)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 5), (3, 4), (5, 5), (6, 2), (7, 9)])
def test_the_exact_null_distribution_counts_every_split_of_the_ranks(m, n):
    counts = np.zeros(m * n + 1)
    for xs in itertools.combinations(range(m + n), m):  # the ranks of x; U = rank sum - m(m-1)/2 (0-based ranks)
        counts[sum(xs) - m * (m - 1) // 2] += 1
    np.testing.assert_allclose(_rank_sum_cdf(m, n), np.cumsum(counts) / counts.sum(), atol=1e-12)
    np.testing.assert_allclose(_rank_sum_cdf(n, m), _rank_sum_cdf(m, n), atol=1e-12)


def test_the_exact_distribution_agrees_with_the_normal_one_where_they_meet():
    m, n = 80, 300  # the largest exact smaller sample: within 1e-3 of the continuity-corrected normal
    mn, sd = m * n, math.sqrt(m * n * (m + n + 1) / 12)
    for u in (mn / 2 - 3 * sd, mn / 2 - 2 * sd, mn / 2 - sd, mn / 2):
        normal = float(scipy_stats.norm.cdf((math.floor(u) + 0.5 - mn / 2) / sd))
        assert rank_sum_cdf(u, m, n) == pytest.approx(normal, abs=1e-3)


@pytest.mark.parametrize(("m", "n"), [(6, 6), (10, 12), (40, 38), (80, 300), (120, 150)])
def test_p_is_mann_whitneys(m, n):
    rng = np.random.default_rng(m * 1000 + n)
    for shift in (0.0, 0.3, 0.8):
        x, y = rng.normal(shift, 1, m), rng.normal(0, 1, n)
        method = "exact" if min(m, n) <= 80 else "asymptotic"
        want = scipy_stats.mannwhitneyu(x, y, method=method, use_continuity=True).pvalue
        assert rank_sum_p(x, y) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_the_interval_excludes_no_shift_exactly_when_p_is_below_alpha():
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(300):
        m, n = rng.integers(6, 40, size=2)
        x, y = rng.normal(rng.uniform(-1, 1), 1, m), rng.normal(0, 1, n)
        est, lo, hi = hodges_lehmann_shift(x, y)
        assert est == pytest.approx(float(np.median(np.subtract.outer(x, y))))
        excludes = lo > 0 or hi < 0
        assert excludes == (rank_sum_p(x, y) <= 0.05), (m, n, lo, hi, rank_sum_p(x, y))
        seen.add(excludes)
    assert seen == {True, False}  # both outcomes were exercised


def test_the_bisection_path_finds_the_same_order_statistics(monkeypatch):
    rng = np.random.default_rng(2)
    x, y = rng.lognormal(0, 1, 57), rng.lognormal(0.2, 1, 43)
    built = hodges_lehmann_shift(x, y)
    monkeypatch.setattr(ranks, "MATERIALISE_DIFFERENCES_MAX_MN", 10)
    assert hodges_lehmann_shift(x, y) == pytest.approx(built, abs=1e-9)


def test_no_interval_with_samples_too_small_for_one():
    assert rank_sum_critical_k(3, 3) == 0  # the most extreme of 20 splits is already 1/20 > 2.5 %
    assert rank_sum_critical_k(4, 4) == 1
    est, lo, hi = hodges_lehmann_shift(np.array([1.0, 2, 3]), np.array([0.0, 1, 2]))
    assert est == 1.0 and math.isnan(lo) and math.isnan(hi)


def test_the_interval_covers_the_true_shift_at_its_confidence():
    # heavy-ish tails (log-normal times with a t-distributed log): the rank-sum interval is exact under a shift
    rng = np.random.default_rng(3)
    true = math.log(0.8)
    covered = 0
    for _ in range(400):
        x = true + rng.standard_t(4, 20) * 0.3
        y = rng.standard_t(4, 27) * 0.3
        _, lo, hi = hodges_lehmann_shift(x, y)
        covered += lo <= true <= hi
    assert 0.93 <= covered / 400 <= 0.985


def _tpot(rng: np.random.Generator, n: int, median_s: float, spread: float = 0.15) -> dict[int, float]:
    return {i: float(v) for i, v in enumerate(median_s * np.exp(rng.normal(0, spread, n)))}


def test_a_1_5x_faster_candidate_is_faster_with_the_true_ratio_inside():
    rng = np.random.default_rng(4)
    c = compare_unpaired("tpot_s", _tpot(rng, 37, 0.020), _tpot(rng, 40, 0.030), rng, n_resamples=500)
    lo, hi = c.speedup_interval
    assert c.verdict is Direction.FASTER and c.decision is Decision.FASTER
    assert lo < 1.5 < hi and c.speedup == pytest.approx(1.5, rel=0.1)
    assert c.samples == (37, 40) and c.n_pairs == 0 and c.n_units == 77
    assert c.hodges_lehmann_ratio is not None and c.hodges_lehmann_ratio.method == "rank-sum-exact"
    assert c.geomean_ratio.low < c.geomean_ratio.estimate < c.geomean_ratio.high
    assert len(c.replicates) == 500
    assert c.to_dict()["samples"] == [37, 40]


def test_two_samples_of_one_server_are_equivalent_when_there_are_enough():
    rng = np.random.default_rng(5)
    c = compare_unpaired("tpot_s", _tpot(rng, 300, 0.030, 0.05), _tpot(rng, 280, 0.030, 0.05), rng, n_resamples=200)
    assert c.verdict is Direction.NO_DIFFERENCE and c.decision is Decision.EQUIVALENT
    assert c.hodges_lehmann_ratio.method == "rank-sum-normal"


def test_identical_servers_are_called_different_about_one_run_in_twenty():
    rng = np.random.default_rng(6)
    runs = 400
    different = 0
    for _ in range(runs):
        c = compare_unpaired("tpot_s", _tpot(rng, 24, 0.03), _tpot(rng, 30, 0.03), rng, n_resamples=20)
        different += c.verdict in (Direction.FASTER, Direction.SLOWER)
    assert 0.02 <= different / runs <= 0.08


def test_requests_sent_together_are_counted_as_groups():
    rng = np.random.default_rng(7)
    c = compare_unpaired("tpot_s", _tpot(rng, 40, 0.02), _tpot(rng, 38, 0.03), rng, n_resamples=100, group_size=4)
    assert c.n_units == 10 + 10 and c.group_size == 4 and c.samples == (40, 38)  # 38 = 9 runs of 4 and one of 2


def test_too_few_requests_give_no_verdict_and_say_how_many_there_were():
    rng = np.random.default_rng(8)
    c = compare_unpaired("tpot_s", _tpot(rng, 5, 0.02), _tpot(rng, 30, 0.03), rng, n_resamples=100)
    assert c.verdict is Direction.INSUFFICIENT and c.decision is Decision.INSUFFICIENT
    fields = {"candidate": 5, "baseline": 30, "group_size": 1, "needed": 6}  # the words: test_verdict_words
    assert c.note == ReportWarning(WarningKind.METRIC_FEW_SAMPLES, fields=fields)


def test_unusable_values_are_counted_not_used():
    rng = np.random.default_rng(9)
    cand = {**_tpot(rng, 20, 0.02), 100: 0.0, 101: float("nan")}
    c = compare_unpaired("tpot_s", cand, _tpot(rng, 20, 0.03), rng, n_resamples=100)
    assert c.n_dropped == 2 and c.samples == (20, 20)


def test_groups_are_cut_within_a_repeat_and_before_unusable_values_are_left_out():
    # 2 repeats of 5 requests at concurrency 4 (keys repeat << 32 | index): runs 0-3 and 4 in each repeat, never one
    # run across the two repeats; a NaN at index 1 stays out of its run without shifting the runs after it
    rng = np.random.default_rng(10)
    one = {(rep << 32) + i: 0.02 for rep in (1, 2) for i in range(5)}
    c = compare_unpaired("tpot_s", {**one, (1 << 32) + 1: float("nan")}, one, rng, n_resamples=20, group_size=4)
    assert c.n_units == 4 + 4 and c.samples == (9, 10) and c.n_dropped == 1
