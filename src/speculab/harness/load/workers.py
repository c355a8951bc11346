"""Load from several client processes on one machine (`speculab bench --workers N`): past what one event loop can
time (load.client_health says when), N processes each run the same runner and client over their share.

The coordinator plans once, the same way in every run:
- the partition: conversation j (a single prompt is a conversation of one) goes to worker j mod N, so a
  conversation's turns stay in one process and the partition does not depend on timing;
- closed loop: the concurrency split over the workers (N=2, 64 streams: 32 + 32); warmup split alike;
- open loop: the global schedule (seeded arrivals, or a trace's own times) computed once, each conversation's start
  offset handed to its worker, which replays it as a trace with that origin (`LoadConfig.trace_origin_s`), so the
  union of the workers' sends is the single-process schedule.
Workers are spawned processes (a clean interpreter each), warm up, then wait at a start barrier: the coordinator
scrapes /metrics and sends every worker one start time on CLOCK_MONOTONIC (`time.perf_counter`, one clock for all
processes of a host); each sleeps until it and starts its measured phase, and records how late it started. Every
finished request is sent to the coordinator at once and written to the run's one requests.jsonl, as a
single-process run writes it; a worker that dies keeps what it sent. Ctrl-C reaches the workers through an event.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import multiprocessing
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from speculab.errors import UserError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.arrivals import send_offsets
from speculab.harness.load.client_health import HealthProbe
from speculab.harness.load.clock_sync import SAME_CLOCK
from speculab.harness.load.runner import LoadConfig, LoadOutcome, Progress, run_load
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.workload.conversation import conversations, sent_as
from speculab.serving.pacing import SEND_SPIN_S, sleep_until

START_MARGIN_S = 0.2  # the start time is this far after the last worker said it was warm
START_LAG_WARN_S = 0.001


def split(total: int, n: int) -> list[int]:
    """`total` over n workers, the first ones one more when it does not divide: 10 over 4 -> 3 3 2 2."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one worker runs: its items (workload indices kept) and its load."""

    worker: int
    items: tuple[RequestSpec, ...]
    load: LoadConfig
    total: int = 0  # the whole workload's items (all workers): numbers a cycled share's repeats


def plan_workers(items: Sequence[RequestSpec], load: LoadConfig, n: int) -> list[WorkerPlan]:
    """The partition and each worker's load; the same for the same items, load and n.

    With `duration_s` the workload is cycled, as one process cycles it: a closed-loop worker cycles its own share
    until the duration (each repeat numbered as the single-process run numbers it: pass c over item i is index
    c * len(items) + i); an open loop's global schedule is drawn up to the duration (or num_prompts arrivals),
    arrival k starting conversation k mod the conversations' count on its worker.
    """
    if n < 1:
        raise UserError(f"--workers must be at least 1, got {n}")
    convs = list(conversations(items))
    if len(convs) < n:
        raise UserError(f"--workers {n} needs at least {n} prompts (conversations); the run has {len(convs)}")
    total = len(items)
    starts: list[float] | None = None
    endless = load.duration_s is not None
    if load.arrival is not None:  # one global seeded schedule, as the single-process run draws it
        gen = send_offsets(load.arrival, np.random.default_rng(load.seed))
        if endless:
            limit = load.num_prompts
            starts = list(itertools.takewhile(lambda t: t < load.duration_s, itertools.islice(gen, limit)))
        else:
            starts = [next(gen) for _ in convs]
    elif load.trace_speed is not None:  # a trace is replayed once, even with a duration (which then cuts it)
        first = min(c[0].arrival_s or 0.0 for c in convs)
        starts = [((c[0].arrival_s or 0.0) - first) / load.trace_speed for c in convs]
    parts: list[list[RequestSpec]] = [[] for _ in range(n)]
    if starts is not None:
        for k, t in enumerate(starts):
            j, c = k % len(convs), k // len(convs)
            conv = [_repeat(s, c, total) for s in convs[j]]
            # the turn that starts it carries its absolute start offset
            parts[j % n] += [dataclasses.replace(conv[0], arrival_s=t), *conv[1:]]
    else:
        for j, conv in enumerate(convs):
            parts[j % n] += conv
    if any(not p for p in parts):
        raise UserError(f"--workers {n}: the schedule has only {len(starts or ())} arrivals, fewer than the workers")
    warm = split(load.warmup, n)
    if load.arrival is None and load.trace_speed is None:
        assert load.concurrency is not None
        if load.concurrency < n:
            raise UserError(f"--workers {n} needs --concurrency of at least {n} (one stream per worker at least)")
        conc = split(load.concurrency, n)
        if endless:  # cycled until the duration; a --num-prompts cap is shared out like the streams
            caps: list[int | None] = split(load.num_prompts, n) if load.num_prompts is not None else [None] * n
        else:
            caps = [len(p) for p in parts]
        loads = [dataclasses.replace(load, concurrency=conc[i], num_prompts=caps[i], warmup=warm[i]) for i in range(n)]
    else:
        streams = split(load.concurrency, n) if load.concurrency is not None else [None] * n
        loads = [
            LoadConfig(
                concurrency=streams[i],
                num_prompts=len(parts[i]),
                duration_s=load.duration_s,  # a conversation's later turns stop at it, as in one process
                warmup=warm[i],
                seed=load.seed,
                trace_speed=1.0,
                trace_origin_s=0.0,
                send_spin_s=load.send_spin_s,
            )
            for i in range(n)
        ]
    return [WorkerPlan(i, tuple(parts[i]), loads[i], total) for i in range(n)]


