"""Paired A/B statistics: pairing rules, intervals, verdicts, A-vs-A false-positive rate, detection of 1.3x."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from speculab.harness.analysis.comparison.metric_comparison import Direction, min_detectable_change
from speculab.harness.analysis.comparison.paired import (
    bootstrap_geomean_ratio,
    bootstrap_median_ratio,
    compare_paired,
    paired_ratios,
    wilcoxon_log_ratios,
)
from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import describe


def _arms(rng: np.random.Generator, n: int, effect: float = 1.0, prompt_sd: float = 0.5, noise_sd: float = 0.15):
    """Per-prompt TPOTs: a shared prompt effect (long prompts are slow in both arms) plus per-arm noise."""
    prompt = rng.normal(math.log(0.02), prompt_sd, n)
    base = np.exp(prompt + rng.normal(0, noise_sd, n))
    cand = np.exp(prompt + rng.normal(0, noise_sd, n)) * effect
    return dict(enumerate(cand.tolist())), dict(enumerate(base.tolist()))


def test_describe_still_summarises():
    d = describe([1.0, 2.0, 3.0])
    assert (d.n, d.mean, d.p50) == (3, 2.0, 2.0)
    # the definitions docs/metrics.md gives: sample std (ddof=1), linear-interpolated percentiles
    d = describe(float(x) for x in range(1, 11))
    assert d.std == pytest.approx(math.sqrt(55 / 6)) and (d.min, d.max) == (1.0, 10.0)
    assert (d.p50, d.p90, d.p95, d.p99) == pytest.approx((5.5, 9.1, 9.55, 9.91))
    one = describe([0.25])
    assert (one.n, one.mean, one.p99) == (1, 0.25, 0.25) and math.isnan(one.std)  # no spread from one value
    assert describe([]).n == 0 and math.isnan(describe([]).mean)


def test_pairing_keeps_only_indices_usable_in_both():
    cand = {0: 2.0, 1: 1.0, 2: float("nan"), 3: 4.0, 5: 0.0, 6: 3.0}
    base = {0: 1.0, 1: 2.0, 2: 1.0, 4: 1.0, 5: 1.0, 6: float("inf")}
    p = paired_ratios(cand, base)
    assert p.indices == (0, 1)
    assert p.ratios == (2.0, 0.5)
    assert p.n_dropped == 5  # 2 nan, 3 and 4 one-sided, 5 zero, 6 inf
    assert p.to_dict()["ratios"] == [2.0, 0.5]


def test_geomean_and_median_estimates_are_exact_on_known_ratios():
    ratios = paired_ratios({i: v for i, v in enumerate([1.0, 2.0, 4.0, 8.0])}, {i: 1.0 for i in range(4)})
    rng = np.random.default_rng(0)
    geo = bootstrap_geomean_ratio(ratios, rng, 500).interval
    med = bootstrap_median_ratio(ratios, rng, 500).interval
    assert geo.estimate == pytest.approx(2**1.5)
    assert med.estimate == pytest.approx(3.0)
    assert geo.low < geo.estimate < geo.high and med.low <= med.estimate <= med.high


def test_bca_interval_covers_like_a_t_interval_on_normal_logs():
    # For normal log ratios the BCa interval should be close to the exact t-interval of the mean log.
    rng = np.random.default_rng(3)
    x = rng.normal(0.1, 0.2, 200)
    ratios = paired_ratios(dict(enumerate(np.exp(x).tolist())), {i: 1.0 for i in range(200)})
    geo = bootstrap_geomean_ratio(ratios, np.random.default_rng(4), 4000).interval
    half = scipy_stats.t.ppf(0.975, 199) * x.std(ddof=1) / math.sqrt(200)
    assert math.log(geo.low) == pytest.approx(x.mean() - half, abs=0.01)
    assert math.log(geo.high) == pytest.approx(x.mean() + half, abs=0.01)


def test_identical_ratios_give_a_degenerate_interval_not_nan():
    ratios = paired_ratios({i: 2.0 for i in range(10)}, {i: 1.0 for i in range(10)})
    geo = bootstrap_geomean_ratio(ratios, np.random.default_rng(0), 200).interval
    assert geo.low == geo.high == pytest.approx(2.0)
    assert wilcoxon_log_ratios(ratios) < 0.01
    assert wilcoxon_log_ratios(paired_ratios({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0})) == 1.0


def test_a_vs_a_says_no_detectable_difference():
    rng = np.random.default_rng(2026)
    cand, base = _arms(rng, 80)
    c = compare_paired("tpot_s", cand, base, rng)
    assert c.verdict is Direction.NO_DIFFERENCE
    assert c.geomean_ratio.low < 1 < c.geomean_ratio.high
    assert 0 < c.min_detectable_change < 0.2  # noise sd 0.15 * sqrt(2) over 80 prompts: ~6% detectable
    d = c.to_dict()
    assert d["verdict"] == "no detectable difference" and d["n_pairs"] == 80


def test_a_vs_a_false_positive_rate_is_about_five_percent():
    # 400 seeded A-vs-A runs: the verdict is a 95% interval, so ~5% should (wrongly) call a difference.
    # Binomial(400, 0.05) has sd 1.1 percentage points; 2%..9% is beyond 2.5 sd either way.
    rng = np.random.default_rng(12345)
    runs = 400
    false_pos = 0
    wilcoxon_pos = 0
    for _ in range(runs):
        cand, base = _arms(rng, 50)
        c = compare_paired("tpot_s", cand, base, rng, n_resamples=1000)
        false_pos += c.verdict is not Direction.NO_DIFFERENCE
        wilcoxon_pos += c.wilcoxon_p < 0.05
    assert 0.02 <= false_pos / runs <= 0.09
    assert 0.02 <= wilcoxon_pos / runs <= 0.09


def test_a_1_3x_effect_is_detected_in_both_directions():
    rng = np.random.default_rng(7)
    cand, base = _arms(rng, 60, effect=1 / 1.3)  # candidate 1.3x faster
    c = compare_paired("tpot_s", cand, base, rng)
    assert c.verdict is Direction.FASTER
    assert c.speedup == pytest.approx(1.3, rel=0.08)
    lo, hi = c.speedup_interval
    assert lo < 1.3 < hi and lo > 1
    assert c.wilcoxon_p < 1e-6

    cand, base = _arms(rng, 60, effect=1.3)
    assert compare_paired("tpot_s", cand, base, rng).verdict is Direction.SLOWER


def test_higher_is_better_metrics_flip_the_verdict():
    rng = np.random.default_rng(8)
    cand, base = _arms(rng, 60, effect=1.3)  # candidate's values are higher: good for tok/s
    c = compare_paired("output_tok_s", cand, base, rng, lower_is_better=False)
    assert c.verdict is Direction.FASTER
    assert c.speedup == pytest.approx(c.verdict_ratio.estimate)  # not inverted for higher-is-better metrics


def test_too_few_pairs_gives_no_verdict():
    rng = np.random.default_rng(0)
    cand, base = _arms(rng, MIN_PAIRS - 1, effect=0.5)
    c = compare_paired("tpot_s", cand, base, rng)
    assert c.verdict is Direction.INSUFFICIENT and c.note is not None
    assert (c.note.kind, c.note.fields) == (WarningKind.METRIC_FEW_PAIRS, {"pairs": MIN_PAIRS - 1, "needed": MIN_PAIRS})


def test_minimum_detectable_change_shrinks_with_sample_size():
    rng = np.random.default_rng(11)
    small = compare_paired("tpot_s", *_arms(rng, 20), rng).min_detectable_change
    large = compare_paired("tpot_s", *_arms(rng, 500), rng).min_detectable_change
    assert large < small / 3  # ~ 1/sqrt(n): sqrt(25) = 5


def test_minimum_detectable_change_definition():
    from speculab.harness.stats import Interval

    # log half-width 1.96 * SE with SE = 0.05 -> (1.96 + 0.8416) * 0.05 in log space
    iv = Interval(1.0, math.exp(-1.959964 * 0.05), math.exp(1.959964 * 0.05), 0.95, "x", 10)
    assert min_detectable_change(iv) == pytest.approx(math.expm1(2.801564 * 0.05), rel=1e-4)


def test_results_are_reproducible_with_the_same_seed():
    cand, base = _arms(np.random.default_rng(1), 40)
    a = compare_paired("tpot_s", cand, base, np.random.default_rng(9)).to_dict()
    b = compare_paired("tpot_s", cand, base, np.random.default_rng(9)).to_dict()
    assert a == b


# ---------------------------------------------------------------------------------------------------------------
# Concurrency > 1: prompts sent together share their conditions, so the verdict's units are groups of them.
# ---------------------------------------------------------------------------------------------------------------


def _co_running_arms(rng: np.random.Generator, n: int, width: int, effect: float = 1.0, shared_sd: float = 0.03,
                     own_sd: float = 0.003):  # fmt: skip
    """Per-prompt TPOTs at concurrency `width`: in each arm the prompts of one wave (sent together) share one
    draw of the conditions (a stall, the batch's step time), on top of a tiny per-request noise; what
    bench/a_vs_a_mock.py measured against the mock at concurrency 4 (±0.7% shared, ±0.1% own)."""
    prompt = rng.normal(math.log(0.02), 0.5, n)
    wave = np.arange(n) // width
    waves = wave[-1] + 1
    base = np.exp(prompt + rng.normal(0, shared_sd, waves)[wave] + rng.normal(0, own_sd, n))
    cand = np.exp(prompt + rng.normal(0, shared_sd, waves)[wave] + rng.normal(0, own_sd, n)) * effect
    return dict(enumerate(cand.tolist())), dict(enumerate(base.tolist()))


def test_concurrent_groups_cut_the_send_order():
    from speculab.harness.analysis.groups import concurrent_groups

    assert concurrent_groups([7, 3, 5, 1, 9], 2) == {7: 0, 3: 0, 5: 1, 1: 1, 9: 2}  # send order, not index order
    assert concurrent_groups([0, 1, 2], 1) == {0: 0, 1: 1, 2: 2}
    with pytest.raises(ValueError):
        concurrent_groups([0], 0)


def test_grouped_ratios_are_geometric_means_and_keep_ungrouped_pairs():
    from speculab.harness.analysis.comparison.paired import grouped_ratios

    pairs = paired_ratios({0: 2.0, 1: 8.0, 2: 3.0, 5: 1.0}, {0: 1.0, 1: 1.0, 2: 1.0, 5: 1.0, 6: 1.0})
    units = grouped_ratios(pairs, {0: 0, 1: 0, 2: 1})  # index 5 has no group: its own unit, after the groups
    assert units.indices == (0, 1, 5) and units.ratios == pytest.approx((4.0, 3.0, 1.0))
    assert units.n_dropped == pairs.n_dropped == 1


def test_co_running_noise_fools_per_prompt_pairs_but_not_groups():
    # 300 A-vs-A runs at concurrency 4 with 32 prompts: per-prompt pairs are not independent, and counting them as
    # such calls identical arms different in a third of the runs; the same runs judged on groups of 4 (8 units)
    # hold the 95% interval's promise. Binomial(300, 0.05) sd 1.3 points.
    from speculab.harness.analysis.groups import concurrent_groups

    rng = np.random.default_rng(4)
    groups = concurrent_groups(range(32), 4)
    per_prompt = grouped = 0
    for _ in range(300):
        cand, base = _co_running_arms(rng, 32, 4)
        per_prompt += compare_paired("tpot_s", cand, base, rng, n_resamples=200).verdict is not Direction.NO_DIFFERENCE
        c = compare_paired("tpot_s", cand, base, rng, n_resamples=200, groups=groups, group_size=4)
        grouped += c.verdict is not Direction.NO_DIFFERENCE
        assert (c.n_pairs, c.n_units, c.group_size) == (32, 8, 4)
    assert per_prompt / 300 > 0.3
    assert grouped / 300 <= 0.075


def test_groups_still_detect_a_real_speedup_and_say_when_there_are_too_few():
    from speculab.harness.analysis.groups import concurrent_groups

    rng = np.random.default_rng(5)
    cand, base = _co_running_arms(rng, 24, 4, effect=1 / 1.3)
    c = compare_paired("tpot_s", cand, base, rng, groups=concurrent_groups(range(24), 4), group_size=4)
    assert c.verdict is Direction.FASTER and c.n_units == 6
    assert c.speedup_interval[0] < 1.3 < c.speedup_interval[1]
    assert c.to_dict()["n_units"] == 6 and c.to_dict()["group_size"] == 4
    cand, base = _co_running_arms(rng, 16, 4, effect=1 / 1.3)
    c = compare_paired("tpot_s", cand, base, rng, groups=concurrent_groups(range(16), 4), group_size=4)
    assert c.verdict is Direction.INSUFFICIENT and c.n_pairs == 16 and c.n_units == 4
    assert c.note == ReportWarning(
        WarningKind.METRIC_FEW_GROUPS, fields={"groups": 4, "group_size": 4, "pairs": 16, "needed": MIN_PAIRS}
    )


def test_group_size_one_rule_for_the_plan_and_the_verdict():
    from speculab.harness.analysis.groups import group_size, groups_needed

    assert group_size("concurrency", 4) == 4 and group_size("concurrency", 0.4) == 1
    assert group_size("rate", 8.0) == 1  # before the run: nothing measured in flight
    assert group_size("rate", 8.0, (2.6, None, 3.4)) == 3 and group_size("trace", 2.0, (None,)) == 1
    assert groups_needed(4) == "need at least 6 groups: use at least 24 prompts at this load"
    assert groups_needed(2, "conversations").endswith("use at least 12 conversations at this load")
