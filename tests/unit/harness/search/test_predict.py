"""The prediction (speedup = acceptance x cost) against a known truth: a batched engine whose step costs
a + s b + (d + g b) k and whose chain proposer accepts position j with a known conditional rate. From acceptance
measured at K = 6 and a few cost probes, it must place the crossover, the speedup at low load and the best K."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speculab.harness.analysis.acceptance import PositionAcceptance, positions_from_counts
from speculab.harness.search.predict import (
    StepProbe,
    fit_step_cost,
    k_schedule,
    load_grid,
    predict,
    tokens_per_step,
    width_check,
)

A, S, D, G = 0.010, 0.0004, 0.0012, 0.0008  # seconds: fixed, per request, per draft, per draft per request
COND = (0.85, 0.75, 0.65, 0.55, 0.45, 0.35)


def step(b: float, k: int) -> float:
    return A + S * b + (D + G * b) * k


def true_speedup(b: float, k: int) -> float:
    return step(b, 0) * tokens_per_step(COND, k) / step(b, k)


def true_crossover(k: int) -> float:
    grid = np.geomspace(1, 256, 20000)
    s = np.asarray([true_speedup(b, k) for b in grid])
    return float(grid[np.argmax(s <= 1.0)])


def measured_acceptance(rng: np.random.Generator, steps: int = 4000) -> PositionAcceptance:
    draws = rng.random((steps, len(COND))) < np.asarray(COND)
    per_pos = np.cumprod(draws, axis=1).sum(axis=0)
    return positions_from_counts(float(steps), [float(x) for x in per_pos], "sim")


def probes(rng: np.random.Generator, noise: float = 0.02) -> list[StepProbe]:
    """Plain and speculative (K = 2 and 6, acceptance forced) at concurrency 1, 8 and 32: 9 short probes."""
    out = []
    for b in (1, 8, 32):
        for k in (0, 2, 6):
            out.append(StepProbe(k, b, step(b, k) * math.exp(noise * rng.standard_normal()), 1.0, k > 0, 24))
    return out


def test_the_fit_recovers_the_cost_coefficients_with_intervals_and_residuals():
    fit = fit_step_cost(probes(np.random.default_rng(1)))
    assert fit.terms == ("fixed_s", "per_request_s", "per_draft_s", "per_draft_per_request_s") and fit.dof == 5
    for c, true in zip(fit.coefficients, (A, S, D, G), strict=True):
        assert c.low <= true <= c.high, c
    assert len(fit.residuals) == 9 and fit.residual_sd_s < 0.01 * step(32, 6)


def test_prediction_meets_the_issue_tolerances_against_the_truth():
    rng = np.random.default_rng(7)
    acc = measured_acceptance(rng)
    fit = fit_step_cost(probes(rng))
    loads = load_grid(1, 128)
    preds = predict(acc, fit, loads, range(1, 7), np.random.default_rng(3))
    k4 = next(p for p in preds if p.k == 4)
    truth = true_crossover(4)
    assert 4 < truth < 64  # the truth lies inside the range, between probes
    assert k4.crossover.estimate == pytest.approx(truth, rel=0.25)
    assert k4.crossover.low <= truth <= k4.crossover.high
    at1 = k4.curve[0]
    assert at1.speedup.estimate == pytest.approx(true_speedup(1, 4), rel=0.15)
    assert at1.speedup.low <= true_speedup(1, 4) <= at1.speedup.high
    # the best K at the lowest and at the highest load is the truth's (0: plain where nothing pays)
    sched = k_schedule(preds)
    best_true = [max(range(1, 7), key=lambda k: true_speedup(b, k)) for b in (loads[0], loads[-1])]
    best_true = [k if true_speedup(b, k) > 1 else 0 for k, b in zip(best_true, (loads[0], loads[-1]), strict=True)]
    assert [sched[0].k, sched[-1].k] == best_true
    assert sched[0].low == loads[0] and sched[-1].high == loads[-1]


def test_one_k_probed_leaves_the_k_terms_it_cannot_separate_out_and_says_so():
    rng = np.random.default_rng(2)
    only_plain = [StepProbe(0, b, step(b, 0), 1.0, False, 10) for b in (1, 4, 16)]
    fit = fit_step_cost(only_plain)
    assert fit.terms == ("fixed_s", "per_request_s")
    assert fit.coefficients[2].estimate == 0.0 and fit.coefficients[3].estimate == 0.0
    with pytest.raises(ValueError, match="at least 2 probes"):
        fit_step_cost(only_plain[:1])
    acc = measured_acceptance(rng)
    with pytest.raises(ValueError, match="beyond the measured K"):
        predict(acc, fit_step_cost(probes(rng)), (1.0,), [7], rng)


def test_a_candidate_that_pays_everywhere_has_no_crossing_and_says_above_the_range():
    rng = np.random.default_rng(5)
    acc = measured_acceptance(rng)
    fit = fit_step_cost(probes(rng))
    (k1,) = predict(acc, fit, load_grid(1, 4), [1], np.random.default_rng(0))
    assert k1.crossover.estimate is None and k1.crossover.above_range and k1.crossover.high is None


def test_a_short_answer_sees_fewer_tokens_per_step_than_the_long_run_length():
    from speculab.harness.search.predict import effective_tokens_per_step

    rates = np.asarray([COND])
    # by simulation: requests of 33 tokens (32 after the prefill's), each step 1 + accepted, the last one cut
    rng = np.random.default_rng(11)
    steps = []
    for _ in range(20000):
        left, n = 32, 0
        while left > 0:
            a = 0
            while a < 4 and rng.random() < COND[a]:
                a += 1
            left -= min(1 + a, left)
            n += 1
        steps.append(n)
    simulated = 32 / np.mean(steps)
    got = effective_tokens_per_step(rates, 4, 33)[0]
    assert got == pytest.approx(simulated, rel=0.01)
    assert got < tokens_per_step(COND, 4)  # the cut last step
    assert effective_tokens_per_step(rates, 4, None)[0] == pytest.approx(tokens_per_step(COND, 4))
    assert effective_tokens_per_step(rates, 0, 33)[0] == 1.0


def _at(ks: tuple[int, ...], rng: np.random.Generator, cost=step, noise: float = 0.02) -> list[StepProbe]:
    """Probes at concurrency 1, 6 and 32 (predict's three loads) for each k in `ks`."""
    return [StepProbe(k, b, cost(b, k) * math.exp(noise * rng.standard_normal()), 1.0, k > 0, 24)
            for b in (1, 6, 32) for k in ks]  # fmt: skip


def test_a_second_k_on_the_line_passes_the_width_check_and_one_off_it_does_not():
    """`predict --check-k`: the fit made on k = 0 and K = 4, held against probes at k = 2 it was not made on."""
    rng = np.random.default_rng(3)
    fit = fit_step_cost(_at((0, 4), rng))
    on_line = width_check(fit, _at((2,), rng))
    assert on_line is not None and on_line.k == 2 and len(on_line.probes) == 3
    assert on_line.linear is True and all(p.low_s < p.predicted_s < p.high_s for p in on_line.probes)

    def jumps(b: float, k: int) -> float:  # a verify kernel whose cost at k = 2 is that of k = 4
        return step(b, 4 if k == 2 else k)

    off = width_check(fit, _at((2,), rng, jumps))
    assert off is not None and off.linear is False
    assert all(p.residual_s > 0 for p in off.probes)
    assert width_check(fit, []) is None
    exact = fit_step_cost(_at((0, 4), rng)[:4])  # as many probes as terms: no interval, nothing to say
    assert exact.dof == 0 and width_check(exact, _at((2,), rng)).linear is None


def test_a_cost_fit_that_admits_no_engine_at_a_load_gives_no_speedup_there_never_a_negative_one():
    """vLLM's CPU build on a tiny model (bench/predict_vllm_cpu.sh): six unforced probes, TPOT near 0 at 4 streams,
    a fit with a negative coefficient whose step time falls below 0 inside the range. A draw or a point whose step
    takes no time is no engine: where it is, the speedup is not predicted (NaN), never a negative ratio."""
    rng = np.random.default_rng(3)
    # plain steps steady; speculative ones falling fast with the batch (a fit line that crosses 0 near batch 4)
    times = {(0, 1): 2.0e-3, (0, 2): 2.1e-3, (0, 4): 2.2e-3, (4, 1): 6.0e-3, (4, 2): 3.5e-3, (4, 4): 0.2e-3}
    fit = fit_step_cost([StepProbe(k, b, t, 1.0, k > 0, 24) for (k, b), t in times.items()])
    assert fit.step_s(8, 4) < 0  # the fit's line for k=4 is below 0 by batch 8
    (k4,) = predict(measured_acceptance(rng), fit, (1.0, 2.0, 4.0, 8.0), [4], rng)
    for point in k4.curve:
        for v in (point.speedup.estimate, point.speedup.low, point.speedup.high):
            assert math.isnan(v) or v > 0, k4.curve
    at8 = k4.curve[-1].speedup
    assert math.isnan(at8.estimate) and math.isnan(at8.low) and math.isnan(at8.high)
