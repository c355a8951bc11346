"""The acceptance canon per draft position (docs/metrics.md): conditional rates that do not depend on K for a chain
proposer, the length at every k, and intervals over prompts (per-request counts) or over steps (counters) —
checked on simulated chain proposers whose true conditional rates are known."""

from __future__ import annotations

import numpy as np
import pytest

from speculab.harness.analysis.acceptance import (
    INTERVAL_OVER_PROMPTS,
    INTERVAL_OVER_TOKENS,
    RequestAcceptance,
    positions_from_counts,
    positions_from_requests,
    request_acceptance,
)
from speculab.harness.records import RequestRecord

TRUE = (0.8, 0.6, 0.5, 0.4, 0.3, 0.3, 0.2, 0.2)  # conditional acceptance at positions 0..7


def simulate(k: int, prompts: int, steps: int, seed: int, spread: float = 0.0) -> list[RequestAcceptance]:
    """One request per prompt, `steps` verification steps of a chain proposer drafting k tokens: position j is
    accepted with TRUE[j] (times a per-prompt factor when spread > 0) given every earlier one was; the first
    rejection ends the step. What the engine would report per request: steps, drafted, accepted, per position."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(prompts):
        factor = float(np.exp(spread * rng.standard_normal())) if spread else 1.0
        rates = np.clip(np.asarray(TRUE[:k]) * factor, 0, 1)
        draws = rng.random((steps, k)) < rates  # accepted-if-reached, per step and position
        reached_and_accepted = np.cumprod(draws, axis=1)  # accepted j only if 0..j-1 were too
        per_pos = [int(x) for x in reached_and_accepted.sum(axis=0)]
        spec = {"drafts": steps, "draft_tokens": steps * k, "accepted_tokens": sum(per_pos),
                "accepted_per_position": per_pos, "source": "sim"}  # fmt: skip
        out.append(request_acceptance(RequestRecord(i, 0.0, 0.0, 1.0, completion_tokens=500, speculation=spec)))
    return out


def test_conditional_rates_do_not_depend_on_k_and_the_lengths_at_smaller_k_match_a_run_at_that_k():
    k8 = positions_from_requests(simulate(8, prompts=60, steps=200, seed=1))
    k2 = positions_from_requests(simulate(2, prompts=60, steps=200, seed=2))
    assert k8.interval_over == INTERVAL_OVER_PROMPTS and k8.prompts == 60 and k8.k_measured == 8
    # each 95 % interval covers its truth (8 of them: at least 6 here), and no estimate strays beyond its width
    covered = [r.conditional.low <= t <= r.conditional.high for r, t in zip(k8.positions, TRUE, strict=True)]
    assert sum(covered) >= 6, covered
    for r, true in zip(k8.positions, TRUE, strict=True):
        assert abs(r.conditional.estimate - true) <= r.conditional.high - r.conditional.low, r
    # the first two conditional rates at k=8 are those at k=2 (within both intervals), and the length k=8 implies
    # at k=2 is what the k=2 run measured
    for j in range(2):
        a, b = k8.positions[j].conditional, k2.positions[j].conditional
        assert a.low <= b.high and b.low <= a.high
    assert k8.length_by_k[1] == pytest.approx(k2.length_by_k[1], abs=0.05)
    assert k8.length_by_k[1] == pytest.approx(1 + 0.8 + 0.8 * 0.6, abs=0.05)  # 1 + p0 + p1, p_j = prod of c
    # the acceptance rate falls with k although every position's conditional rate is the same: why K is never
    # compared by rate
    rate8 = sum(r.accepted for r in k8.positions) / (k8.drafts * 8)
    rate2 = sum(r.accepted for r in k2.positions) / (k2.drafts * 2)
    assert rate8 < rate2 - 0.2


def test_the_interval_over_prompts_covers_the_truth_at_its_confidence_where_steps_would_not():
    # prompts differ (spread): a binomial interval over steps treats each step as independent and is too narrow
    covered_prompts = covered_steps = 0
    trials = 200
    for seed in range(trials):
        per = simulate(2, prompts=30, steps=40, seed=100 + seed, spread=0.35)
        pa = positions_from_requests(per)
        counts = positions_from_counts(pa.drafts, [r.accepted for r in pa.positions], "sim")
        # the truth of this population: the expected conditional rate at position 0 over prompts' factors,
        # weighted by steps (every prompt has the same steps): E[min(0.8 f, 1)], f log-normal
        f = np.exp(0.35 * np.random.default_rng(7).standard_normal(400_000))
        truth = float(np.clip(0.8 * f, 0, 1).mean())
        covered_prompts += pa.positions[0].conditional.low <= truth <= pa.positions[0].conditional.high
        covered_steps += counts.positions[0].conditional.low <= truth <= counts.positions[0].conditional.high
    assert covered_prompts / trials >= 0.90  # nominal 95 %
    assert covered_steps / trials < covered_prompts / trials - 0.1  # the over-steps interval under-covers here


def test_counters_give_the_conditional_rates_and_say_their_interval_is_over_steps():
    # vLLM's counters: 1000 steps; position 0 accepted 800 times, position 1 480, position 2 240
    pa = positions_from_counts(1000.0, [800.0, 480.0, 240.0], "vllm:spec_decode_* counters (server-wide delta)")
    assert pa.interval_over == INTERVAL_OVER_TOKENS and pa.prompts == 0
    assert [r.conditional.estimate for r in pa.positions] == pytest.approx([0.8, 0.6, 0.5])
    assert [r.unconditional for r in pa.positions] == pytest.approx([0.8, 0.48, 0.24])
    assert [r.reached for r in pa.positions] == pytest.approx([1000, 800, 480])
    assert pa.length_by_k == pytest.approx((1.8, 2.28, 2.52))
    assert pa.positions[0].conditional.method == "wilson"
    # a later position counted above an earlier one (scrapes a step apart) is capped: no rate above 1
    capped = positions_from_counts(100.0, [50.0, 51.0], "x")
    assert capped.positions[1].conditional.estimate == 1.0 and capped.positions[1].accepted == 50.0
    assert positions_from_counts(0.0, [1.0], "x") is None and positions_from_counts(10.0, [], "x") is None


def test_per_request_positions_need_every_drafting_request_to_carry_them_and_pool_repeats_of_a_prompt():
    per = simulate(3, prompts=4, steps=10, seed=3)
    without = [
        request_acceptance(RequestRecord(9, 0, 0, 1, completion_tokens=20,
                                         speculation={"drafts": 5, "draft_tokens": 15, "accepted_tokens": 4}))
    ]  # fmt: skip
    assert positions_from_requests(per + without) is None  # one response without positions: no per-request canon
    repeat = [
        request_acceptance(RequestRecord(a.index, 0, 0, 1, completion_tokens=20, speculation={
            "drafts": 10, "draft_tokens": 30, "accepted_tokens": 0, "accepted_per_position": [0, 0, 0]}))
        for a in per
    ]  # fmt: skip
    pa = positions_from_requests(per + repeat)
    assert pa.prompts == 4  # two requests of each prompt are one cluster
    assert pa.drafts == 80 and pa.positions[0].reached == 80
    # a shorter histogram (a proposer that drafted fewer) counts as no acceptance beyond it
    short = request_acceptance(RequestRecord(5, 0, 0, 1, completion_tokens=20, speculation={
        "drafts": 4, "draft_tokens": 4, "accepted_tokens": 2, "accepted_per_position": [2]}))  # fmt: skip
    pa2 = positions_from_requests([*per, short])
    assert pa2.k_measured == 3 and pa2.positions[1].accepted == sum(a.accepted_per_position[1] for a in per)
