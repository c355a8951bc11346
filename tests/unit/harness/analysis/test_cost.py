"""Cost per token, SLO goodput and capacity planning."""

from __future__ import annotations

import math

import pytest

from speculab.config import ArmPrice, SloTargets
from speculab.harness.analysis.cost import (
    HOURS_PER_MONTH,
    LoadResult,
    capacity_plan,
    compare_plans,
    cost_interval,
    cost_ratio_interval,
    goodput_rate_rps,
    slo_attainment,
    usd_per_million_tokens,
)


def test_usd_per_million_tokens():
    # $3.60/GPU-h, 1 GPU, 1000 tok/s = 3.6M tok/h -> $1 per 1M tokens
    assert usd_per_million_tokens(1000.0, ArmPrice(3.6)) == pytest.approx(1.0)
    assert usd_per_million_tokens(1000.0, ArmPrice(3.6, gpus=2)) == pytest.approx(2.0)
    assert usd_per_million_tokens(0.0, ArmPrice(3.6)) == math.inf
    with pytest.raises(ValueError):
        ArmPrice(1.0, gpus=0)


def test_cost_interval_maps_throughput_bounds_inversely():
    iv = cost_interval([900.0, 1000.0, 1100.0], ArmPrice(3.6))
    assert iv.n == 3 and iv.estimate == pytest.approx(1.0)
    assert iv.low < 1.0 < iv.high
    # t(0.975, 2) * 100/sqrt(3) = 248.4 -> tok/s in [751.6, 1248.4]
    assert iv.high == pytest.approx(1000 / 751.6, rel=1e-3) and iv.low == pytest.approx(1000 / 1248.4, rel=1e-3)
    one = cost_interval([1000.0], ArmPrice(3.6))
    assert one.n == 1 and one.estimate == pytest.approx(1.0) and math.isnan(one.low)


def test_cost_ratio_includes_price_and_gpu_difference():
    # Candidate twice the throughput but on 2 GPUs: same cost per token.
    iv = cost_ratio_interval([2000.0, 2200.0], [1000.0, 1100.0], ArmPrice(2.0, 2), ArmPrice(2.0, 1))
    assert iv.estimate == pytest.approx(1.0)


def test_slo_attainment_counts_failed_requests_as_misses():
    slo = SloTargets(ttft_s=0.5, tpot_s=0.05)
    reqs = [(0.1, 0.01, 1.0), (0.6, 0.01, 1.0), (0.1, 0.06, 1.0), (None, None, None), (0.2, 0.02, 99.0)]
    assert slo_attainment(reqs, slo) == pytest.approx(2 / 5)  # e2e unconstrained
    assert math.isnan(slo_attainment([], slo))


def test_goodput_is_highest_passing_rate_below_the_first_failure():
    slo = SloTargets(tpot_s=0.05, attainment=0.9)
    levels = [
        LoadResult(1, 1.0, 1.0),
        LoadResult(4, 3.9, 0.95),
        LoadResult(8, 7.5, 0.7),  # fails
        LoadResult(16, 9.0, 0.92),  # passes again: noise, ignored
    ]
    assert goodput_rate_rps(levels, slo) == 3.9
    assert goodput_rate_rps([LoadResult(1, 1.0, 0.5)], slo) is None


def test_capacity_plan_and_monthly_difference():
    plan = capacity_plan(10.0, 2.5, ArmPrice(2.0, gpus=1))
    assert (plan.replicas, plan.gpus) == (4, 4)
    assert plan.usd_per_month == pytest.approx(4 * 2.0 * HOURS_PER_MONTH)
    assert capacity_plan(10.0, 3.0, ArmPrice(2.0)).replicas == 4  # ceil(3.33)
    assert capacity_plan(10.0, None, ArmPrice(2.0)).replicas is None

    slo = SloTargets(tpot_s=0.05)
    base = [LoadResult(1, 1.0, 1.0), LoadResult(4, 2.0, 0.95), LoadResult(8, 3.0, 0.5)]
    cand = [LoadResult(1, 1.0, 1.0), LoadResult(4, 4.0, 0.99), LoadResult(8, 5.0, 0.8)]
    cmp_ = compare_plans(20.0, base, cand, slo, ArmPrice(2.0), ArmPrice(2.0))
    assert cmp_.baseline.gpus == 10 and cmp_.candidate.gpus == 5
    assert cmp_.gpu_difference == -5
    assert cmp_.monthly_difference_usd == pytest.approx(-5 * 2.0 * 730)
    assert cmp_.to_dict()["hours_per_month"] == 730