def _repeat(spec: RequestSpec, cycle: int, total: int) -> RequestSpec:
    """Pass `cycle` over the workload, numbered as a single process numbers its cycled run."""
    return spec if cycle == 0 else dataclasses.replace(spec, index=cycle * total + spec.index)


ERROR_CHARS = 100  # of a lost worker's error in a sentence: Ray's run to hundreds (the manifest keeps the line)


def _lost_how(w: dict[str, Any]) -> str:
    """Which worker ended early, where it ran and how: 'client worker 0 on host b (10.0.0.2) failed (...)'."""
    where = f" on host {w.get('host')} ({w.get('node_ip')})" if w.get("ray") else ""
    err = str(w.get("error") or "")
    if err:
        how = f"failed ({err[:ERROR_CHARS]}{'...' if len(err) > ERROR_CHARS else ''})"
    else:
        how = f"exited (code {w.get('exitcode')})"
    return f"client worker {w['worker']}{where} {how}"


def lost_workers(workers: Sequence[dict[str, Any]]) -> str | None:
    """One line for the workers that ended before their share was done (a process that died, a Ray node that
    dropped out), naming where each ran; None when none did. The run's one-line error (exit 6)."""
    lost = [_lost_how(w) for w in workers if w.get("crashed")]
    if not lost:
        return None
    return f"{'; '.join(lost)} mid-run, before its share was done; every record it sent is kept"


def worker_warnings(workers: Sequence[dict[str, Any]]) -> list[str]:
    """What the workers' own reports say a reader must know: one that crashed, or started late."""
    out = []
    for w in workers:
        if w.get("crashed"):
            out.append(f"{_lost_how(w)} before it finished; the records it sent are kept")
        lag, unc = w.get("start_lag_s"), w.get("start_uncertainty_s") or 0.0
        if lag is not None and lag + unc > START_LAG_WARN_S:
            bound = (
                f" +- {unc * 1e3:.1f} ms (its clock's offset from this machine's, from round trips)" if unc > 0 else ""
            )
            out.append(
                f"client worker {w['worker']} started {lag * 1e3:.1f} ms{bound} after the common start "
                "time: its open-loop sends are that much late"
            )
    return out


def worker_notes(workers: Sequence[dict[str, Any]]) -> list[str]:
    """For an A/B repeat: how many client processes ran it, and what `worker_warnings` says about them."""
    if not workers:
        return []
    n = len({w["worker"] for w in workers})
    lags = [w["start_lag_s"] for w in workers if w.get("start_lag_s") is not None]
    worst = f", start lag up to {max(lags) * 1e3:.2f} ms" if lags else ""
    where = "(load.workers)"
    if any(w.get("ray") for w in workers):
        hosts = len({w.get("node_ip") for w in workers})
        unc = max((w.get("clock") or {}).get("uncertainty_s") or 0.0 for w in workers)
        where = f"as Ray actors on {hosts} node{'s' if hosts != 1 else ''} (load.ray_pool)" + (
            f", clock offsets known to +-{unc * 1e3:.2f} ms" if unc > 0 else ""
        )
    return [f"{n} client worker processes {where}{worst}", *worker_warnings(workers)]


