"""The load search's policy (issue 39 items 1, 2): where it probes, when it stops, what a probe and a search cost."""

from __future__ import annotations

import math

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
from speculab.harness.search.policy import first_round

SPEC = SearchSpec("concurrency", 1, 48, tolerance=12, max_probes=10)


def exact_truth(log_effect, n: int = 6):
    return lambda c: Probe(c, (log_effect(c),) * n)


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

    def noisy(c: float) -> Probe:
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
    out = run_search(SPEC, lambda c: Probe(c, tuple(done_means(c) + 0.3 * rng.standard_normal(6))), rng)
    assert sum(probe_prompts("concurrency", p.load) for p in out.probes) <= b.prompts_per_arm


def test_any_search_stays_in_range_on_the_grid_and_within_budget() -> None:
    rng = np.random.default_rng(7)
    for i in range(60):
        kind = ("concurrency", "rate")[i % 2]
        low = float(rng.integers(1, 5))
        high = low + float(rng.integers(1, 60))
        spec = SearchSpec(kind, low, high, tolerance=float(rng.uniform(1, 10)), max_probes=int(rng.integers(3, 12)))
        cross, sd = rng.uniform(low - 5, high + 5), rng.choice([0.0, 0.05, 0.4])

        def measure(x: float, cross=cross, sd=sd) -> Probe:
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
