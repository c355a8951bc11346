"""The load runner with an in-process fake request function (no sockets)."""

import asyncio
import time

import pytest

from speculab.errors import UserError
from speculab.harness.analysis.metrics import aggregate
from speculab.harness.load.arrivals import ArrivalConfig
from speculab.harness.load.runner import LoadConfig, connections_needed, plan, run_load
from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, RequestSpec

ITEMS = tuple(RequestSpec(index=i, prompt=f"p{i}", seed=100 + i) for i in range(10))


class FakeRequest:
    """Takes `latency_s`, tracks concurrency, and returns a cancelled record when cancelled (like the client)."""

    def __init__(self, latency_s=0.01, fail_every=0):
        self.latency_s, self.fail_every = latency_s, fail_every
        self.in_flight = self.max_in_flight = 0
        self.seen: list[RequestSpec] = []

    async def __call__(self, session, spec, *, scheduled_s, warmup=False):
        sent = time.perf_counter()
        self.seen.append(spec)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        err = None
        try:
            await asyncio.sleep(self.latency_s)
            if self.fail_every and spec.index % self.fail_every == 0:
                err = ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500)
        except asyncio.CancelledError:
            err = ErrorInfo(ErrorCategory.CANCELLED, "cancelled")
        finally:
            self.in_flight -= 1
        t = time.perf_counter()
        return RequestRecord(
            spec.index,
            scheduled_s,
            sent,
            t,
            chunks=(ChunkEvent(t, "x", 1),),
            completion_tokens=1,
            error=err,
            warmup=warmup,
        )


async def go(load, fake, items=ITEMS, stop=None, progress=None):
    records = []
    out = await run_load(items, fake, None, load, on_record=records.append, stop=stop, on_progress=progress)
    return out, records


async def test_closed_loop_concurrency_and_order():
    fake = FakeRequest()
    progress = []
    out, recs = await go(LoadConfig(concurrency=3), fake, progress=progress.append)
    assert len(recs) == 10 and out.measured == 10 and not out.interrupted
    assert fake.max_in_flight == 3
    assert [s.index for s in fake.seen] == list(range(10))  # sent in workload order
    assert progress[-1].finished == 10 and progress[-1].total == 10


async def test_warmup_recorded_and_excluded():
    fake = FakeRequest(fail_every=4)
    out, recs = await go(LoadConfig(concurrency=2, warmup=3, num_prompts=10), fake)
    assert sum(r.warmup for r in recs) == 3 == out.warmup
    agg = aggregate(recs)
    assert agg.sent == 10 and agg.sent == agg.ok + agg.error and agg.error == 3  # indices 0, 4, 8


async def test_num_prompts_cycles_items_with_fresh_indices():
    specs = list(plan(ITEMS[:3], 7, endless=False))
    assert [s.index for s in specs] == list(range(7))
    assert [s.prompt for s in specs] == ["p0", "p1", "p2", "p0", "p1", "p2", "p0"]
    assert specs[3].seed == 100  # a repeated item keeps its seed
    assert len(list(plan(ITEMS, 4, endless=False))) == 4


async def test_open_loop_cap_shows_as_queue_time():
    # 100 rps offered, each request takes 50 ms, at most 1 in flight: the client must fall behind, visibly
    fake = FakeRequest(latency_s=0.05)
    load = LoadConfig(concurrency=1, arrival=ArrivalConfig(100.0, "constant"), num_prompts=6)
    _out, recs = await go(load, fake)
    assert fake.max_in_flight == 1 and len(recs) == 6
    sched = sorted(r.scheduled_s for r in recs)
    assert sched[1] - sched[0] == pytest.approx(0.01, abs=1e-9)  # schedule is the plan, not when it went
    assert max(r.queue_s for r in recs) > 0.15


async def test_open_loop_uncapped_runs_concurrently():
    fake = FakeRequest(latency_s=0.1)
    load = LoadConfig(concurrency=None, arrival=ArrivalConfig(200.0, "poisson"), num_prompts=10)
    _out, recs = await go(load, fake)
    assert len(recs) == 10 and fake.max_in_flight > 1


