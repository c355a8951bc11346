"""The load search's policy (issue 39 items 1, 2): where it probes, when it stops, what a probe and a search cost."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.search import (
    RISES,
    STOP_BUDGET,
    STOP_FASTER,
    STOP_RISES,
    STOP_SLOWER,
    STOP_TOLERANCE,
    Probe,
    SearchSpec,
    fit_crossover,
    next_loads,
    probe_prompts,
    run_search,
    search_budget,
    stop_reason,
)
from speculab.harness.search.fit import decided_sign
from speculab.harness.search.policy import first_round, probe_groups, units_to_decide

SPEC = SearchSpec("concurrency", 1, 48, tolerance=12, max_probes=10)


def exact_truth(log_effect, n: int = 6):
    return lambda c, groups: Probe(c, (log_effect(c),) * n)


def done_means(c: float) -> float:
    return math.log(2 / (1 + (c - 1) / 15.5))  # 2x at one stream, the time ratio linear in streams: crosses at 16.5


def test_the_first_round_probes_both_ends_and_the_geometric_middle() -> None:
    assert next_loads(SPEC, [], None) == (1, 7, 48)
    assert next_loads(SearchSpec("concurrency", 1, 2, 1.5, 3), [], None) == (1, 2)
    assert next_loads(SearchSpec("rate", 0.5, 8, 1, 5), [], None) == (0.5, 2, 8)
    # a first round cut short is finished before anything else
    assert next_loads(SPEC, [Probe(1, (0.5,) * 6)], None) == (7, 48)


def test_a_first_round_load_without_units_is_measured_again() -> None:
    # every request at 48 failed: no verdict, no units; the budget counts the probe, the search measures it again
    probes = [Probe(1, (0.5,) * 6), Probe(7, (0.3,) * 6), Probe(48, ())]
    fit = fit_crossover(probes, np.random.default_rng(0))
    assert next_loads(SPEC, probes, fit) == (48,)
    probes = [Probe(1, ()), Probe(7, ()), Probe(48, ())]
    assert next_loads(SPEC, probes, fit_crossover(probes, np.random.default_rng(0))) == (1, 7, 48)
    probes = probes + [Probe(1, ())] * 7
    assert next_loads(SPEC, probes, fit_crossover(probes, np.random.default_rng(0))) == ()  # the budget


def test_exact_truth_stops_at_the_tolerance_within_the_budget() -> None:
    out = run_search(SPEC, exact_truth(done_means), np.random.default_rng(0))
    assert out.reason == STOP_TOLERANCE
    assert out.fit.low <= 16.5 <= out.fit.high and out.fit.width <= 12
    assert len(out.probes) <= 10
    loads = [p.load for p in out.probes]
    assert all(1 <= x <= 48 and float(x).is_integer() for x in loads)
    assert len(set(loads)) == len(loads)  # no noise: nothing needs measuring twice


def test_a_tight_tolerance_bisects_down_to_neighbouring_streams() -> None:
    spec = SearchSpec("concurrency", 1, 48, tolerance=1, max_probes=12)
    out = run_search(spec, exact_truth(done_means), np.random.default_rng(0))
    assert out.reason == STOP_TOLERANCE
    assert (out.fit.low, out.fit.high) == (16, 17)


def test_the_budget_stops_a_search_that_cannot_narrow() -> None:
    rng = np.random.default_rng(1)
    spec = SearchSpec("concurrency", 1, 48, tolerance=1.5, max_probes=6)

    def noisy(c: float, groups: int) -> Probe:
        return Probe(c, tuple(done_means(c) + 0.5 * rng.standard_normal(6)))

    out = run_search(spec, noisy, np.random.default_rng(2))
    assert out.reason == STOP_BUDGET and len(out.probes) == 6
    assert next_loads(spec, out.probes, out.fit) == ()


def test_an_answer_found_with_the_last_probe_is_the_reason_not_the_budget() -> None:
    spec = SearchSpec("concurrency", 1, 48, tolerance=12, max_probes=5)
    out = run_search(spec, exact_truth(done_means), np.random.default_rng(0))
    assert (len(out.probes), out.reason) == (5, STOP_TOLERANCE)


def test_never_crossing_stops_once_both_ends_are_decided() -> None:
    out = run_search(SPEC, exact_truth(lambda c: 0.2), np.random.default_rng(0))
    assert (out.reason, len(out.probes)) == (STOP_FASTER, 3)
    assert out.fit.low == 48 and out.fit.high is None
    out = run_search(SPEC, exact_truth(lambda c: -0.2), np.random.default_rng(0))
    assert (out.reason, len(out.probes)) == (STOP_SLOWER, 3)


def test_an_undecided_end_is_measured_again() -> None:
    probes = [Probe(1, (0.7,) * 6), Probe(7, (0.5,) * 6), Probe(48, (0.5, -0.4, 0.3, -0.3, 0.2, -0.1))]
    fit = fit_crossover(probes, np.random.default_rng(0))
    assert stop_reason(SPEC, probes, fit) is None
    assert next_loads(SPEC, probes, fit) == (48,)


def test_rate_loads_stay_in_range_and_need_not_be_whole() -> None:
    spec = SearchSpec("rate", 0.5, 20, tolerance=1, max_probes=12)
    out = run_search(spec, exact_truth(lambda r: math.log(1.5) - 0.1 * r), np.random.default_rng(0))
    truth = 10 * math.log(1.5)
    assert out.reason == STOP_TOLERANCE and out.fit.low <= truth <= out.fit.high
    assert all(0.5 <= p.load <= 20 for p in out.probes)
    assert any(not float(p.load).is_integer() for p in out.probes)


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"kind": "streams"}, "search kind"),
        ({"kind": "rate", "tolerance": 0}, "tolerance must be above 0"),
        ({"low": 8, "high": 4}, "0 < low < high"),
        ({"low": 1.5}, "whole numbers"),
        ({"tolerance": 0.5}, "tolerance must be at least 1 stream"),
        ({"max_probes": 2}, "max_probes must be at least 3"),
        ({"groups": 5}, "at least 6 groups"),
        ({"groups": 8, "max_groups": 7}, "max_groups must be at least groups"),
    ],
)
def test_a_spec_that_cannot_search_says_why(kwargs: dict, fix: str) -> None:
    args = {"kind": "concurrency", "low": 1, "high": 48, "tolerance": 12, "max_probes": 10, **kwargs}
    with pytest.raises(ValueError, match=fix):
        SearchSpec(**args)


def test_probe_prompts_sends_the_groups_a_verdict_needs() -> None:
    assert probe_prompts("concurrency", 1) == MIN_PAIRS
    assert probe_prompts("concurrency", 16) == 16 * MIN_PAIRS
    assert probe_prompts("concurrency", 16, groups=8) == 128
    assert probe_prompts("rate", 4.0) == MIN_PAIRS  # nothing measured yet: one per group, a floor
    assert probe_prompts("rate", 4.0, in_flight=9.6) == 10 * MIN_PAIRS


def test_search_budget_is_the_worst_case() -> None:
    b = search_budget(SPEC)
    # first round 1 + 7 + 48 streams, then 7 more probes at 48, each MIN_PAIRS groups
    assert b.prompts_per_arm == MIN_PAIRS * (1 + 7 + 48 + 7 * 48)
    assert (b.probes, b.largest_probe_prompts, b.group_size_known) == (10, 48 * MIN_PAIRS, True)
    assert not search_budget(SearchSpec("rate", 1, 8, 1, 5)).group_size_known
    # no search spends more than its budget says
    rng = np.random.default_rng(3)
    out = run_search(SPEC, lambda c, g: Probe(c, tuple(done_means(c) + 0.3 * rng.standard_normal(g))), rng)
    assert sum(probe_prompts("concurrency", p.load) for p in out.probes) <= b.prompts_per_arm


def test_any_search_stays_in_range_on_the_grid_and_within_budget() -> None:
    rng = np.random.default_rng(7)
    for i in range(60):
        kind = ("concurrency", "rate")[i % 2]
        low = float(rng.integers(1, 5))
        high = low + float(rng.integers(1, 60))
        spec = SearchSpec(kind, low, high, tolerance=float(rng.uniform(1, 10)), max_probes=int(rng.integers(3, 12)))
        cross, sd = rng.uniform(low - 5, high + 5), rng.choice([0.0, 0.05, 0.4])

        def measure(x: float, groups: int, cross=cross, sd=sd) -> Probe:
            return Probe(x, tuple(0.05 * (cross - x) + sd * rng.standard_normal(6)))

        out = run_search(spec, measure, np.random.default_rng(i), replicates=200)
        loads = [p.load for p in out.probes]
        assert all(low <= x <= high for x in loads), (spec, loads)
        assert kind == "rate" or all(float(x).is_integer() for x in loads)
        assert len(loads) <= spec.max_probes and out.reason in (STOP_BUDGET, STOP_TOLERANCE, STOP_FASTER, STOP_SLOWER)


# The first round of a recorded search on the demo engine (draft k=4 vs plain, concurrency 1-12,
# bench/results/search_demo_2026-12-05): per-group log effects as summary.json `search.points[].effects` holds them.
# At concurrency 1 one answer of one token left 5 pairs (no verdict); at 12 the draft is faster on its own units.
DEMO_C1 = (-0.34584, -0.66882, 0.04250, 0.40178, -0.68676)
DEMO_C3 = (-0.43355, -0.32944, 0.47887, 0.38051, 0.14780, 0.01122)
DEMO_C12 = (0.18132, 0.10450, 0.01431, 0.07010, 0.17566, 0.16247)


def test_a_load_decided_on_its_own_units_is_not_measured_again_while_another_end_is_open() -> None:
    """The recorded search measured concurrency 12 five more times while concurrency 1, the end without a verdict,
    was never measured again: more units at a load already decided faster cannot move the interval."""
    spec = SearchSpec("concurrency", 1, 12, tolerance=4, max_probes=8)
    probes = [Probe(1, DEMO_C1), Probe(3, DEMO_C3), Probe(12, DEMO_C12)]
    fit = fit_crossover(probes, np.random.default_rng(0), log_load=True)
    assert next_loads(spec, probes, fit) == (1,)


def test_slower_below_and_faster_above_each_decided_stops_the_search_as_rising() -> None:
    """The effect grows with load (a draft that pays only under load): a non-increasing fit cannot place a
    faster-to-slower crossing, so the search says so and stops instead of spending its budget."""
    spec = SearchSpec("concurrency", 1, 12, tolerance=4, max_probes=8)
    slower_at_1 = tuple(x - 0.2 for x in DEMO_C12)  # decided slower on its own units
    probes = [Probe(1, slower_at_1), Probe(3, DEMO_C3), Probe(12, DEMO_C12)]
    fit = fit_crossover(probes, np.random.default_rng(0), log_load=True)
    assert fit.status == RISES and stop_reason(spec, probes, fit) == STOP_RISES and next_loads(spec, probes, fit) == ()
    # undecided at the low end (the recorded first round): not yet a rise
    assert fit_crossover([*probes[1:], Probe(1, DEMO_C1)], np.random.default_rng(0)).status != RISES


def test_a_prediction_seeds_the_first_round_with_its_interval_in_place_of_the_middle() -> None:
    spec = SearchSpec("concurrency", 1, 64, 4, 8, seeded=(14.6, 22.3))
    assert first_round(spec) == (1.0, 15.0, 22.0, 64.0)
    outside = SearchSpec("concurrency", 1, 64, 4, 8, seeded=(0.5, 80.0))  # beyond the range: the middle as without
    assert first_round(outside) == first_round(SearchSpec("concurrency", 1, 64, 4, 8))


# Issue 49: a probe sends what deciding needs. A load measured again is sized from its own units' spread.
SIZED = SearchSpec("concurrency", 1, 12, tolerance=4, max_probes=8, groups=6, max_groups=24)


def test_units_to_decide_is_where_a_t_interval_of_that_many_units_clears_zero() -> None:
    n = units_to_decide(np.array(DEMO_C1))
    assert 6 < n < 100  # the recorded verdict at concurrency 1 said "about 34 prompts in all would likely decide it"
    # units with the same mean and spread, that many of them: decided; the verdict's six of them: not

    def alike(k: int) -> np.ndarray:  # k units with DEMO_C1's mean and spread exactly
        z = np.linspace(-1, 1, k)
        return np.mean(DEMO_C1) + np.std(DEMO_C1, ddof=1) * (z - z.mean()) / z.std(ddof=1)

    assert decided_sign(alike(math.ceil(n))) == -1 and decided_sign(alike(6)) == 0
    assert units_to_decide(np.array(DEMO_C12)) == MIN_PAIRS  # decided already on its own six
    assert units_to_decide(np.array([0.1, -0.1])) == math.inf and units_to_decide(np.array([0.3])) == math.inf


def test_a_load_measured_again_sends_what_its_spread_asks_up_to_the_cap() -> None:
    probes = [Probe(1, DEMO_C1), Probe(3, DEMO_C3), Probe(12, DEMO_C12)]
    assert probe_groups(SIZED, probes, 5) == 6  # not measured yet: the verdict's groups
    asked = math.ceil(units_to_decide(np.array(DEMO_C1))) - len(DEMO_C1)
    assert probe_groups(SIZED, probes, 1) == min(24, asked) > 6
    assert probe_groups(SIZED, probes, 12) == 6  # decided: the floor
    assert probe_groups(SIZED, [*probes, Probe(3, (0.1, -0.1) * 3)], 3) == 24  # a mean on 0: the cap
    assert probe_groups(replace(SIZED, max_groups=None), probes, 1) == 6  # no cap set: every probe one size
    # the budget's worst case: the first round at 6 groups, every later probe at the top at the cap
    assert search_budget(SIZED).prompts_per_arm == 6 * (1 + 3 + 12) + 5 * 24 * 12


def test_sizing_from_the_spread_decides_a_noisy_low_end_the_fixed_size_leaves_open() -> None:
    """The recorded demo search's shape: faster at 12 on its own units, at 1 stream a spread 2.5 times the effect,
    five probes. At six units a probe the low end stays open in many searches; sized from its spread, in few."""
    spec = replace(SIZED, max_probes=5)

    def open_low_end(spec: SearchSpec, seed: int) -> bool:
        rng = np.random.default_rng(seed)

        def measure(c: float, groups: int) -> Probe:
            return Probe(c, tuple(0.2 + (0.5 if c < 2 else 0.1) * rng.standard_normal(groups)))

        return run_search(spec, measure, rng, replicates=200, log_load=True).fit.status != STOP_FASTER

    # seeded: 9 of 30 open at a fixed six groups, 2 sized (up to 24)
    assert sum(open_low_end(replace(spec, max_groups=None), s) for s in range(30)) >= 7
    assert sum(open_low_end(spec, s) for s in range(30)) <= 3
