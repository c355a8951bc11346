"""A phased load: its schedule (pure), and the runner driving it with an in-process fake request function."""

import asyncio
import time

import numpy as np
import pytest

from speculab.config.experiment import LoadPhase
from speculab.harness.load.arrivals import ArrivalConfig
from speculab.harness.load.phases import PHASE_STRIDE, open_schedule, phase_at, phase_prompts, windows
from speculab.harness.load.runner import LoadConfig, run_load
from speculab.harness.records import ChunkEvent, RequestRecord, RequestSpec

ITEMS = tuple(RequestSpec(index=i, prompt=f"p{i}", seed=100 + i) for i in range(5))


def test_windows_follow_one_another_and_phase_at_finds_them():
    placed = windows((LoadPhase(1, None, 2.0), LoadPhase(8, None, 1.5), LoadPhase(1, None, 2.0)))
    assert [(w.number, w.start_s, w.end_s) for w in placed] == [(1, 0.0, 2.0), (2, 2.0, 3.5), (3, 3.5, 5.5)]
    assert [phase_at(placed, t) for t in (-0.1, 0.0, 1.99, 2.0, 3.6, 5.5)] == [None, 0, 0, 1, 2, None]


def test_each_phase_sends_the_workload_from_its_first_prompt():
    first = [s for _, s in zip(range(7), phase_prompts(ITEMS, 2), strict=False)]
    assert [s.prompt for s in first] == ["p0", "p1", "p2", "p3", "p4", "p0", "p1"]
    assert [s.index for s in first] == [2 * PHASE_STRIDE + k for k in range(7)]


def test_rate_phases_draw_the_same_schedule_for_the_same_seed_within_each_phase():
    placed = windows((LoadPhase(None, 20.0, 1.0), LoadPhase(None, 200.0, 0.5)))
    one = open_schedule(placed, ITEMS, "poisson", 1.0, seed=7)
    assert one == open_schedule(placed, ITEMS, "poisson", 1.0, seed=7)
    first = [t for t, s in one if s.index < PHASE_STRIDE]
    second = [t for t, s in one if s.index >= PHASE_STRIDE]
    assert first[0] == 0.0 and max(first) < 1.0 and second[0] == 1.0 and max(second) < 1.5
    assert len(second) > 2 * len(first)  # ten times the rate for half the time: about five times the requests


class Fake:
    def __init__(self, latency_s=0.02):
        self.latency_s, self.in_flight, self.peaks = latency_s, 0, []

    async def __call__(self, session, spec, *, scheduled_s, warmup=False):
        sent = time.perf_counter()
        self.in_flight += 1
        self.peaks.append((spec.index // PHASE_STRIDE, self.in_flight))
        try:
            await asyncio.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        t = time.perf_counter()
        return RequestRecord(spec.index, scheduled_s, sent, t, chunks=(ChunkEvent(t, "x", 1),), completion_tokens=1)


async def test_closed_phases_hold_each_phases_concurrency_and_send_its_own_prompts():
    phases = (LoadPhase(1, None, 0.2), LoadPhase(6, None, 0.2), LoadPhase(1, None, 0.2))
    fake, records = Fake(), []
    load = LoadConfig(concurrency=6, phases=phases, duration_s=0.6)
    out = await run_load(ITEMS, fake, None, load, on_record=records.append)
    assert not out.interrupted and out.measured == len(records)
    by_phase = {p: max(n for q, n in fake.peaks if q == p) for p in (0, 1, 2)}
    assert by_phase[0] == 1 and by_phase[1] == 6  # at most one in flight at the start, six at the peak
    assert all(r.sent_s - out.started_s < 0.6 for r in records)  # nothing starts once the schedule is over
    for p in (0, 1, 2):
        sent = sorted(r.index for r in records if r.index // PHASE_STRIDE == p)
        assert sent == [p * PHASE_STRIDE + k for k in range(len(sent))] and sent  # each phase from its first prompt


async def test_rate_phases_run_open_loop_on_their_schedule():
    phases = (LoadPhase(None, 50.0, 0.2), LoadPhase(None, 200.0, 0.2))
    fake, records = Fake(0.005), []
    load = LoadConfig(concurrency=None, arrival=ArrivalConfig(200.0), phases=phases, duration_s=0.4, seed=3)
    await run_load(ITEMS, fake, None, load, on_record=records.append)
    placed = windows(phases)
    want = open_schedule(placed, ITEMS, "poisson", 1.0, seed=3)
    assert sorted(r.index for r in records) == sorted(s.index for _, s in want)


def test_a_phased_load_is_its_phases_total():
    with pytest.raises(ValueError, match="total"):
        LoadConfig(concurrency=2, phases=(LoadPhase(2, None, 1.0),), duration_s=2.0)
    assert np.isclose(LoadConfig(concurrency=2, phases=(LoadPhase(2, None, 1.0),), duration_s=1.0).duration_s, 1.0)