async def test_duration_stops_new_requests():
    fake = FakeRequest(latency_s=0.02)
    _out, recs = await go(LoadConfig(concurrency=2, duration_s=0.15), fake)
    assert 2 <= len(recs) < 40
    assert len({r.index for r in recs}) == len(recs)


async def test_stop_cancels_in_flight_and_records_them():
    fake = FakeRequest(latency_s=10.0)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, stop.set)
    progress = []
    out, recs = await go(LoadConfig(concurrency=4), fake, stop=stop, progress=progress.append)
    assert out.interrupted and len(recs) == 4
    assert all(r.error.category is ErrorCategory.CANCELLED for r in recs)
    # issue 36: cancelled requests count as neither sent nor failed, in the numbers and in the progress alike
    agg = aggregate(recs)
    assert agg.sent == agg.ok + agg.error == 0 and agg.cancelled == 4 and agg.errors_by_category == {}
    assert progress[-1].finished == progress[-1].error == 0 and out.measured == 0


def test_bad_load_config():
    with pytest.raises(UserError):
        LoadConfig(concurrency=0)
    with pytest.raises(UserError):
        LoadConfig(concurrency=None)
    with pytest.raises(UserError):
        LoadConfig(duration_s=0)


@pytest.mark.parametrize("arrival", [None, ArrivalConfig(500.0, "constant")])
async def test_a_bug_in_the_request_function_is_raised_not_swallowed(arrival):
    async def broken(session, spec, *, scheduled_s, warmup=False):
        raise ZeroDivisionError("bug")

    with pytest.raises(ZeroDivisionError):
        await run_load(ITEMS, broken, None, LoadConfig(concurrency=2, arrival=arrival), on_record=lambda r: None)


@pytest.mark.parametrize("arrival", [None, ArrivalConfig(500.0, "constant")])
async def test_a_record_that_cannot_be_written_ends_the_run_with_nothing_left_running(arrival):
    # a full disk: the first record refused stops the run; the requests in flight are cancelled and finished before
    # the error goes up, so none ends later (in asyncio's shutdown, with a traceback of its own), and none starts
    fake, records = FakeRequest(latency_s=0.05), []

    def on_record(rec):
        if len(records) == 3:
            raise UserError("cannot write requests.jsonl (No space left on device)")
        records.append(rec)

    items = tuple(RequestSpec(index=i, prompt=f"p{i}", seed=i) for i in range(200))
    load = LoadConfig(concurrency=8, arrival=arrival)
    with pytest.raises(UserError, match="No space left"):
        await run_load(items, fake, None, load, on_record=on_record)
    assert fake.in_flight == 0 and len(fake.seen) < len(items)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_what_lives_at_the_start_is_kept_out_of_full_collections_during_the_run():
    import gc

    frozen = []

    def progress(p):
        if p.finished:
            frozen.append(gc.get_freeze_count())

    await go(LoadConfig(concurrency=2, num_prompts=4), FakeRequest(), progress=progress)
    assert frozen and min(frozen) > 0  # modules, workload, caller's state: not scanned by the collector meanwhile
    assert gc.get_freeze_count() == 0  # and handed back to the collector afterwards


class CyclicGarbage:
    """What a failed request leaves behind: objects in a reference cycle (exception -> traceback -> frame -> ...)."""

    def __init__(self):
        self.me = self


async def test_what_failed_requests_leave_in_cycles_is_collected_during_the_run():
    # Frozen while its request is in flight (the runner once froze at every request's end), such garbage would stay
    # until the run ended: a leak over an hours-long run against a flaky server.
    import gc
    import weakref

    left: list[weakref.ref] = []

    class LeavesCycles(FakeRequest):
        async def __call__(self, session, spec, *, scheduled_s, warmup=False):
            junk = CyclicGarbage()
            left.append(weakref.ref(junk))
            await asyncio.sleep(0)  # other requests finish meanwhile
            del junk
            return await super().__call__(session, spec, scheduled_s=scheduled_s, warmup=warmup)

    alive = []

    def progress(p):
        if p.finished == 400 and not alive:
            gc.collect()  # collects what it can see: nothing frozen
            alive.append(sum(r() is not None for r in left))

    await go(LoadConfig(concurrency=8, num_prompts=400), LeavesCycles(latency_s=0), progress=progress)
    assert alive == [0]


