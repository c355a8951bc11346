"""The coordinator of load from several client processes (`speculab bench --workers N`): past what one event loop
can time (load.client_health says when), N processes each run the same runner and client over their share
(load.worker), planned by load.worker_plan, started by a pool (load.pools, load.ray_pool); and what the workers'
reports say, as warning records (the report words them).

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.pools import ProcessPool, WorkerPool
from speculab.harness.load.runner import LoadOutcome, Progress
from speculab.harness.load.worker_plan import WorkerPlan
from speculab.harness.records import RequestRecord
from speculab.harness.results.warnings import ReportWarning, WarningKind

START_LAG_WARN_S = 0.001  # a worker that started later than this after the common start is named in the warnings

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


def worker_warnings(workers: Sequence[dict[str, Any]]) -> list[ReportWarning]:
    """What the workers' own reports say a reader must know: one that crashed, or started late."""
    out = []
    for w in workers:
        if w.get("crashed"):
            ray = bool(w.get("ray"))
            where = {"host": w.get("host") if ray else None, "node_ip": w.get("node_ip") if ray else None}
            fields = {"worker": w["worker"], **where, "error": str(w.get("error") or ""), "exitcode": w.get("exitcode")}
            out.append(ReportWarning(WarningKind.WORKER_LOST, fields=fields))
        lag, unc = w.get("start_lag_s"), w.get("start_uncertainty_s") or 0.0
        if lag is not None and lag + unc > START_LAG_WARN_S:
            fields = {"worker": w["worker"], "start_lag_s": lag, "uncertainty_s": unc}
            out.append(ReportWarning(WarningKind.WORKER_LATE, fields=fields))
    return out


def worker_notes(workers: Sequence[dict[str, Any]]) -> list[ReportWarning]:
    """For an A/B repeat: how many client processes ran it, and what `worker_warnings` says about them."""
    if not workers:
        return []
    lags = [w["start_lag_s"] for w in workers if w.get("start_lag_s") is not None]
    ray = any(w.get("ray") for w in workers)
    fields = {
        "workers": len({w["worker"] for w in workers}),
        "ray_nodes": len({w.get("node_ip") for w in workers}) if ray else None,
        "clock_uncertainty_s": max((w.get("clock") or {}).get("uncertainty_s") or 0.0 for w in workers) if ray else 0.0,
        "max_start_lag_s": max(lags) if lags else None,
    }
    return [ReportWarning(WarningKind.WORKERS_RAN, fields=fields), *worker_warnings(workers)]


@dataclass(frozen=True, slots=True)
class WorkersOutcome:
    outcome: LoadOutcome
    workers: tuple[dict[str, Any], ...]  # per worker: items, load, start lag, clock, client health, how it ended


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
