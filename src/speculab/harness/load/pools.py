"""Where the workers run: the `WorkerPool` face the coordinator drives, and `ProcessPool`, spawned processes on this
host (the Ray actors are load.ray_pool)."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from typing import Any, Protocol

from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.clock_sync import SAME_CLOCK
from speculab.harness.load.worker import drain, endpoint_fields, worker_main
from speculab.harness.load.worker_plan import WorkerPlan

START_MARGIN_S = 0.2  # the start time is this far after the last worker said it was warm


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
