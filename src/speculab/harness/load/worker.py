"""One client worker: the entry point a spawned process (load.pools) or a Ray actor (load.ray_pool) runs over its
share, and the plain messages between it and the coordinator (the endpoint out, records and "ready"/"done" back)."""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import time
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.client_health import HealthProbe
from speculab.harness.load.runner import run_load
from speculab.harness.load.worker_plan import WorkerPlan, repeat_of
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.workload.conversation import sent_as
from speculab.serving.pacing import SEND_SPIN_S, sleep_until
from speculab.serving.receive_stamps import run_stamping


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
    # the loop reads the kernel's receive stamps, as the coordinator's own (load.interrupt) does
    run_stamping(_worker(plan, endpoint, sampling, tokenizer, out, go, stop))


async def _worker(
    plan: WorkerPlan,
    endpoint: dict[str, Any],
    sampling: RequestSampling,
    tokenizer: str | None,
    out: Any,
    go: Any,
    stop_event: Any,
) -> None:
    from speculab.harness.client.request import make_session, open_connections, request_func

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
                open_connections=partial(open_connections, session, ep.url),
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
            item = repeat_of(item, spec.index // n, self.total or n)
        return await self.inner(session, item, scheduled_s=scheduled_s, warmup=warmup)


def drain(q: Any, wait_s: float) -> list[Any]:
    """Everything in queue `q` now, waiting up to `wait_s` for the first item: how a pool collects its workers'
    messages in batches (a process queue in load.pools, an actor's buffer in load.ray_pool)."""
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


def endpoint_fields(endpoint: EndpointConfig) -> dict[str, Any]:
    """The endpoint as plain fields for another process (asdict deep-copies, and the extra body's read-only mapping
    does not pickle)."""
    ep = {f.name: getattr(endpoint, f.name) for f in dataclasses.fields(endpoint)}
    ep["extra_body"] = dict(endpoint.extra_body)
    return ep
