"""A worker's clock offset from round trips (NTP's bound), and records moved onto the coordinator's clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from speculab.harness.load.clock_sync import SAME_CLOCK, boot_id, offset_from_round_trips
from speculab.harness.records import ChunkEvent, RequestRecord


def round_trip(t0: float, offset: float, out_s: float, back_s: float) -> tuple[float, float, float]:
    """The coordinator asks at t0; the worker reads its clock (ours + offset) out_s later; the answer takes back_s."""
    return (t0, t0 + out_s + offset, t0 + out_s + back_s)


@given(
    offset=st.floats(-1e4, 1e4),
    legs=st.lists(st.tuples(st.floats(1e-6, 0.05), st.floats(1e-6, 0.05)), min_size=1, max_size=20),
)
def test_the_true_offset_is_always_within_the_bound(offset, legs):
    samples = [round_trip(100.0 + 0.1 * i, offset, a, b) for i, (a, b) in enumerate(legs)]
    est = offset_from_round_trips(samples)
    assert abs(est.offset_s - offset) <= est.uncertainty_s + 1e-9
    # the tightest round trip sets the bound: half of it
    assert est.uncertainty_s == pytest.approx(min(a + b for a, b in legs) / 2)
    assert est.kind == "round trip" and est.samples == len(legs)


def test_symmetric_legs_give_the_offset_exactly_and_the_shortest_trip_wins():
    rng = random.Random(3)
    slow = [round_trip(float(i), 2.5, rng.uniform(0.01, 0.02), rng.uniform(0.001, 0.03)) for i in range(10)]
    fast = round_trip(50.0, 2.5, 0.0002, 0.0002)
    est = offset_from_round_trips([*slow, fast, *slow])
    assert est.offset_s == pytest.approx(2.5, abs=1e-9) and est.uncertainty_s == pytest.approx(0.0002)
    assert est.to_coordinator(est.to_worker(7.0)) == pytest.approx(7.0)
    assert est.to_worker(1.0) == pytest.approx(3.5)


def test_no_round_trips_or_a_clock_that_ran_backwards_is_refused():
    with pytest.raises(ValueError, match="no round trips"):
        offset_from_round_trips([])
    with pytest.raises(ValueError, match="ended before it began"):
        offset_from_round_trips([(5.0, 1.0, 4.0)])


def test_one_host_is_one_clock():
    assert SAME_CLOCK.offset_s == 0.0 and SAME_CLOCK.uncertainty_s == 0.0
    assert SAME_CLOCK.to_dict()["kind"] == "same host"
    bid = boot_id()
    assert bid is None or (bid == boot_id() and len(bid) > 8)  # stable within a boot


def test_a_shifted_record_keeps_every_duration():
    rec = RequestRecord(index=3, scheduled_s=10.0, sent_s=10.1, end_s=11.0,
                        chunks=(ChunkEvent(10.3, "a", 1), ChunkEvent(10.5, "b", 1)), output_text="ab")  # fmt: skip
    moved = rec.shifted(-4.0)
    assert (moved.scheduled_s, moved.sent_s, moved.end_s) == pytest.approx((6.0, 6.1, 7.0))
    assert [c.t_s for c in moved.chunks] == pytest.approx([6.3, 6.5])
    assert moved.chunks[0].t_s - moved.sent_s == pytest.approx(rec.chunks[0].t_s - rec.sent_s)  # TTFT
    assert moved.queue_s == pytest.approx(rec.queue_s) and moved.output_text == rec.output_text
    assert RequestRecord.from_dict(moved.to_dict()) == moved