# --- the worker process -----------------------------------------------------------------------------------------


def worker_main(
    plan: WorkerPlan,
    endpoint: dict[str, Any],
    sampling: RequestSampling,
    tokenizer: str | None,
    out: Any,
    go: Any,
    stop: Any,
) -> None:
    """Entry point of a spawned worker: run its share, sending ("rec", dict) per record, ("ready",), ("done", ...)."""
    asyncio.run(_worker(plan, endpoint, sampling, tokenizer, out, go, stop))


async def _worker(
    plan: WorkerPlan,
    endpoint: dict[str, Any],
    sampling: RequestSampling,
    tokenizer: str | None,
    out: Any,
    go: Any,
    stop_event: Any,
) -> None:
    from speculab.harness.client.request import make_session, request_func

    ep = EndpointConfig(**{**endpoint, "extra_body": MappingProxyType(dict(endpoint.get("extra_body") or {}))})
    count_tokens = None
    if tokenizer:
        from speculab.harness.client.token_counter import load_token_counter

        count_tokens = load_token_counter(tokenizer)
    request = _Positional(request_func(ep, sampling, count_tokens=count_tokens), plan.items, plan.total)
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop_event.is_set():
            await asyncio.sleep(0.05)
        stop.set()

    watcher = asyncio.create_task(watch())
    probe = HealthProbe()
    start: list[float] = []

    async def measure_start() -> None:
        out.put(("ready", plan.worker))
        t = await asyncio.to_thread(_get_start, go, stop_event)
        if t is not None:
            await sleep_until(t, time.perf_counter, SEND_SPIN_S)
            start.append(t)
        probe.start()

    try:
        async with make_session() as session:
            outcome = await run_load(
                plan.items,
                request,
                session,
                plan.load,
                stop=stop,
                on_record=lambda r: out.put(("rec", r.to_dict())),
                on_measure_start=measure_start,
            )
    finally:
        watcher.cancel()
    health = await probe.stop() if probe.started else None
    out.put(
        (
            "done",
            plan.worker,
            {
                "started_s": outcome.started_s,
                "ended_s": outcome.ended_s,
                "interrupted": outcome.interrupted,
                "measured": outcome.measured,
                "warmup": outcome.warmup,
                "skipped": outcome.skipped,
                "start_at_s": start[0] if start else None,
                "start_lag_s": outcome.started_s - start[0] if start else None,
                "client": health.to_dict() if health is not None else None,
            },
        )
    )


