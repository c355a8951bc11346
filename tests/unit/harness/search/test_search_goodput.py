"""Each arm's highest load within its SLO (issue 39 item 3): the crossover's fit on per-unit attainment minus the
target, on scripted units: exact, noisy, and censored at either end."""

from __future__ import annotations

import numpy as np
import pytest

from speculab.harness.search.fit import Probe
from speculab.harness.search.goodput import (
    CROSSES,
    MEETS_THROUGHOUT,
    MISSES_THROUGHOUT,
    UNDETERMINED,
    fit_slo_capacity,
    unit_attainment,
    with_spread_floor,
)

LOADS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def _exact(fractions: dict[float, float], units: int = 40) -> list[Probe]:
    """Every unit at a load with the same fraction within the SLO; 40 units, enough for the floor on their spread
    (`with_spread_floor`) to leave each load decided."""
    return [Probe(x, (f,) * units) for x, f in fractions.items()]


def _fit(probes: list[Probe], target: float = 0.9, seed: int = 0, **kw: object):
    return fit_slo_capacity(probes, target, np.random.default_rng(seed), **kw)  # type: ignore[arg-type]


def test_units_are_fractions_of_their_requests_within_the_slo():
    # unit 7: 2 of 3 requests met every limit; unit 2: none of 1; unit 5: both
    got = unit_attainment([(7, True), (2, False), (7, True), (5, True), (7, False), (5, True)])
    assert got == pytest.approx((2 / 3, 0.0, 1.0))


def test_exact_data_puts_the_edge_between_the_last_load_within_and_the_first_outside():
    f = _fit(_exact({1.0: 1.0, 2.0: 1.0, 4.0: 1.0, 8.0: 0.5, 16.0: 0.0, 32.0: 0.0}), log_load=True)
    assert f.status == CROSSES and (f.low, f.high) == (4.0, 8.0)
    # 0.1 above the target at 4, 0.4 below at 8: a fifth of the way in log load
    assert f.estimate == pytest.approx(4.0 * 2**0.2, rel=1e-6)
    assert (f.lowest, f.highest) == (1.0, 32.0)
    assert "within the SLO minus the target" in f.method


def test_attainment_exactly_at_the_target_meets_it():
    f = _fit(_exact({1.0: 1.0, 4.0: 0.9, 8.0: 0.5}))
    assert f.status == CROSSES and f.estimate == pytest.approx(4.0, abs=1e-6) and f.high == 8.0


def test_within_the_slo_at_every_load_is_censored_above():
    f = _fit(_exact(dict.fromkeys(LOADS, 1.0)))
    assert f.status == MEETS_THROUGHOUT and f.estimate is None
    assert (f.low, f.high) == (32.0, None)  # the edge lies beyond the highest load measured


def test_outside_the_slo_already_at_the_lowest_load_is_censored_below():
    f = _fit(_exact(dict.fromkeys(LOADS, 0.4)))
    assert f.status == MISSES_THROUGHOUT and f.estimate is None
    assert (f.low, f.high) == (None, 1.0)


def test_a_highest_load_near_the_target_with_noise_is_undetermined_not_a_number():
    # just above the target at the top on average, but its units spread wide across it
    probes = [*_exact({1.0: 1.0, 4.0: 1.0}), Probe(16.0, (1.0, 0.8, 1.0, 0.8, 1.0, 0.9) * 2)]
    f = _fit(probes)
    assert f.status == UNDETERMINED and f.estimate is None and f.high is None


def test_a_few_units_all_within_the_slo_leave_the_interval_open_past_them():
    # 8 groups all within a 0.9 target: a load at 0.85 whose batches meet or miss together gives that a quarter of
    # the time, so the interval reaches down to the load below
    probes = [*_exact({1.0: 1.0}), Probe(12.0, (1.0,) * 8), Probe(16.0, (0.0,) * 40)]
    f = _fit(probes)
    assert f.status == CROSSES and (f.low, f.high) == (1.0, 16.0) and 12.0 <= f.estimate <= 16.0  # type: ignore[operator]


@pytest.mark.parametrize("units", [(1.0,) * 8, (0.0,) * 6, (0.9, 1.0, 0.95, 1.0), (0.2, 0.9, 0.5)])
def test_the_spread_floor_keeps_the_mean_and_lifts_the_spread_to_a_bernoulli_units(units):
    u = np.array(units) - 0.9
    got = with_spread_floor(u, 0.9)
    n = u.size
    m = (n * (u.mean() + 0.9) + 0.5) / (n + 1)
    assert got.mean() == pytest.approx(u.mean()) and got.var() >= min(u.var(), m * (1 - m)) - 1e-12
    assert got.var() >= m * (1 - m) - 1e-12 or got.size == n  # lifted, or already spread enough


def _noisy(truth: float, rng: np.random.Generator, size: int = 4, units: int = 8) -> list[Probe]:
    """Attainment falling linearly in load from 1 at load 1 to 0 at 2 x truth - 1 (the target 0.5 is met up to
    `truth`), each unit `size` requests, Bernoulli."""
    probes = []
    for x in LOADS:
        p = min(1.0, max(0.0, 1.0 - 0.5 * (x - 1.0) / (truth - 1.0)))
        probes.append(Probe(x, tuple(rng.binomial(size, p, units) / size)))
    return probes


def test_noisy_units_give_an_interval_that_holds_the_truth():
    truth = 10.0
    held = 0
    for seed in range(20):
        f = _fit(_noisy(truth, np.random.default_rng(seed)), target=0.5, seed=seed, replicates=400)
        assert f.status == CROSSES and f.low is not None and f.high is not None
        assert f.low <= f.estimate <= f.high  # type: ignore[operator]
        held += f.low <= truth <= f.high
    assert held >= 18  # a 95 % interval; the simulation in bench/search_coverage.py measures the rate


@pytest.mark.parametrize(("target", "units"), [(0.0, (1.0,)), (1.5, (1.0,)), (0.9, (1.2,)), (0.9, (-0.1,))])
def test_a_target_or_a_fraction_out_of_range_is_refused(target, units):
    with pytest.raises(ValueError):
        _fit([Probe(1.0, units)], target=target)


def test_nothing_measured_is_undetermined():
    f = _fit([])
    assert f.status == UNDETERMINED and f.lowest is None and f.low is None and f.high is None
