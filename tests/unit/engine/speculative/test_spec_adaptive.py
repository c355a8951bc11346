"""The adaptive policy: acceptance EMAs, measured costs, and the k they choose (pure, scripted numbers).

Exactness with the policy on is the engine tests' job (test_spec_engine.py runs it); here the choices themselves:
speculate fully when drafts are accepted and verification is nearly free, skip when it is not worth it, pick an
intermediate k when acceptance falls off with position, explore after a long run of skips.
"""

from __future__ import annotations

import pytest

from speculab.engine.speculative.adaptive import Acceptance, AdaptiveConfig, AdaptivePolicy, StepCosts


def test_acceptance_counts_reached_positions_only():
    a = Acceptance(3, prior=0.5, prior_weight=0.0001, decay=1.0)
    # asked 3 each; accepted 3, 1, 0: position 0 reached 3x (accepted 2), position 1 reached 2x (1), position 2 1x (1)
    a.observe([3, 3, 3], [3, 1, 0])
    assert a.rate(0) == pytest.approx(2 / 3, abs=1e-3)
    assert a.rate(1) == pytest.approx(1 / 2, abs=1e-3)
    assert a.rate(2) == pytest.approx(1.0, abs=1e-3)
    assert a.expected_tokens(0) == 1.0
    assert a.expected_tokens(3) == pytest.approx(1 + 2 / 3 + 1 / 3 + 1 / 3, abs=1e-3)
    a.observe([1], [0])  # asked for one draft only: positions 1 and 2 learn nothing
    assert a.rate(1) == pytest.approx(1 / 2, abs=1e-3)


def test_a_position_without_evidence_leans_on_the_one_before():
    a = Acceptance(4, prior=0.5, prior_weight=2.0, decay=1.0)
    assert a.rates() == pytest.approx([0.5] * 4)
    for _ in range(50):
        a.observe([1], [1])  # k = 1 steps, always accepted: only position 0 has evidence
    r = a.rates()
    assert r[0] > 0.95 and r[3] > 0.95  # positions never drafted are expected to behave like position 0
    assert a.expected_tokens(4) > 4.5


def test_acceptance_forgets_old_evidence():
    a = Acceptance(1, decay=0.9)
    for _ in range(200):
        a.observe([1], [1])
    for _ in range(60):
        a.observe([1], [0])
    assert a.rate(0) < 0.1  # the last 60 rejections outweigh 200 old acceptances (what is left is the prior)


def test_costs_interpolate_between_and_extrapolate_beyond_measurements():
    c = StepCosts(window=3)
    assert c.target(4) is None and c.proposer(4) == 0.0
    c.observe_target(1, 1.0)
    assert c.target(3) == pytest.approx(3.0)  # one point: proportional, never optimistic
    c.observe_target(5, 2.0)
    assert c.target(3) == pytest.approx(1.5)
    assert c.target(9) == pytest.approx(3.0)
    assert c.target(0) == pytest.approx(1.0)
    c.observe_target(5, 4.0)  # the median of recent timings, not the last word
    assert c.target(5) == pytest.approx(3.0)
    for _ in range(2):
        c.observe_target(5, 2.5)
    assert c.target(5) == pytest.approx(2.5)  # a window of 3: the 2.0 has left it, the 4.0 is outvoted
    c.observe_target(9, 1.0)  # noise says a bigger batch is cheaper: the estimate never decreases with size
    assert c.target(9) == pytest.approx(2.5)
    c.observe_proposer(2, 4, 0.8)
    assert c.proposer(2) == pytest.approx(0.2) and c.proposer(1) == pytest.approx(0.2)


def test_calibration_times_a_grid_of_batch_shapes():
    calls = []

    def time_forward(rows: int, width: int) -> float:
        calls.append((rows, width))
        return 0.001 * (1 + rows * width / 10)

    c = StepCosts()
    c.calibrate(time_forward, max_rows=6, max_width=5, rounds=3)
    assert {r for r, _ in calls} == {1, 2, 4, 6} and {w for _, w in calls} == {1, 2, 3, 4, 5}
    assert calls.count((6, 5)) == 3  # every shape once per round
    assert c.target(30) == pytest.approx(0.004)


def policy(accept: list[float], target_s, draft_s: float = 0.0, k: int = 4, rows=(1, 16), **cfg) -> AdaptivePolicy:
    """A policy whose acceptance is `accept` per position and whose costs come from target_s(tokens)."""
    p = AdaptivePolicy(k, AdaptiveConfig(prior_weight=1e-6, **cfg))
    for i, a in enumerate(accept):
        p.acceptance.reached[i], p.acceptance.accepted[i] = 1000.0, 1000.0 * a
    for b in rows:
        for w in range(1, k + 2):
            p.costs.observe_target(b * w, target_s(b * w))
        p.costs.observe_proposer(b, 1, draft_s)
    return p


def test_nothing_measured_means_speculate_and_measure():
    assert AdaptivePolicy(4).choose(8) == 1
    p = AdaptivePolicy(4)
    for t in (8, 16, 24, 32, 40):
        p.costs.observe_target(t, 1.0)  # verification is free, the proposer's cost is not known yet
    assert p.choose(8) == 1  # one draft measures the proposer; k = 4 would pay four unknown drafts
    p.costs.observe_proposer(8, 1, 0.01)
    assert p.choose(8) == 4


