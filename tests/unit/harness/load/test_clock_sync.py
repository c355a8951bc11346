"""A worker's clock offset from round trips (NTP's bound), and records moved onto the coordinator's clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from speculab.harness.load import clock_sync
from speculab.harness.load.clock_sync import (
    SAME_CLOCK,
    boot_id,
    clock_id,
    monotonic_offset,
    offset_from_round_trips,
    one_clock,
)
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


def test_one_clock_needs_one_id_and_round_trips_that_bracket_the_workers_reading():
    same = [round_trip(10.0 + i, 0.0, 0.0003, 0.0004) for i in range(16)]
    assert one_clock("boot monotonic+0 0", "boot monotonic+0 0", same)
    # a time namespace 5 s ahead keeps the boot id: its clock_id differs, and so do its round trips
    ahead = [round_trip(10.0 + i, 5.0, 0.0003, 0.0004) for i in range(16)]
    assert not one_clock("boot monotonic+0 0", "boot monotonic+5 0", ahead)
    # ids that claim one clock are not taken on trust: one round trip the worker's reading falls outside suffices
    assert not one_clock("boot monotonic+0 0", "boot monotonic+0 0", [*same[:15], round_trip(30.0, 0.002, 3e-4, 3e-4)])
    assert not one_clock("boot monotonic+0 0", "boot monotonic+0 0", [*same[:15], round_trip(30.0, -1e-6, 0, 3e-4)])
    # nothing known, nothing assumed
    assert not one_clock(None, None, same) and not one_clock("a", "a", [])
    assert not one_clock("boot monotonic+0 0", "other monotonic+0 0", same)


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("monotonic           0         0\nboottime            0         0\n", "0 0"),
        ("monotonic           5         250\nboottime            5         0\n", "5 250"),
        ("1 -3 0\n7 -3 0\n", "-3 0"),  # kernels that name the clocks by id: CLOCK_MONOTONIC = 1
        ("boottime 0 0\n", None),
    ],
)
def test_the_time_namespaces_monotonic_offset_is_read_from_proc(tmp_path, monkeypatch, text, offset):
    f = tmp_path / "timens_offsets"
    f.write_text(text)
    monkeypatch.setattr(clock_sync, "TIMENS_OFFSETS", f)
    assert monotonic_offset() == offset


def test_without_time_namespaces_the_offset_is_zero_and_unreadable_ids_are_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(clock_sync, "TIMENS_OFFSETS", tmp_path / "absent")  # a kernel before 5.6
    assert monotonic_offset() == "0 0"
    if boot_id() is not None:
        assert clock_id() == f"{boot_id()} monotonic+0 0"
    monkeypatch.setattr(clock_sync, "TIMENS_OFFSETS", tmp_path)  # a directory: unreadable as a file
    assert monotonic_offset() is None and clock_id() is None
    monkeypatch.setattr(clock_sync, "TIMENS_OFFSETS", tmp_path / "absent")
    monkeypatch.setattr(clock_sync, "BOOT_ID", tmp_path / "no-boot-id")
    assert clock_id() is None