async def test_stop_during_warmup_measures_nothing_and_records_the_cancelled_warmups():
    fake = FakeRequest(latency_s=10.0)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, stop.set)
    out, recs = await go(LoadConfig(concurrency=2, warmup=3, num_prompts=5), fake, stop=stop)
    assert out.interrupted and out.measured == 0 and out.warmup == 2 == len(recs)
    assert all(r.warmup and r.error.category is ErrorCategory.CANCELLED for r in recs)
    agg = aggregate(recs)
    assert agg.sent == agg.ok + agg.error == 0


async def test_stop_while_open_loop_waits_for_a_slot():
    # capped at 1 in flight, 100 rps offered: the driver is blocked on the slot when the stop comes
    fake = FakeRequest(latency_s=10.0)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, stop.set)
    load = LoadConfig(concurrency=1, arrival=ArrivalConfig(100.0, "constant"), num_prompts=50)
    out, recs = await go(load, fake, stop=stop)
    assert out.interrupted and len(recs) == 1 and recs[0].error.category is ErrorCategory.CANCELLED
    agg = aggregate(recs)
    assert agg.sent == agg.ok + agg.error == 0 and agg.cancelled == 1  # recorded, in no count (issue 36)


async def test_ramp_up_staggers_the_workers_first_requests():
    fake = FakeRequest(latency_s=0.6)
    out, recs = await go(LoadConfig(concurrency=4, num_prompts=4, ramp_up_s=0.2), fake)
    # worker k starts k/4 of the ramp after the phase began: 0, 50, 100, 150 ms. Offsets are taken from the phase's
    # start (not from worker 0's first send, which a busy machine delays too): a sleep's wake-up is never early, and
    # the upper bound only guards against lockstep or a ramp ignored, with room for a loaded machine's late wakeups.
    offsets = sorted(r.sent_s - out.started_s for r in recs)
    for k, off in enumerate(offsets):
        assert 0.05 * k - 0.001 <= off <= 0.05 * k + 0.3, offsets
    assert fake.max_in_flight == 4  # every worker is running by the end of the ramp (each request takes 0.6 s)


def test_ramp_up_is_closed_loop_only():
    with pytest.raises(UserError, match="--ramp-up"):
        LoadConfig(concurrency=2, arrival=ArrivalConfig(5.0), ramp_up_s=1.0)
    with pytest.raises(UserError, match="--ramp-up"):
        LoadConfig(concurrency=2, ramp_up_s=-1.0)


async def test_ramp_up_ends_when_the_run_does():
    """Workers still waiting out the ramp give up when the items run out or the duration passes: a long ramp
    never stretches a short run."""
    t = time.perf_counter()
    _, recs = await go(LoadConfig(concurrency=4, num_prompts=2, ramp_up_s=8.0), FakeRequest(latency_s=0.01))
    assert len(recs) == 2 and time.perf_counter() - t < 4.0  # worker 1 starts 2 s in; workers 2, 3 never do
    t = time.perf_counter()
    _, recs = await go(LoadConfig(concurrency=4, duration_s=0.3, ramp_up_s=8.0), FakeRequest(latency_s=0.05))
    assert recs and time.perf_counter() - t < 1.5
    with pytest.raises(UserError, match="finite"):
        LoadConfig(concurrency=2, ramp_up_s=float("inf"))


async def test_warmup_keeps_the_ramps_spacing_not_its_length():
    fake = FakeRequest(latency_s=0.01)
    t = time.perf_counter()
    await go(LoadConfig(concurrency=64, warmup=4, num_prompts=4, ramp_up_s=6.4), fake)
    # 4 warmup workers 0.1 s apart, then the measured phase's 4 items on workers 0..3 (0.1 s apart): not 6.4 s
    assert time.perf_counter() - t < 3.0


