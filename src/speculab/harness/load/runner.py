"""Offered load: pacing, concurrency, warmup and cancellation -> request records, each handed on as it finishes.

Closed loop: N workers, each sends its next request as soon as its previous one finishes.
Open loop: requests are scheduled at `ArrivalConfig` offsets, or at a trace's own arrival times (`trace_speed`);
with a concurrency cap a request waits for a free slot, and that wait is client queue time (scheduled -> sent),
recorded and reported, never hidden.
Warmup requests run first (closed loop), are recorded with `warmup=True` and excluded from results.
Stopping: after the workload's items (cycled up to num_prompts), or when `duration_s` has passed (no new
requests; in-flight ones finish), or when `stop` is set (Ctrl-C): in-flight requests are cancelled and
recorded as `cancelled`, so every request that was sent has a record.

Conversations (workload.conversation): the unit of load is a conversation, whose turns go one after another,
turn k+1 as soon as turn k finished, behind turn k's own answer. Closed loop: N workers each drive one
conversation at a time, so concurrency N is N conversations in flight, which is also N requests in flight
(a conversation has at most one turn in flight). Open loop: the schedule's arrivals start conversations (the
rate is conversations per second; a single-turn workload is unchanged), the concurrency cap counts
conversations, and turns after the first are not scheduled (their `scheduled_s` is when they could go: the
previous turn's end). A turn that fails, or the duration running out, leaves the conversation's later turns
unsent; `LoadOutcome.skipped` counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np

from speculab.config.experiment import LoadPhase
from speculab.errors import UserError
from speculab.harness.client.endpoint import Clock
from speculab.harness.client.request import RequestFunc
from speculab.harness.load.arrivals import ArrivalConfig, send_offsets
from speculab.harness.load.phases import PhaseWindow, open_schedule, phase_at, phase_prompts, segments
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.workload.conversation import continue_turn, conversations
from speculab.serving.pacing import SEND_SPIN_S, sleep_until


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """How much load to offer. Open loop when `arrival` is set, closed loop otherwise."""

    concurrency: int | None = 1  # closed loop: workers; open loop: optional cap on requests in flight
    arrival: ArrivalConfig | None = None
    num_prompts: int | None = None  # measured requests to send; None: every workload item once (or until duration)
    duration_s: float | None = None  # stop sending new requests after this long
    warmup: int = 0  # warmup requests before the measured run
    seed: int = 0  # seeds the arrival RNG
    ramp_up_s: float = 0.0  # closed loop: worker k of N sends its first request k/N of this after the phase starts
    # Trace replay (workload.files.trace): send each request at its recorded arrival, (arrival - first) / trace_speed
    # seconds after the start; `concurrency`, when set, caps requests in flight as for a rate. Never cycled.
    trace_speed: float | None = None
    # trace replay: offsets are (arrival - this) / speed; None: from the first arrival sent (a block, or a trace,
    # starts at its own first request). load.worker_plan hands each worker absolute offsets with origin 0.
    trace_origin_s: float | None = None
    # A phased load (load.phases): these phases one after another, `duration_s` their total; closed loop when they
    # hold concurrencies (workers above the phase's concurrency wait), open loop when rates (`arrival` then gives
    # the arrival kind and burstiness, its rate the peak's). Each phase sends its own prompts (`phases.phase_prompts`)
    phases: tuple[LoadPhase, ...] = ()
    transition_s: float = 0.0  # phased: each change's first seconds send their own prompts (phases.segments)
    # open loop: wake this long before each send time and yield until it (serving.pacing: sends land within ~0.05 ms
    # instead of asyncio's 1-2 ms late), at the price of up to this much CPU per request; 0 sleeps plainly
    send_spin_s: float = SEND_SPIN_S

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise UserError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.arrival is None and self.concurrency is None and self.trace_speed is None:
            raise UserError("give --concurrency N (closed loop) or --rate R (open loop)")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise UserError(f"--num-prompts must be at least 1, got {self.num_prompts}")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UserError(f"--duration must be positive seconds, got {self.duration_s}")
        if self.warmup < 0:
            raise UserError(f"--warmup must be >= 0, got {self.warmup}")
        if not 0 <= self.ramp_up_s < float("inf"):
            raise UserError(f"--ramp-up must be a finite number of seconds >= 0, got {self.ramp_up_s}")
        if self.trace_speed is not None:
            if not 0 < self.trace_speed < float("inf"):
                raise UserError(f"--trace-speed must be a positive number, got {self.trace_speed}")
            if self.arrival is not None:
                raise UserError("a trace sets its own arrival times: drop --rate (use --trace-speed to scale them)")
            if self.ramp_up_s > 0:
                raise UserError("--ramp-up staggers closed-loop workers; a trace sets its own arrival times")
        if self.phases:
            if self.duration_s is None or abs(self.duration_s - sum(p.duration_s for p in self.phases)) > 1e-9:
                raise ValueError("a phased load's duration_s is its phases' total")
            if self.trace_speed is not None or self.ramp_up_s > 0:
                raise UserError("a phased load sets its own pacing: drop --trace-speed and --ramp-up")
        if self.ramp_up_s > 0 and self.arrival is not None:
            raise UserError(
                "--ramp-up staggers closed-loop workers; with --rate the arrival process sets the pacing: drop "
                "--ramp-up, or use --concurrency N without --rate"
            )

    @property
    def mode(self) -> str:
        if self.phases:
            return "phased"
        if self.trace_speed is not None:
            return "trace"
        return "closed" if self.arrival is None else "open"

    def to_manifest(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "concurrency": self.concurrency,
            "rate_rps": None if self.arrival is None else self.arrival.rate_rps,
            "arrival": None if self.arrival is None else self.arrival.kind,
            "burstiness": None if self.arrival is None else self.arrival.burstiness,
            "num_prompts": self.num_prompts,
            "duration_s": self.duration_s,
            "warmup": self.warmup,
            "seed": self.seed,
            "ramp_up_s": self.ramp_up_s,
            "trace_speed": self.trace_speed,
            **({"phases": [dataclasses.asdict(p) for p in self.phases]} if self.phases else {}),
        }


@dataclass(frozen=True, slots=True)
class Progress:
    finished: int  # measured requests finished (ok or not; cancelled ones, cut off by Ctrl-C, are not counted)
    ok: int
    error: int
    in_flight: int
    total: int | None  # measured requests planned, if known
    elapsed_s: float
    duration_s: float | None
    warmup: bool  # still in the warmup phase


@dataclass(frozen=True, slots=True)
class LoadOutcome:
    started_s: float  # clock time the measured phase began
    ended_s: float  # clock time the last measured request finished (or the run was stopped)
    interrupted: bool
    measured: int  # measured records produced (cancelled ones not counted)
    warmup: int  # warmup records produced
    skipped: int = 0  # measured conversation turns not sent: an earlier turn failed, or time ran out


def plan(items: Sequence[RequestSpec], num_prompts: int | None, endless: bool) -> Iterator[RequestSpec]:
    """Workload items in order; cycled (with fresh indices) up to num_prompts, or forever when `endless`
    (duration-bounded runs). A repeated item keeps its prompt and seed; its index is its position in the run."""
    if not items:
        raise UserError("the workload has no items")
    limit = num_prompts if num_prompts is not None else (None if endless else len(items))
    cycled = itertools.cycle(items) if (endless or (limit is not None and limit > len(items))) else iter(items)
    for pos, spec in enumerate(itertools.islice(cycled, limit)):
        yield spec if spec.index == pos else dataclasses.replace(spec, index=pos)


class _Run:
    """Shared state of one load phase: in-flight jobs, counters, callbacks."""

    def __init__(
        self,
        request: RequestFunc,
        session: aiohttp.ClientSession,
        on_record: Callable[[RequestRecord], None],
        on_progress: Callable[[Progress], None] | None,
        clock: Clock,
        total: int | None,
        duration_s: float | None,
    ):
        self.request, self.session, self.on_record, self.on_progress = request, session, on_record, on_progress
        self.clock, self.total, self.duration_s = clock, total, duration_s
        self.jobs: set[asyncio.Task[RequestRecord]] = set()
        self.talks: set[asyncio.Task[None]] = set()  # conversations sending their later turns (open loop)
        self.finished = self.ok = self.error = self.warmup_done = self.skipped = 0
        self.t0 = clock()
        self.last_end_s = self.t0
        self.failure: BaseException | None = None  # a bug in a request function: re-raised, never swallowed

    def start(self, spec: RequestSpec, scheduled_s: float, warmup: bool) -> asyncio.Task[RequestRecord]:
        task = asyncio.create_task(self._job(spec, scheduled_s, warmup))
        self.jobs.add(task)
        task.add_done_callback(self._done)
        self.report(warmup)
        return task

    def _done(self, task: asyncio.Task[RequestRecord]) -> None:
        self.jobs.discard(task)
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()

    def raise_failure(self) -> None:
        """Request functions turn every server or network failure into a record; anything they raise is a bug."""
        if self.failure is not None:
            raise self.failure

    async def _job(self, spec: RequestSpec, scheduled_s: float, warmup: bool) -> RequestRecord:
        rec = await self.request(self.session, spec, scheduled_s=scheduled_s, warmup=warmup)
        self.on_record(rec)
        if warmup:
            self.warmup_done += 1
        elif not rec.cancelled:  # cut off by Ctrl-C: neither sent nor failed, so not in the progress counts
            self.finished += 1
            self.ok += rec.ok
            self.error += not rec.ok
            self.last_end_s = max(self.last_end_s, rec.end_s)
        self.report(warmup)
        return rec

    def report(self, warmup: bool) -> None:
        if self.on_progress is not None:
            self.on_progress(
                Progress(
                    finished=self.finished,
                    ok=self.ok,
                    error=self.error,
                    in_flight=len(self.jobs),
                    total=self.total,
                    elapsed_s=self.clock() - self.t0,
                    duration_s=self.duration_s,
                    warmup=warmup,
                )
            )

    def expired(self) -> bool:
        return self.duration_s is not None and self.clock() - self.t0 >= self.duration_s

    async def converse(self, conv: Sequence[RequestSpec], first: asyncio.Task[RequestRecord], warmup: bool) -> None:
        """Send a conversation's later turns, each as soon as the one before finished, behind its own answer.
        `first` is the task of its first turn, already started. Returns when the last turn sent has finished."""
        sent, job = conv[0], first
        for k in range(1, len(conv)):
            await asyncio.wait({job})  # not `await job`: cancelling the conversation must not cancel the request
            self.raise_failure()
            rec = None if job.cancelled() or job.exception() is not None else job.result()
            if rec is None or not rec.ok or self.expired():
                self.skipped += 0 if warmup else len(conv) - k
                return
            sent = continue_turn(sent, rec.output_text, conv[k])
            job = self.start(sent, self.clock(), warmup)
        await asyncio.wait({job})

    def talk(self, conv: Sequence[RequestSpec], first: asyncio.Task[RequestRecord], warmup: bool) -> asyncio.Task[None]:
        task = asyncio.create_task(self.converse(conv, first, warmup))
        self.talks.add(task)
        task.add_done_callback(self.talks.discard)
        return task


async def _closed_loop(
    run: _Run, specs: Iterator[RequestSpec], concurrency: int, warmup: bool, ramp_step_s: float = 0.0
) -> None:
    over = asyncio.Event()  # the items ran out or the duration passed: workers still waiting to start give up
    convs = conversations(specs)

    async def worker(k: int) -> None:
        # Without a ramp, N identical requests start, stream and finish in lockstep, round after round: client and
        # server then handle N events in one burst at every step, which real traffic never does. A ramp spreads
        # the workers' phases once; equal-length requests then keep them spread.
        if ramp_step_s > 0 and k:
            delay = k * ramp_step_s
            if run.duration_s is not None:
                delay = min(delay, max(0.0, run.duration_s - (run.clock() - run.t0)))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(over.wait(), delay)
            if over.is_set():
                return
        try:
            for conv in convs:  # one shared iterator: each conversation goes to exactly one worker
                if run.expired():
                    return
                if not _opens(conv, run, warmup):
                    continue
                job = run.start(conv[0], run.clock(), warmup)
                # asyncio.wait, unlike await, does not cancel the job when this worker is cancelled: the job
                # is cancelled separately and still produces its (cancelled) record
                await (run.converse(conv, job, warmup) if len(conv) > 1 else asyncio.wait({job}))
                run.raise_failure()
        finally:
            over.set()  # this worker stops only when the items ran out, time is up, or the run failed

    workers = [asyncio.create_task(worker(k)) for k in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    finally:  # one worker's failure ends the others too: none may start a request after the run failed
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def _phased_closed(run: _Run, items: Sequence[RequestSpec], placed: Sequence[PhaseWindow]) -> None:
    """Closed-loop phases: as many workers as the peak's concurrency; worker k sends (the running segment's next
    prompt, when its previous request finished) only in phases of concurrency above k, and waits out the others.
    A request in flight when its phase ends finishes: a load drops as fast as the requests in flight end."""
    streams = [phase_prompts(items, i) for i in range(len(placed))]
    peak = max(w.phase.concurrency or 1 for w in placed)

    async def worker(k: int) -> None:
        while True:
            now = run.clock()  # one reading: the segment chosen and the request's scheduled time agree exactly
            i = phase_at(placed, now - run.t0)
            if i is None:
                return
            if k >= (placed[i].phase.concurrency or 1):
                await sleep_until(run.t0 + placed[i].end_s, run.clock, 0.0)
                continue
            job = run.start(next(streams[i]), now, False)
            await asyncio.wait({job})  # as _closed_loop: a cancelled worker leaves its job to be cancelled apart
            run.raise_failure()

    workers = [asyncio.create_task(worker(k)) for k in range(peak)]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def _phased_load(run: _Run, items: Sequence[RequestSpec], load: LoadConfig) -> Coroutine[Any, Any, None]:
    """The driver of a phased load: closed-loop phases, or rate phases on their drawn schedule."""
    placed = segments(load.phases, load.transition_s)
    if load.phases[0].concurrency is not None:
        return _phased_closed(run, items, placed)
    kind, shape = ("poisson", 1.0) if load.arrival is None else (load.arrival.kind, load.arrival.burstiness)
    sends = open_schedule(placed, items, kind, shape, load.seed)
    offsets = {spec.index: t for t, spec in sends}
    return _open_loop(
        run, iter([spec for _, spec in sends]), lambda spec: offsets[spec.index], load.concurrency, load.send_spin_s
    )


def arrival_offsets(arrival: ArrivalConfig, rng: np.random.Generator) -> Callable[[RequestSpec], float]:
    """Send offsets from the arrival process, one per call (per conversation), in order."""
    offsets = send_offsets(arrival, rng)
    return lambda _spec: next(offsets)


def trace_offsets(speed: float, origin: float | None = None) -> Callable[[RequestSpec], float]:
    """Send offsets from the requests' own arrival times, from `origin` (default: the first one sent, so a block of a
    trace starts at its own first arrival), divided by `speed`."""
    first: list[float] = [] if origin is None else [origin]

    def offset(spec: RequestSpec) -> float:
        if spec.arrival_s is None:
            raise UserError(f"request {spec.index} has no arrival time: trace replay needs a trace:PATH workload")
        if not first:
            first.append(spec.arrival_s)
        return (spec.arrival_s - first[0]) / speed

    return offset


async def _open_loop(
    run: _Run,
    specs: Iterator[RequestSpec],
    offset_of: Callable[[RequestSpec], float],
    cap: int | None,
    spin_s: float,
) -> None:
    slots = asyncio.Semaphore(cap) if cap is not None else None
    for conv in conversations(specs):
        offset = offset_of(conv[0])
        run.raise_failure()
        if run.duration_s is not None and offset >= run.duration_s:
            break
        if not _opens(conv, run, False):
            continue
        scheduled_s = run.t0 + offset
        await sleep_until(scheduled_s, run.clock, spin_s)
        if slots is not None:
            await slots.acquire()
        job = run.start(conv[0], scheduled_s, False)
        holder = run.talk(conv, job, False) if len(conv) > 1 else job  # a slot is held for the whole conversation
        if slots is not None:
            holder.add_done_callback(lambda _t, s=slots: s.release())
    while run.jobs or run.talks:
        await asyncio.wait(run.jobs | run.talks)
    run.raise_failure()


def _opens(conv: Sequence[RequestSpec], run: _Run, warmup: bool) -> bool:
    """A conversation starts at turn 1; one cut off before its first turn (only a warmup prefix can do that) has
    no context to continue and is skipped."""
    if conv[0].turn is None or conv[0].turn <= 1:
        return True
    run.skipped += 0 if warmup else len(conv)
    return False


async def _until_done_or_stopped(run: _Run, driver: asyncio.Task[None], stop: asyncio.Event | None) -> bool:
    """Wait for the driver; on stop, cancel it and every in-flight request (each still yields a record).
    Returns True if stopped. A driver that fails (a record that cannot be written: a full disk) has every request
    still in flight cancelled and finished too before its error goes up, so none ends later, in asyncio's shutdown,
    with a traceback of its own."""
    try:
        if stop is None:
            await driver
            return False
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({driver, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if driver.done():
            driver.result()  # re-raise a bug in the driver, if any
            return False
    except BaseException:
        await _cancel_all(run, driver)
        raise
    await _cancel_all(run, driver)
    return True


async def _cancel_all(run: _Run, driver: asyncio.Task[None]) -> None:
    driver.cancel()
    for task in [*run.talks, *run.jobs]:  # conversations first: none may start its next turn meanwhile
        task.cancel()
    await asyncio.gather(driver, *list(run.talks), *list(run.jobs), return_exceptions=True)


async def run_load(
    items: Sequence[RequestSpec],
    request: RequestFunc,
    session: aiohttp.ClientSession,
    load: LoadConfig,
    *,
    on_record: Callable[[RequestRecord], None],
    on_progress: Callable[[Progress], None] | None = None,
    stop: asyncio.Event | None = None,
    clock: Clock = time.perf_counter,
    on_measure_start: Callable[[], Awaitable[None]] | None = None,
    open_connections: Callable[[int], Awaitable[object]] | None = None,
) -> LoadOutcome:
    """Offer `load` with the workload `items`; every finished request goes to `on_record` at once.
    `on_measure_start` runs after warmup, before the first measured request (e.g. a metrics scrape).
    `open_connections(n)` (client.request.open_connections on the run's session and URL) runs before it: the
    connections the measured phase's first requests will take, opened before its clock starts."""
    # worker k of N starts k x (ramp / N) in; warmup's fewer workers keep the same spacing (a short ramp)
    ramp_step = load.ramp_up_s / load.concurrency if load.ramp_up_s and load.concurrency else 0.0
    try:
        _freeze_what_lives()
        n_warm = 0
        if load.warmup:
            warm = _Run(request, session, on_record, on_progress, clock, None, None)
            warm_specs = plan(items, load.warmup, endless=False)
            driver = asyncio.create_task(
                _closed_loop(warm, warm_specs, min(load.concurrency or 1, load.warmup), True, ramp_step)
            )
            stopped = await _until_done_or_stopped(warm, driver, stop)
            n_warm = warm.warmup_done
            if stopped:
                now = clock()
                return LoadOutcome(now, now, True, 0, n_warm)

        n_open = connections_needed(load, len(items)) if open_connections is not None else 0
        # a server slow to accept: Ctrl-C still stops the run
        if open_connections is not None and n_open and await _stopped_first(open_connections(n_open), stop):
            now = clock()
            return LoadOutcome(now, now, True, 0, n_warm)
        if on_measure_start is not None:
            await on_measure_start()
        _freeze_what_lives()  # the connections warmup opened, the scrape: long-lived from here on
        endless = load.duration_s is not None and load.trace_speed is None  # a trace is replayed once
        total = load.num_prompts if load.num_prompts is not None else (None if endless else len(items))
        if load.phases:
            total = None  # as many as the schedule's time sends
        run = _Run(request, session, on_record, on_progress, clock, total, load.duration_s)
        specs = plan(items, load.num_prompts, endless)
        if load.phases:
            coro = _phased_load(run, items, load)
        elif load.trace_speed is not None:
            offsets = trace_offsets(load.trace_speed, load.trace_origin_s)
            coro = _open_loop(run, specs, offsets, load.concurrency, load.send_spin_s)
        elif load.arrival is None:
            assert load.concurrency is not None
            coro = _closed_loop(run, specs, load.concurrency, False, ramp_step)
        else:
            rng = np.random.default_rng(load.seed)
            coro = _open_loop(run, specs, arrival_offsets(load.arrival, rng), load.concurrency, load.send_spin_s)
        run.report(False)
        stopped = await _until_done_or_stopped(run, asyncio.create_task(coro), stop)
        ended = clock() if stopped else run.last_end_s
        with contextlib.suppress(Exception):
            run.report(False)
        return LoadOutcome(run.t0, ended, stopped, run.finished, n_warm, run.skipped)
    finally:
        gc.unfreeze()  # see _freeze_what_lives


async def _stopped_first(work: Awaitable[object], stop: asyncio.Event | None) -> bool:
    """Await `work`, unless `stop` is set first (then `work` is cancelled): True when stopped."""
    task = asyncio.ensure_future(work)
    if stop is None:
        await task
        return False
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.done() and not task.cancelled():
        task.result()  # a failure of `work` goes up
        return False
    return True


def connections_needed(load: LoadConfig, n_items: int) -> int:
    """How many requests can be in flight at the measured phase's start: its first wave, whose connections are
    better opened before the clock starts (a closed loop's workers all send at once without a ramp). An open loop
    without a cap has no bound: its requests come one by one, and 0 opens none."""
    if load.concurrency is None:
        return 0
    n = load.num_prompts if load.num_prompts is not None else (None if load.duration_s is not None else n_items)
    return load.concurrency if n is None else min(load.concurrency, n)


def _freeze_what_lives() -> None:
    """Move everything alive now out of the cyclic collector's view, between phases (nothing is in flight).

    A full collection scans every tracked object and stops the event loop meanwhile: over the modules, the workload
    and the caller's state that takes tens of ms on a small VM, and chunks arriving then are stamped late (fake gaps
    and stalls). Frozen, they are no longer scanned; `run_load` unfreezes them at the end. Only here, never per
    request: an object frozen while its request is in flight and dropped later (a failed request's exception,
    traceback and frames form cycles) would never be collected during the run, 6-8 KB a failed request against the
    mock. A caller that keeps every record in memory makes full collections grow with the run again; `speculab
    bench` and the A/B runs keep none.
    """
    gc.freeze()
