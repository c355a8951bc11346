"""The true TPOT and crossover of a scripted pair of mocks (issue 39 item 5): the formula against hand-counted gaps;
and the step-batched mode's truth (issue 49) against hand-computed steps."""

from __future__ import annotations

import pytest

from speculab.mock.script import MockConfig, step_s
from speculab.mock.truth import (
    accepted_distribution,
    expected_steps,
    true_best_k,
    true_crossover,
    true_crossover_of_k,
    true_tokens_per_step,
    true_tpot_s,
    true_tpot_speedup,
    with_k,
)

PLAIN = MockConfig(gap_s=0.02, tokens_per_chunk=1, output_tokens=129)
SPEC = MockConfig(gap_s=0.02, tokens_per_chunk=2, output_tokens=129, decode_slowdown_per_request=0.05)


def test_tpot_counts_the_gaps_after_the_first_chunk() -> None:
    # 129 tokens: 129 chunks of 1 (128 gaps) or 64 chunks of 2 and one of 1 (64 gaps), over 128 intervals
    assert true_tpot_s(PLAIN, 1) == pytest.approx(0.02)
    assert true_tpot_s(SPEC, 1) == pytest.approx(0.01)
    assert true_tpot_s(SPEC, 5) == pytest.approx(0.01 * 1.2)
    # an even length leaves a last chunk of 2: 63 gaps over 127 intervals, a little under half the gap
    assert true_tpot_s(SPEC, 1, output_tokens=128) == pytest.approx(0.02 * 63 / 127)
    assert true_tpot_s(SPEC, 1, output_tokens=1) is None


def test_speedup_is_two_at_one_stream_and_the_time_ratio_grows_linearly() -> None:
    assert true_tpot_speedup(PLAIN, SPEC, 1) == pytest.approx(2.0)
    for c in (1, 6, 11, 21, 31, 48):
        assert 1 / true_tpot_speedup(PLAIN, SPEC, c) == pytest.approx((1 + 0.05 * (c - 1)) / 2)
    assert true_tpot_speedup(PLAIN, SPEC, 20) > 1 > true_tpot_speedup(PLAIN, SPEC, 22)


def test_crossover_is_one_plus_the_inverse_slowdown() -> None:
    assert true_crossover(PLAIN, SPEC) == pytest.approx(21.0)
    assert true_tpot_speedup(PLAIN, SPEC, 21) == pytest.approx(1.0)
    assert true_crossover(
        PLAIN, MockConfig(gap_s=0.02, tokens_per_chunk=2, output_tokens=129, decode_slowdown_per_request=1 / 23)
    ) == pytest.approx(24.0)


def test_both_arms_slowing_down_still_cross_where_the_times_meet() -> None:
    plain = MockConfig(gap_s=0.02, tokens_per_chunk=1, output_tokens=129, decode_slowdown_per_request=0.01)
    c = true_crossover(plain, SPEC)
    assert c is not None and true_tpot_speedup(plain, SPEC, round(c)) == pytest.approx(1.0, abs=0.02)
    # exactly: 2 (1 + 0.01 (c - 1)) = 1 + 0.05 (c - 1)  ->  c = 1 + 1 / 0.03
    assert c == pytest.approx(1 + 1 / 0.03)


def test_no_crossover_when_the_effect_never_changes_sign() -> None:
    assert true_crossover(PLAIN, MockConfig(gap_s=0.02, tokens_per_chunk=2, output_tokens=129)) is None
    slower = MockConfig(gap_s=0.05, tokens_per_chunk=2, output_tokens=129, decode_slowdown_per_request=0.1)
    assert true_crossover(PLAIN, slower) is None  # slower already at one stream, and more so after
    assert true_crossover(PLAIN, PLAIN) is None  # equal at every load: no sign change


# --------------------------------------------------------------------------------------------------------------
# The step-batched mode (issue 49): a scripted engine whose speedup at every load and K is known

ENGINE = {"step_batched": True, "step_s": 0.010, "step_s_per_request": 0.001, "verify_s_per_request_token": 0.002,
          "draft_s_per_token": 0.001, "output_tokens": 41}  # fmt: skip


def test_tokens_per_step_from_conditional_and_from_forced_rates() -> None:
    content = MockConfig(**ENGINE, num_speculative_tokens=2, acceptance_rates=(0.8, 0.5, 0.3))
    assert true_tokens_per_step(content) == pytest.approx(1 + 0.8 + 0.8 * 0.5)  # k = 2 reads the first two only
    assert accepted_distribution(content) == pytest.approx((0.2, 0.4, 0.4))
    forced = MockConfig(**ENGINE, num_speculative_tokens=2, forced_acceptance_rates=(0.8, 0.6))
    assert true_tokens_per_step(forced) == pytest.approx(1 + 0.8 + 0.6)  # unconditional: 1 + sum p_j
    missing = MockConfig(**ENGINE, num_speculative_tokens=3, forced_acceptance_rates=(0.8,))
    assert true_tokens_per_step(missing) == pytest.approx(1.8)  # positions not given accept nothing
    assert true_tokens_per_step(with_k(content, 0)) == 1.0