@dataclass(frozen=True, slots=True)
class _Positional:
    """The runner numbers a phase's requests by position (runner.plan); a worker's share keeps the workload's own
    indices (the pairing key), so position p sends item p of the share, and a later turn keeps the context the
    runner built behind this worker's own answers."""

    inner: Any
    items: tuple[RequestSpec, ...]
    total: int = 0

    async def __call__(
        self, session: Any, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        n = len(self.items)
        item = sent_as(self.items[spec.index % n], spec)
        if spec.index >= n and not warmup:  # a duration run cycling the share: repeat c of item i is c * total + i
            item = _repeat(item, spec.index // n, self.total or n)
        return await self.inner(session, item, scheduled_s=scheduled_s, warmup=warmup)


def drain(q: Any, wait_s: float) -> list[Any]:
    """Everything in queue `q` now, waiting up to `wait_s` for the first item: how a pool collects its workers'
    messages in batches (a process queue here, an actor's buffer in load.ray_pool)."""
    try:
        items = [q.get(timeout=wait_s)]
    except queue.Empty:
        return []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items


def _get_start(go: Any, stop_event: Any) -> float | None:
    while not stop_event.is_set():
        try:
            return float(go.get(timeout=0.1))
        except queue.Empty:
            continue
    return None


# --- the coordinator --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkersOutcome:
    outcome: LoadOutcome
    workers: tuple[dict[str, Any], ...]  # per worker: items, load, start lag, clock, client health, how it ended


class WorkerPool(Protocol):
    """Where the workers run: processes on this machine (`ProcessPool`), or Ray actors (load.ray_pool)."""

    start_margin_s: float  # the common start is this far after the last worker is warm: time for "go" to reach all

    async def messages(self) -> list[tuple[Any, ...]]:
        """What the workers sent since the last call ("rec" dicts on the coordinator's clock), waiting up to ~0.1 s."""
        ...

    def lost(self, done: set[int]) -> dict[int, dict[str, Any]]:
        """Workers not in `done` that are gone without saying so: worker -> how it ended."""
        ...

    def go(self, at: float) -> None:
        """Release every worker at `at` on the coordinator's clock (time.perf_counter)."""
        ...

    def stop(self) -> None: ...

    def close(self) -> None:
        """Synchronous on purpose: it runs in a `finally`, where a cancelled task's await would skip it."""
        ...

    def describe(self, worker: int) -> dict[str, Any]:
        """The manifest's facts about where worker ran and how its clock relates to the coordinator's."""
        ...


class ProcessPool:
    """Spawned processes on this host: one CLOCK_MONOTONIC for all, so the start time needs no translation."""

    start_margin_s = START_MARGIN_S

    def __init__(
        self, plans: Sequence[WorkerPlan], endpoint: EndpointConfig, sampling: RequestSampling, tokenizer: str | None
    ):
        ctx = multiprocessing.get_context("spawn")
        self.out, self.stop_event = ctx.Queue(), ctx.Event()
        self.gos = {p.worker: ctx.Queue() for p in plans}
        ep = endpoint_fields(endpoint)
        self.procs = {
            p.worker: ctx.Process(
                target=worker_main,
                daemon=True,
                args=(p, ep, sampling, tokenizer, self.out, self.gos[p.worker], self.stop_event),
            )
            for p in plans
        }
        for pr in self.procs.values():
            pr.start()

    async def messages(self) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(drain, self.out, 0.1)

    def lost(self, done: set[int]) -> dict[int, dict[str, Any]]:
        return {
            w: {"interrupted": True, "crashed": True, "exitcode": pr.exitcode}
            for w, pr in self.procs.items()
            if w not in done and not pr.is_alive() and self.out.empty()
        }

    def go(self, at: float) -> None:
        for g in self.gos.values():
            g.put(at)

    def stop(self) -> None:
        self.stop_event.set()

    def close(self) -> None:
        self.stop_event.set()
        for pr in self.procs.values():
            pr.join(timeout=10)
            if pr.is_alive():
                pr.kill()

    def describe(self, worker: int) -> dict[str, Any]:
        return {"host": "local", "pid": self.procs[worker].pid, "clock": SAME_CLOCK.to_dict()}


def endpoint_fields(endpoint: EndpointConfig) -> dict[str, Any]:
    """The endpoint as plain fields for another process (asdict deep-copies, and the extra body's read-only mapping
    does not pickle)."""
    ep = {f.name: getattr(endpoint, f.name) for f in dataclasses.fields(endpoint)}
    ep["extra_body"] = dict(endpoint.extra_body)
    return ep


async def run_workers(
    plans: Sequence[WorkerPlan],
    endpoint: EndpointConfig,
    sampling: RequestSampling,
    *,
    tokenizer: str | None,
    on_record: Callable[[RequestRecord], None],
    on_progress: Callable[[Progress], None] | None = None,
    stop: asyncio.Event | None = None,
    on_measure_start: Callable[[], Any] | None = None,
    ray: str | None = None,
) -> WorkersOutcome:
    """Run one worker per plan to the end (or the stop) and hand every record to `on_record`: spawned processes on
    this machine, or, with `ray` (a cluster address, "auto" or "local"), Ray actors spread over the cluster."""
    pool = await _start_pool(plans, endpoint, sampling, tokenizer, stop, ray)
    if pool is None:  # stopped before any worker ran
        now = time.perf_counter()
        return WorkersOutcome(LoadOutcome(now, now, True, 0, 0), ())
    try:
        done = await _coordinate(pool, plans, on_record, on_progress, stop, on_measure_start)
    finally:
        pool.close()
    ws = [done.get(p.worker, {}) for p in plans]
    return WorkersOutcome(_combined_outcome(ws), _worker_reports(pool, plans, ws))


async def _start_pool(
    plans: Sequence[WorkerPlan],
    endpoint: EndpointConfig,
    sampling: RequestSampling,
    tokenizer: str | None,
    stop: asyncio.Event | None,
    ray: str | None,
) -> WorkerPool | None:
    """The workers started: Ray actors with `ray`, else spawned processes; None: stopped before any worker ran."""
    if ray is not None:
        from speculab.harness.load.ray_pool import RayPool

        return await RayPool.start(ray, plans, endpoint, sampling, tokenizer, stop)
    return ProcessPool(plans, endpoint, sampling, tokenizer)


async def _coordinate(
    pool: WorkerPool,
    plans: Sequence[WorkerPlan],
    on_record: Callable[[RequestRecord], None],
    on_progress: Callable[[Progress], None] | None,
    stop: asyncio.Event | None,
    on_measure_start: Callable[[], Any] | None,
) -> dict[int, dict[str, Any]]:
    """The coordinator's loop: records handed on as they come, the common start once every worker is warm, until
    every worker is done (or gone). Returns worker -> how it ended."""
    ready: set[int] = set()
    done: dict[int, dict[str, Any]] = {}
    caps = [p.load.num_prompts for p in plans]
    total = None if None in caps else sum(caps)  # type: ignore[arg-type]  # None: until the duration
    counts = {"finished": 0, "ok": 0, "error": 0}
    t0 = time.perf_counter()
    started = False

    def handle(msg: tuple[Any, ...]) -> None:
        if msg[0] == "rec":
            rec = RequestRecord.from_dict(msg[1])
            on_record(rec)
            if not rec.warmup and not rec.cancelled:  # cancelled: neither sent nor failed (as `runner` counts)
                counts["finished"] += 1
                counts["ok" if rec.ok else "error"] += 1
                if on_progress is not None:
                    on_progress(
                        Progress(
                            counts["finished"],
                            counts["ok"],
                            counts["error"],
                            0,
                            total,
                            time.perf_counter() - t0,
                            None,
                            False,
                        )
                    )
        elif msg[0] == "ready":
            ready.add(msg[1])
        elif msg[0] == "done":
            done[msg[1]] = msg[2]

    while len(done) < len(plans):
        if stop is not None and stop.is_set():
            pool.stop()
        msgs = await pool.messages()
        if not msgs:
            done.update(pool.lost(set(done)))  # a worker that died says nothing more
            continue
        for msg in msgs:
            handle(msg)
        if not started and len(ready | set(done)) == len(plans):
            started = True
            if on_measure_start is not None:
                await on_measure_start()
            pool.go(time.perf_counter() + pool.start_margin_s)
    for msg in await pool.messages():  # records still on their way after the last "done"
        handle(msg)
    return done


def _combined_outcome(ws: Sequence[dict[str, Any]]) -> LoadOutcome:
    """The run's outcome from the workers' own: the earliest start, the latest end, the counts summed."""
    starts = [w["started_s"] for w in ws if w.get("started_s") is not None]
    ends = [w["ended_s"] for w in ws if w.get("ended_s") is not None]
    now = time.perf_counter()
    return LoadOutcome(
        started_s=min(starts) if starts else now,
        ended_s=max(ends) if ends else now,
        interrupted=any(w.get("interrupted") for w in ws),
        measured=sum(int(w.get("measured", 0)) for w in ws),
        warmup=sum(int(w.get("warmup", 0)) for w in ws),
        skipped=sum(int(w.get("skipped", 0)) for w in ws),
    )


def _worker_reports(
    pool: WorkerPool, plans: Sequence[WorkerPlan], ws: Sequence[dict[str, Any]]
) -> tuple[dict[str, Any], ...]:
    """Per worker, for the manifest: its share, its load, where it ran, how it ended."""
    info = []
    for p, w in zip(plans, ws, strict=True):
        where = pool.describe(p.worker)
        # the start offset from the common start is start_lag_s (the worker's own clock), within the clock's bound
        unc = {"start_uncertainty_s": where["clock"]["uncertainty_s"]} if w.get("start_lag_s") is not None else {}
        info.append({"worker": p.worker, "requests": len(p.items), "load": p.load.to_manifest(), **where, **w, **unc})
    return tuple(info)
