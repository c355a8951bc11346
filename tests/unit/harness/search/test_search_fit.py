"""The crossover fit of the load search (issue 39 item 1): exact data, noise, censoring at both ends, the statuses."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from speculab.harness.search import (
    CROSSES,
    FASTER_THROUGHOUT,
    SLOWER_THROUGHOUT,
    UNDETERMINED,
    Probe,
    fit_crossover,
)
from speculab.harness.search.fit import brackets, expansion, isotonic_non_increasing


def exact(load: float, effect: float, n: int = 6) -> Probe:
    return Probe(load, (effect,) * n)


def test_the_min_max_formula_is_scipys_isotonic_regression() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        k = int(rng.integers(1, 10))
        y, w = rng.normal(size=k), rng.integers(1, 30, size=k).astype(float)
        ours = isotonic_non_increasing(y[None, :], w)[0]
        assert ours == pytest.approx(isotonic_regression(y, weights=w, increasing=False).x)


def test_exact_data_cross_between_the_two_probes_around_zero() -> None:
    probes = [exact(1, 0.7), exact(8, 0.2), exact(16, -0.1), exact(48, -0.5)]
    fit = fit_crossover(probes, np.random.default_rng(0))
    assert fit.status == CROSSES
    assert fit.estimate == pytest.approx(8 + 8 * 0.2 / 0.3)  # the straight line between 8 and 16
    # no noise: the interval is the bracket itself, which monotonicity alone cannot narrow
    assert (fit.low, fit.high) == (8, 16)
    assert [p[0] for p in fit.points] == [1, 8, 16, 48]
    assert [p[3] for p in fit.points] == [6, 6, 6, 6]


def test_log_load_interpolates_the_estimate_in_log_load_only() -> None:
    probes = [exact(1, 0.5), exact(4, 0.1), exact(16, -0.1)]
    fit = fit_crossover(probes, np.random.default_rng(0), log_load=True)
    assert fit.estimate == pytest.approx(8.0)  # halfway between 4 and 16 in log load
    assert (fit.low, fit.high) == (4, 16)


def test_violators_are_pooled_and_remeasured_loads_pool_their_units() -> None:
    # 8 reads above 4: the fit pools them (weights by units: 6 at 4, 12 at 8 after the second probe)
    probes = [exact(1, 0.6), exact(4, 0.1), exact(8, 0.25), exact(8, 0.25), exact(16, -0.4)]
    fit = fit_crossover(probes, np.random.default_rng(0))
    loads, measured, fitted, n = zip(*fit.points, strict=True)
    assert loads == (1, 4, 8, 16) and n == (6, 6, 12, 6)
    assert fitted[1] == pytest.approx(fitted[2]) == pytest.approx((0.1 * 6 + 0.25 * 12) / 18)
    assert measured[2] == pytest.approx(0.25)
    assert all(a >= b for a, b in itertools.pairwise(fitted))


def test_faster_throughout_says_the_crossing_lies_beyond_the_highest_probe() -> None:
    fit = fit_crossover([exact(1, 0.4), exact(7, 0.3), exact(48, 0.2)], np.random.default_rng(0))
    assert fit.status == FASTER_THROUGHOUT
    assert fit.estimate is None and fit.low == 48 and fit.high is None and fit.width == math.inf


def test_slower_throughout_says_the_crossing_lies_below_the_lowest_probe() -> None:
    fit = fit_crossover([exact(2, -0.1), exact(7, -0.3), exact(48, -0.6)], np.random.default_rng(0))
    assert fit.status == SLOWER_THROUGHOUT
    assert fit.estimate is None and fit.low is None and fit.high == 2


def test_noise_at_the_top_leaves_the_high_end_open() -> None:
    # faster at 48 on average, but its units straddle zero: the crossing may lie at 48 or beyond
    top = Probe(48, (0.5, -0.4, 0.3, -0.3, 0.2, -0.1))  # mean 0.033
    fit = fit_crossover([exact(1, 0.7), exact(7, 0.5), top], np.random.default_rng(0))
    assert fit.points[-1][2] > 0  # the fit does not cross ...
    assert fit.status == UNDETERMINED  # ... yet "faster throughout" would claim more than the units say
    assert fit.low == 7 and fit.high is None


def test_noise_at_the_bottom_leaves_the_low_end_open() -> None:
    bottom = Probe(1, (0.6, -0.5, 0.4, -0.4, 0.3, -0.2))  # mean 0.033: faster, but not surely
    fit = fit_crossover([bottom, exact(7, -0.2), exact(48, -0.5)], np.random.default_rng(0))
    assert fit.low is None and fit.high == 7


def test_noisy_monotone_data_cover_the_truth_and_stay_inside_the_probes() -> None:
    rng = np.random.default_rng(5)
    truth = 16.5  # log effect log(2 / (1 + (c - 1) / 15.5)) crosses at 16.5
    loads = (1, 4, 8, 12, 16, 20, 24, 32, 48)
    probes = [Probe(c, tuple(math.log(2 / (1 + (c - 1) / 15.5)) + 0.05 * rng.standard_normal(12))) for c in loads]
    fit = fit_crossover(probes, np.random.default_rng(0))
    assert fit.status == CROSSES
    assert fit.low is not None and fit.high is not None
    assert fit.low <= truth <= fit.high
    assert fit.low in loads and fit.high in loads
    assert fit.low <= fit.estimate <= fit.high
    assert fit.high - fit.low <= 16


def test_one_unit_probes_and_no_probes() -> None:
    assert fit_crossover([], np.random.default_rng(0)).status == UNDETERMINED
    fit = fit_crossover([Probe(1, (0.3,)), Probe(4, (-0.3,))], np.random.default_rng(0))
    assert (fit.status, fit.low, fit.high) == (CROSSES, 1, 4)
    assert fit_crossover([Probe(4, ())], np.random.default_rng(0)).points == ()


def test_brackets_of_several_curves() -> None:
    loads = np.array([1.0, 4.0, 16.0])
    lower, upper = brackets(loads, np.array([[1.0, 0.5, -1.0], [-1.0, -2.0, -3.0], [1.0, 1.0, 1.0]]))
    assert lower.tolist() == [4.0, -math.inf, 16.0]
    assert upper.tolist() == [16.0, 1.0, math.inf]


def test_the_seeded_rng_makes_the_fit_reproducible() -> None:
    rng = np.random.default_rng(9)
    probes = [Probe(c, tuple(0.3 - 0.02 * c + 0.2 * rng.standard_normal(6))) for c in (1, 8, 15, 22, 30)]
    a = fit_crossover(probes, np.random.default_rng(42))
    b = fit_crossover(probes, np.random.default_rng(42))
    assert a == b


def test_what_the_fit_cannot_use() -> None:
    with pytest.raises(ValueError, match="positive number"):
        Probe(0, (0.1,))
    # a unit that is not a finite number is left out, and the unit count says so
    fit = fit_crossover([Probe(1, (0.3, math.nan, 0.3)), Probe(4, (-0.3, math.inf, -0.3))], np.random.default_rng(0))
    assert [p[3] for p in fit.points] == [2, 2] and (fit.low, fit.high) == (1, 4)


def test_the_expansion_is_students_over_the_normal_with_the_variance_corrected() -> None:
    assert expansion(6, 0.95) == pytest.approx(math.sqrt(6 / 5) * 2.570582 / 1.959964, rel=1e-5)
    assert expansion(1000, 0.95) == pytest.approx(1.0, abs=0.002)