def test_high_acceptance_and_cheap_verification_speculate_fully():
    p = policy([0.9] * 4, lambda t: 1.0 + 0.01 * t)  # a memory-bound GPU: tokens are nearly free
    assert p.choose(1) == 4 and p.choose(16) == 4


def test_compute_bound_batches_stop_speculating():
    p = policy([0.6] * 4, lambda t: 1.0 + 0.2 * t)  # cost grows with every batch token
    assert p.choose(1) > 0
    assert p.choose(16) == 0


def test_acceptance_falling_with_position_picks_an_intermediate_k():
    p = policy([0.9, 0.8, 0.1, 0.1], lambda t: 1.0 + 0.05 * t, draft_s=0.05)
    assert p.choose(1) == 2


def test_a_costly_proposer_is_not_worth_a_low_acceptance():
    p = policy([0.3] * 4, lambda t: 1.0 + 0.01 * t, draft_s=0.5)
    assert p.choose(1) == 0


def test_a_long_run_of_one_k_tries_a_neighbour_ever_more_rarely():
    p = policy([0.2] * 4, lambda t: 1.0 + 0.2 * t, explore_every=5)
    choices = [p.choose(16) for _ in range(40)]
    tried = [i for i, c in enumerate(choices) if c != 0]
    assert tried == [4, 14, 34] and {choices[i] for i in tried} == {1}  # the 5th step, then 10 and 20 steps later


def test_a_small_expected_gain_is_not_worth_the_risk():
    # a_1 = 0.15: one draft gives 1.15 tokens for 1.02x the cost (+13% by the estimate)
    p = policy([0.15, 0.0, 0.0, 0.0], lambda t: 1.0 + 0.02 * t)
    rates = p.rates(1)
    assert 1.0 < rates[1] / rates[0] < 1.15
    assert p.choose(1) == 0
    assert policy([0.15, 0.0, 0.0, 0.0], lambda t: 1.0 + 0.02 * t, min_gain=0.0).choose(1) == 1


def test_rows_that_propose_nothing_make_a_step_cheaper_not_dearer():
    # prompt lookup: 30% of rows find a match; a found draft is accepted at 0.6 (a_1 = 0.3 * 0.6 unconditionally)
    p = policy([0.18, 0.6, 0.6, 0.6], lambda t: 1.0 + 0.2 * t)
    assert p.choose(1) == 0  # priced as if every step padded the row to k drafts, nothing pays
    p.acceptance.asked_rows, p.acceptance.proposing_rows = 1000.0, 300.0
    assert p.acceptance.proposing() == pytest.approx(0.3, abs=0.01)
    assert p.choose(1) == 3  # 70% of steps run as plain decoding: k = 3 expects +17%
    p.acceptance.observe([4, 4], [0, 0], [0, 3])  # the counts move with what rows propose
    assert p.acceptance.asked_rows == pytest.approx(1000 * 0.98**2 + 2)  # an EMA: old rows decay


def test_unvisited_shapes_keep_their_calibrated_price_scaled_by_the_drift_of_visited_ones():
    c = StepCosts(window=5)
    c.calibrate(lambda rows, width: 0.001 * rows * width, max_rows=4, max_width=2, rounds=1)
    assert c.target(8) == pytest.approx(0.008) and c.drift() == 1.0
    for _ in range(5):  # the steps run only 4 x 1 tokens, and they now cost twice what calibration said (context)
        c.observe_target(4, 0.008)
    assert c.drift() == pytest.approx(2.0)
    assert c.target(4) == pytest.approx(0.008)  # a visited shape: its own timings
    assert c.target(8) == pytest.approx(0.016)  # unvisited: calibrated 0.008, scaled; not the start-up price


def test_tries_stop_while_they_cost_more_than_the_budget():
    p = policy([0.2] * 4, lambda t: 1.0 + 0.2 * t, explore_every=5, explore_budget=0.02)
    choices = []
    for _ in range(40):
        k = p.choose(16)
        choices.append(k)
        plain = p.step_seconds(16, 0)
        p.step_done(plain + (100.0 if k else 0.0))  # a try costs 100 s more than the step it replaced
    assert [i for i, c in enumerate(choices) if c] == [4]  # the first try spent the budget of far more steps
    assert p.explore_extra_s == pytest.approx(100.0)
    p.step_done(5000.0)  # once the steps' time has grown 50x the tries' cost, the next try may run
    assert any(p.choose(16) for _ in range(40))


def test_a_try_waits_until_its_predicted_catch_up_fits_the_budget():
    p = policy([0.2] * 4, lambda t: 1.0 + 0.2 * t, explore_every=5, explore_budget=0.02)
    p.costs.observe_catch_up(1000, 0.1)  # 0.1 ms per entry
    assert p.costs.catch_up(2000) == pytest.approx(0.2) and StepCosts().catch_up(2000) == 0.0
    resume = p.costs.catch_up(16 * 10_000)  # 16 rows with 10,000 entries pending each: 16 s of catch-up
    plain = p.step_seconds(16, 0)
    choices = []
    for _ in range(100):
        choices.append(p.choose(16, resume_s=resume))
        p.step_done(plain)
    assert not any(choices)  # 100 steps of ~4.2 s: 2% of 420 s is 8.4 s, less than the 16 s the try would cost
    p.step_done(800.0)
    assert any(p.choose(16, resume_s=resume) for _ in range(200))  # 2% of 1,220 s covers it: the try runs
