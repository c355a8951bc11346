"""Records grouped by the windows of an arm's blocks: nearest window, and one group when none were recorded."""

from __future__ import annotations

import pytest

from speculab.harness.analysis.windows import (
    achieved_concurrency,
    active_s,
    by_window,
    closed_loop_fraction,
    full_loop_span,
    send_rate_rps,
    send_span_s,
)
from speculab.harness.records import RequestRecord


def rec(i: int, sent: float, end: float, *, warmup: bool = False) -> RequestRecord:
    return RequestRecord(i, sent, sent, end, warmup=warmup)


def test_records_go_to_the_nearest_window_even_a_little_outside_it() -> None:
    windows = [(10.0, 12.0), (0.0, 2.0), (20.0, 22.0)]  # any order
    recs = [
        rec(0, 0.0, 1.0),
        rec(1, 1.0, 2.0),
        rec(2, 9.999, 11.0),  # a clock reading a hair before its block's window began
        rec(3, 11.0, 12.0),
        rec(4, 20.5, 22.0),
        rec(5, 15.0, 16.0, warmup=True),  # warmup never counts
    ]
    groups = by_window(recs, windows)
    assert [[r.index for r in g] for g in groups] == [[0, 1], [2, 3], [4]]


def test_without_windows_every_measured_record_is_one_group() -> None:
    recs = [rec(0, 0.0, 1.0), rec(1, 5.0, 6.0), rec(2, 0.0, 0.5, warmup=True)]
    assert [[r.index for r in g] for g in by_window(recs)] == [[0, 1]]
    assert [[r.index for r in g] for g in by_window(recs, [(0.0, 6.0)])] == [[0, 1]]
    assert by_window([rec(0, 0.0, 1.0, warmup=True)]) == []


def test_rate_and_active_time_count_the_windows_only() -> None:
    # an arm sending one request a second in two blocks 100 s apart (the other arm ran in between)
    a = [rec(0, 0.0, 0.5), rec(1, 1.0, 1.5), rec(2, 2.0, 2.5)]
    b = [rec(3, 100.0, 100.5), rec(4, 101.0, 101.5), rec(5, 102.0, 102.5)]
    groups = by_window(a + b, [(0.0, 2.5), (100.0, 102.5)])
    assert send_rate_rps(groups) == pytest.approx(1.0)
    assert active_s(groups) == pytest.approx(5.0)
    assert send_span_s(groups[0]) == pytest.approx(2.0)
    # one group: the whole span, as before windows were recorded
    assert send_rate_rps(by_window(a + b)) == pytest.approx(5 / 102)
    assert active_s(by_window(a + b)) == pytest.approx(102.5)
    assert send_rate_rps([[rec(0, 0.0, 1.0)]]) is None


def test_n_requests_started_together_at_concurrency_n_read_n_in_flight() -> None:
    """A GuideLLM concurrent@4 run whose 4 requests started within 1.2 ms read "1.66 in flight of 4" when the
    span ended at the last send (#37): the loop is full until the first request ends, whatever their lengths."""
    starts = [0.0, 0.0004, 0.0009, 0.0012]
    lengths = [9.0, 11.5, 14.0, 20.0]  # unequal: the longest alone sets the last completion
    recs = [rec(i, s, s + d) for i, (s, d) in enumerate(zip(starts, lengths, strict=True))]
    assert achieved_concurrency(recs) == pytest.approx(4.0, abs=1e-3)
    # Little's law up to the last completion would count the drain: mean length / longest of 4, not 4
    busy = sum(lengths)
    assert busy / (max(s + d for s, d in zip(starts, lengths, strict=True)) - starts[0]) < 3.0
    assert full_loop_span(recs) == pytest.approx((0.0, 9.0))


def test_a_client_that_falls_behind_still_reads_short_of_its_concurrency() -> None:
    # concurrency 2 asked; the client refills each slot 1 s after it frees (1 s requests): 1 in flight on average
    recs = [rec(0, 0.0, 1.0), rec(1, 0.0, 1.0), rec(2, 2.0, 3.0), rec(3, 2.0, 3.0), rec(4, 4.0, 5.0)]
    # five 1 s requests over 0 -> 5 s (the last ends at 5, the first completion after the last send): 1 of 2
    assert achieved_concurrency(recs) == pytest.approx(1.0)


def test_fewer_prompts_than_streams_is_the_whole_load_they_allow() -> None:
    # 3 prompts at concurrency 16, all in flight together: 3 of 16 is all 3 prompts allow, not 19 %
    recs = [rec(i, 0.001 * i, 5.0 + i) for i in range(3)]
    assert achieved_concurrency(recs) == pytest.approx(3.0, abs=0.01)
    assert closed_loop_fraction(recs, 16) == pytest.approx(1.0, abs=0.01)
    # one stream short of 4 the whole time: 3 of 4
    late = [rec(i, 0.0, 2.0) for i in range(3)] + [rec(3 + i, 2.0, 4.0) for i in range(3)]
    assert closed_loop_fraction(late, 4) == pytest.approx(0.75)