def test_expected_steps_count_the_last_step_cut_to_fit() -> None:
    plain = MockConfig(**ENGINE)
    assert expected_steps(plain, 40) == pytest.approx(40)
    always = MockConfig(**ENGINE, num_speculative_tokens=4, acceptance_rates=(1.0,) * 4)
    assert expected_steps(always, 40) == pytest.approx(8) and expected_steps(always, 41) == pytest.approx(9)
    half = MockConfig(**ENGINE, num_speculative_tokens=1, acceptance_rates=(0.5,))
    # by hand: 1 token takes one step; 2 tokens one step (p 0.5, two tokens) or two (p 0.5): 1.5
    assert expected_steps(half, 1) == pytest.approx(1.0) and expected_steps(half, 2) == pytest.approx(1.5)
    assert expected_steps(half, 3000) / 3000 == pytest.approx(1 / 1.5, rel=1e-3)  # long outputs: 1 / tokens per step


def test_step_tpot_is_the_step_time_over_the_tokens_each_step_gives() -> None:
    plain = MockConfig(**ENGINE)
    assert step_s(plain, 1) == pytest.approx(0.011) and step_s(plain, 8) == pytest.approx(0.018)
    assert true_tpot_s(plain, 8) == pytest.approx(0.018)  # one token per step
    always = MockConfig(**ENGINE, num_speculative_tokens=4, acceptance_rates=(1.0,) * 4)
    # a + b c + d c k + g k = 10 + 8 + 64 + 4 ms at c = 8; 40 tokens after the first in 8 steps of 5
    assert step_s(always, 8) == pytest.approx(0.086)
    assert true_tpot_s(always, 8) == pytest.approx(0.086 * 8 / 40)


def test_step_crossover_in_closed_form() -> None:
    # every draft accepted at k = 4: 5 tokens per step. Plain a + b c against (a + b c + d c k + g k) / 5 meet
    # where a + b c = d c + g, i.e. c = (a - g) / (d - b) = 9 / 1 = 9 (both 19 ms per token there).
    always = MockConfig(**ENGINE, num_speculative_tokens=4, acceptance_rates=(1.0,) * 4)
    assert true_crossover_of_k(always, 4) == pytest.approx(9.0)
    assert true_tpot_s(with_k(always, 0), 9) == pytest.approx(0.019) and true_tpot_s(always, 9) == pytest.approx(0.019)
    assert true_tpot_speedup(with_k(always, 0), always, 8) > 1 > true_tpot_speedup(with_k(always, 0), always, 10)
    free = MockConfig(**{**ENGINE, "verify_s_per_request_token": 0.0}, num_speculative_tokens=4,
                      acceptance_rates=(1.0,) * 4)  # fmt: skip
    assert true_crossover_of_k(free, 4) is None  # verification costs nothing per request: it pays at every load


def test_best_k_falls_with_load() -> None:
    # conditional 0.9 everywhere; a = 10 ms, b = d = 1 ms, no drafting cost. Long outputs: TPOT_k = (a + b c + d c k)
    # / (1 + 0.9 + ... + 0.9^k). At c = 1: 11/1, 12/1.9, 13/2.71, 14/3.44, 15/4.10 ms: k = 4 is best. At c = 64:
    # 74, 72.6 (k = 1), 74.5 (k = 2): k = 1. At c = 200: 210 against 215.8 at k = 1: plain steps.
    cfg = MockConfig(step_batched=True, step_s=0.010, step_s_per_request=0.001, verify_s_per_request_token=0.001,
                     acceptance_rates=(0.9,) * 4, output_tokens=2001)  # fmt: skip
    assert [true_best_k(cfg, c) for c in (1, 64, 200)] == [4, 1, 0]
    assert true_best_k(cfg, 1, ks=(0, 2)) == 2
    forced = MockConfig(**ENGINE, num_speculative_tokens=3, forced_acceptance_rates=(0.9, 0.8))
    assert true_best_k(forced, 1) == 2  # k = 3 drafts a position that is never accepted: it only costs


def test_with_k_keeps_the_engine_and_content() -> None:
    forced = MockConfig(**ENGINE, num_speculative_tokens=3, forced_acceptance_rates=(0.9, 0.8, 0.4))
    assert with_k(forced, 2).forced_acceptance_rates == (0.9, 0.8)
    assert with_k(forced, 0).forced_acceptance_rates is None and with_k(forced, 0).num_speculative_tokens == 0
    with pytest.raises(ValueError, match="step-batched"):
        with_k(PLAIN, 1)
