"""The true TPOT and crossover of a scripted pair of mocks (issue 39 item 5): the formula against hand-counted gaps."""

from __future__ import annotations

import pytest

from speculab.mock.script import MockConfig
from speculab.mock.truth import true_crossover, true_tpot_s, true_tpot_speedup

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