# --- conversations: turn k+1 behind the arm's own turn-k answer -----------------------------------------------


class AnsweringRequest(FakeRequest):
    """Answers each request with a text naming its index, so a later turn's context shows whose answer it holds."""

    def __init__(self, latency_s=0.005, fail_index=None):
        super().__init__(latency_s)
        self.fail_index = fail_index

    async def __call__(self, session, spec, *, scheduled_s, warmup=False):
        rec = await super().__call__(session, spec, scheduled_s=scheduled_s, warmup=warmup)
        err = ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500) if spec.index == self.fail_index else rec.error
        return RequestRecord(
            rec.index, rec.scheduled_s, rec.sent_s, rec.end_s, chunks=rec.chunks, output_text=f" answer{spec.index}",
            completion_tokens=1, error=err, warmup=warmup, conversation_id=spec.conversation_id, turn=spec.turn,
        )  # fmt: skip


def conversation_items(n_conv=4, turns=3, api="completions"):
    """n_conv conversations of `turns` turns each, as workload.items.finalize lays them out."""
    from speculab.harness.workload.items import SourceItem, finalize

    src = [SourceItem(f"c{c}", prompt=f"q{c}.1", later_turns=tuple(f"q{c}.{t}" for t in range(2, turns + 1)))
           for c in range(n_conv)]  # fmt: skip
    return finalize(src, 0, None, api)


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_closed_loop_sends_each_turn_after_the_last_with_its_own_answer(api):
    fake = AnsweringRequest()
    items = conversation_items(api=api)
    out, recs = await go(LoadConfig(concurrency=2), fake, items=items)
    assert out.measured == 12 and out.skipped == 0
    assert fake.max_in_flight == 2  # two conversations in flight, one turn each
    by_index = {s.index: s for s in fake.seen}
    rec = {r.index: r for r in recs}
    for s in items:
        sent = by_index[s.index]
        if s.turn > 1:
            assert rec[s.index - 1].end_s <= rec[s.index].sent_s  # after the turn before finished
        if api == "completions":
            expected = f"User: q{s.conversation_id[1:]}.1\n\nAssistant:"
            for t in range(2, s.turn + 1):
                expected += f" answer{s.index - s.turn + t - 1}\n\nUser: q{s.conversation_id[1:]}.{t}\n\nAssistant:"
            assert sent.prompt == expected
        else:
            assert len(sent.messages) == 2 * s.turn - 1
            assert [m["content"] for m in sent.messages[1::2]] == [
                f" answer{i}" for i in range(s.index - s.turn + 1, s.index)
            ]
    # records name their conversation and turn, and hash what was sent
    assert [(r.conversation_id, r.turn) for r in sorted(recs, key=lambda r: r.index)][:4] == [
        ("c0", 1), ("c0", 2), ("c0", 3), ("c1", 1)
    ]  # fmt: skip


async def test_a_failed_turn_leaves_its_later_turns_unsent_and_counted():
    fake = AnsweringRequest(fail_index=4)  # conversation c1's second turn
    out, _recs = await go(LoadConfig(concurrency=2), fake, items=conversation_items())
    assert out.skipped == 1 and out.measured == 11
    assert 5 not in {s.index for s in fake.seen}


async def test_open_loop_starts_conversations_at_the_schedule_and_caps_conversations():
    fake = AnsweringRequest(latency_s=0.02)
    load = LoadConfig(concurrency=2, arrival=ArrivalConfig(rate_rps=1000.0, kind="constant"))
    out, recs = await go(load, fake, items=conversation_items(n_conv=4, turns=2))
    assert out.measured == 8 and out.skipped == 0
    assert fake.max_in_flight == 2  # the cap holds a slot for the whole conversation
    rec = {r.index: r for r in recs}
    for i in (1, 3, 5, 7):  # second turns: after their first turn, with its answer
        assert rec[i].sent_s >= rec[i - 1].end_s
        assert f" answer{i - 1}" in next(s for s in fake.seen if s.index == i).prompt


