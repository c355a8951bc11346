"""Records grouped by the windows of an arm's blocks: nearest window, and one group when none were recorded."""

from __future__ import annotations

import pytest

from speculab.harness.analysis.windows import active_s, by_window, send_rate_rps, send_span_s
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