async def test_stop_mid_conversation_sends_no_more_turns():
    fake = AnsweringRequest(latency_s=0.05)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, stop.set)
    out, recs = await go(LoadConfig(concurrency=2), fake, items=conversation_items(), stop=stop)
    assert out.interrupted and len(fake.seen) == 2
    assert all(r.error is not None and r.error.category == ErrorCategory.CANCELLED for r in recs)


# --- trace replay: each request at its recorded arrival ---------------------------------------------------------


def trace_items(arrivals):
    return tuple(RequestSpec(index=i, prompt=f"p{i}", arrival_s=a) for i, a in enumerate(arrivals))


@pytest.mark.parametrize("speed", [1.0, 2.0])
async def test_a_trace_is_scheduled_at_its_arrivals_divided_by_speed(speed):
    arrivals = [0.0, 0.01, 0.05, 0.06, 0.12]
    fake = FakeRequest(latency_s=0.001)
    out, recs = await go(LoadConfig(concurrency=None, trace_speed=speed), fake, items=trace_items(arrivals))
    assert out.measured == 5
    rec = sorted(recs, key=lambda r: r.index)
    offsets = [r.scheduled_s - out.started_s for r in rec]
    assert offsets == pytest.approx([a / speed for a in arrivals], abs=1e-9)  # the schedule itself: exact
    assert all(r.sent_s >= r.scheduled_s for r in rec)


async def test_a_trace_block_starts_at_its_own_first_arrival_and_is_never_cycled():
    fake = FakeRequest(latency_s=0.001)
    items = trace_items([100.0, 100.02, 100.04])  # a later block of a trace: no 100 s wait
    load = LoadConfig(concurrency=None, trace_speed=1.0, duration_s=5.0)
    out, recs = await go(load, fake, items=items)
    assert out.measured == 3  # a duration does not cycle a trace
    assert max(r.scheduled_s for r in recs) - out.started_s == pytest.approx(0.04)


def test_trace_speed_is_checked():
    with pytest.raises(UserError, match="--trace-speed must be a positive number"):
        LoadConfig(concurrency=None, trace_speed=0.0)
    with pytest.raises(UserError, match="a trace sets its own arrival times: drop --rate"):
        LoadConfig(arrival=ArrivalConfig(rate_rps=2.0), trace_speed=1.0)
    assert LoadConfig(concurrency=None, trace_speed=1.5).to_manifest()["mode"] == "trace"


def test_connections_needed_is_the_first_waves_size():
    assert connections_needed(LoadConfig(concurrency=64, num_prompts=200), 10) == 64
    assert connections_needed(LoadConfig(concurrency=64, num_prompts=8), 10) == 8  # never more than requests
    assert connections_needed(LoadConfig(concurrency=64), 10) == 10  # the workload once
    assert connections_needed(LoadConfig(concurrency=64, duration_s=5.0), 10) == 64  # cycled for a while
    assert connections_needed(LoadConfig(concurrency=4, arrival=ArrivalConfig(rate_rps=5.0)), 10) == 4  # the cap
    assert connections_needed(LoadConfig(concurrency=None, arrival=ArrivalConfig(rate_rps=5.0)), 10) == 0


async def test_connections_are_opened_after_warmup_and_before_the_measured_clock_starts():
    events = []

    async def open_connections(n):
        events.append(("open", n, len(fake.seen)))

    async def measure_start():
        events.append(("measure", len(fake.seen)))

    fake = FakeRequest(latency_s=0.001)
    load = LoadConfig(concurrency=4, num_prompts=6, warmup=2)
    await run_load(
        ITEMS,
        fake,
        None,
        load,
        on_record=lambda r: None,
        on_measure_start=measure_start,
        open_connections=open_connections,
    )
    assert events == [("open", 4, 2), ("measure", 2)]  # once, after the 2 warmups, before any measured request
