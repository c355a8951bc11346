"""The shared mechanics of an A/B run: one arm at one load level, and the record of what happened.

`Lifecycle` holds the run's state (arms as observed, notes, launches, order) and knows how to offer one level's load
to one arm while sampling memory and scraping /metrics around it; launch mode and two-URL mode
(`launch_mode`, `two_url`) decide which arm runs when. Both arms see the same prompts in the same order with the same
seeds, sampling parameters and limits. Results stream to DIR in the A/B layout of `speculab.harness.results`
(requests.jsonl appended as requests finish, run.json per finished repeat, inputs.json rewritten as the run goes).
Gates and verdicts are the report's job; this records what was asked and what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp

from speculab.config import LoadLevel
from speculab.errors import EndpointError
from speculab.harness.client.endpoint import Clock, EndpointConfig
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import RequestFunc, request_func
from speculab.harness.experiment.plan import ArmPlan, RunPlan
from speculab.harness.experiment.progress import Reporter
from speculab.harness.load.arrivals import ArrivalConfig
from speculab.harness.load.runner import LoadConfig, run_load
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.results.ab_dir import REQUESTS_FILE, repeat_dir, write_run_meta, write_setup
from speculab.harness.results.ab_inputs import ArmInfo, ColdStartTimes, LevelSpec, RepeatRun, ReportInputs
from speculab.harness.results.requests_file import RequestsFile
from speculab.harness.results.run_dir import utc_now, versions
from speculab.harness.servers.acceptance import (
    acceptance_between,
)
from speculab.harness.servers.adapters import adapter_for, detect_engine
from speculab.harness.servers.memory import GpuMemory, MemorySampler
from speculab.harness.servers.process import ServerProcess
from speculab.harness.servers.scrape import MetricsSnapshot, counter_deltas, scrape_metrics


def _moved_counters(before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> dict[str, float]:
    """Every counter that moved during the level, for the record (resets left out: no delta to give)."""
    if before is None or after is None:
        return {}
    return {k: v for k, v in counter_deltas(before, after).items() if v is not None}


async def _set_when(target: asyncio.Event, *sources: asyncio.Event) -> None:
    """Set `target` as soon as any of `sources` is set (run as a task; cancel it when done)."""
    waits = [asyncio.create_task(e.wait()) for e in sources]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        target.set()
    finally:
        for w in waits:
            w.cancel()


class _RecordSink:
    """One repeat's requests.jsonl, appended and flushed as each request finishes, and the records in order."""

    def __init__(self, path: Path):
        self._file = RequestsFile(path)
        self.records: list[RequestRecord] = []

    def append(self, rec: RequestRecord) -> None:
        self._file.append(rec)
        self.records.append(rec)

    def close(self) -> None:
        self._file.close()


@dataclass(frozen=True, slots=True)
class _BlockRequest:
    """The runner renumbers the items it is given 0..n-1; a block keeps the workload's indices (pairing keys)."""

    inner: RequestFunc
    block: tuple[RequestSpec, ...]

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        return await self.inner(session, self.block[spec.index], scheduled_s=scheduled_s, warmup=warmup)


class Lifecycle:
    def __init__(
        self,
        plan: RunPlan,
        out: Path,
        session: aiohttp.ClientSession,
        stop: asyncio.Event,
        reporter: Reporter,
        clock: Clock,
    ):
        self.plan, self.out, self.session, self.stop, self.reporter, self.clock = (
            plan,
            out,
            session,
            stop,
            reporter,
            clock,
        )
        self.arms: dict[str, ArmInfo] = {a.info.name: a.info for a in plan.arms}
        self.setup = replace(plan.setup, started_utc=utc_now(), versions=versions())
        self.notes: list[str] = []
        self.launches: list[dict[str, Any]] = []
        self.order = 0
        self.finished_runs = 0
        self.interrupted = False
        self.server_died: EndpointError | None = None  # a launched server exited mid-level: the run stops on it
        self.gpu = GpuMemory.open()

    # --- inputs.json ----------------------------------------------------------------------------------------
    def write_inputs(self, *, final: bool = False) -> None:
        setup = replace(self.setup, finished_utc=utc_now()) if final else self.setup
        inputs = ReportInputs(
            setup=setup,
            arms=tuple(self.arms[a.info.name] for a in self.plan.arms),
            changes=self.plan.changes,
            interrupted=self.interrupted,
            notes=tuple(self.notes),
        )
        write_setup(self.out, inputs)

    def note_server(self, arm: ArmPlan, info: ServerInfo, metric_names: set[str], cold: ColdStartTimes | None) -> None:
        version = (
            info.version if isinstance(info.version, Mapping) else ({"raw": info.version} if info.version else None)
        )
        detected = detect_engine(version, {"data": list(info.model_cards)}, metric_names)
        server_info = {"version": info.version, "models": list(info.model_cards), "detected_engine": detected}
        cur = self.arms[arm.info.name]
        self.arms[arm.info.name] = replace(
            cur,
            server_info=cur.server_info or server_info,
            cold_start=cur.cold_start or cold,
            engine=cur.engine if cur.engine != "other" or arm.launch is not None else detected,
        )
        self.write_inputs()

    # --- one arm at one level ---------------------------------------------------------------------------------
    def request(self, arm: ArmPlan, model: str) -> RequestFunc:
        ep = EndpointConfig(
            base_url=arm.info.url,
            model=model,
            api=self.plan.api,  # type: ignore[arg-type]
            api_key=arm.api_key,
            timeout_s=self.plan.request_timeout_s,
            extra_body=dict(self.plan.extra_body),
            logprobs=self.plan.logprobs,
            keep_alive=adapter_for(self.arms[arm.info.name].engine).keep_alive,
        )
        return request_func(ep, self.plan.sampling, clock=self.clock)

    def load_config(self, lv: LoadLevel, n: int, warmup: int) -> LoadConfig:
        if lv.concurrency is not None:
            return LoadConfig(
                concurrency=lv.concurrency, num_prompts=n, warmup=warmup, seed=self.setup.seed, ramp_up_s=lv.ramp_up_s
            )
        assert lv.rate_rps is not None
        arrival = ArrivalConfig(lv.rate_rps, lv.arrival, lv.burstiness)  # type: ignore[arg-type]
        return LoadConfig(
            concurrency=lv.max_concurrency, arrival=arrival, num_prompts=n, warmup=warmup, seed=self.setup.seed
        )

    async def run_blocks(
        self,
        arm: ArmPlan,
        model: str,
        level_i: int,
        blocks: Sequence[tuple[RequestSpec, ...]],
        repeat: int,
        warmup: int,
        server: ServerProcess | None,
        t0_s: float,
        sink: _RecordSink,
        memory: list[Any],
        before: list[MetricsSnapshot | None] | None = None,
    ) -> bool:
        """Offer the level's load over the given blocks of items; returns True when interrupted.
        `before`, when given, receives the /metrics scrape taken after warmup, just before the first measured
        request (so warmup traffic never counts in the level's counter deltas)."""
        lv = self.plan.loads[level_i]
        request = self.request(arm, model)
        for bi, block in enumerate(blocks):
            sampler = MemorySampler(
                self.session,
                arm.info.url,
                rss=server.rss_bytes if server is not None else None,
                pids=server.pids if server is not None else None,
                gpu=self.gpu,
                interval_s=self.plan.memory_interval_s,
                t0_s=t0_s,
                clock=self.clock,
                api_key=arm.api_key,
            )

            async def measure_start(s: MemorySampler = sampler, first: bool = bi == 0) -> None:
                if first and before is not None:
                    before[0] = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
                s.start()

            # A launched server that exits mid-level would turn every remaining request into a connection error
            # (a run of failures that measures nothing): stop the level at once instead, and say so.
            died = asyncio.Event()
            watchers = [asyncio.create_task(server.watch(died))] if server is not None else []
            level_stop = self.stop
            if watchers:
                level_stop = asyncio.Event()
                watchers += [asyncio.create_task(_set_when(level_stop, self.stop, died))]
            try:
                outcome = await run_load(
                    block,
                    _BlockRequest(request, block),
                    self.session,
                    self.load_config(lv, len(block), warmup if bi == 0 else 0),
                    on_record=sink.append,
                    on_progress=self.reporter.progress,
                    stop=level_stop,
                    clock=self.clock,
                    on_measure_start=measure_start,
                )
            finally:
                for w in watchers:
                    w.cancel()
            samples = await sampler.stop()
            memory.append((samples, sampler.gpu_scope))
            if died.is_set() and server is not None and not self.stop.is_set():
                # recorded like an interruption (the level's partial repeat is kept), raised once it is saved
                spec = self.setup.levels[level_i]
                self.server_died = server.died_error(
                    f"during level {spec.label}, repeat {repeat}; what finished is in {self.out} "
                    f"(`speculab report {self.out}` renders it)"
                )
                return True
            if outcome.interrupted:
                return True
        return False

    async def level(
        self,
        arm: ArmPlan,
        model: str,
        level_i: int,
        repeat: int,
        *,
        warmup: int,
        server: ServerProcess | None,
        blocks: Sequence[tuple[RequestSpec, ...]] | None = None,
    ) -> RepeatRun:
        spec = self.setup.levels[level_i]
        items = self.setup.items
        blocks = blocks if blocks is not None else [items]
        self.reporter.level_start(arm.info.label, spec.label, repeat, sum(len(b) for b in blocks))
        sink = _RecordSink(repeat_dir(self.out, arm.info.name, spec.key, repeat) / REQUESTS_FILE)
        memory: list[Any] = []
        t0 = self.clock()
        before: list[MetricsSnapshot | None] = [None]
        try:
            interrupted = await self.run_blocks(
                arm, model, level_i, blocks, repeat, warmup, server, t0, sink, memory, before
            )
        finally:
            sink.close()
            self.reporter.level_end()
        after = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
        return self.repeat_run(arm, spec, repeat, sink.records, before[0], after, memory, interrupted)

    def repeat_run(
        self,
        arm: ArmPlan,
        spec: LevelSpec,
        repeat: int,
        records: Sequence[RequestRecord],
        before: MetricsSnapshot | None,
        after: MetricsSnapshot | None,
        memory: Sequence[tuple[Sequence[Any], str]],
        interrupted: bool,
    ) -> RepeatRun:
        adapter = adapter_for(self.arms[arm.info.name].engine)
        notes: list[str] = []
        if before is None or after is None:
            notes.append("no Prometheus /metrics read around this level: no server-side counters")
        measured = [r for r in records if not r.warmup]
        if spec.kind == "rate" and measured:
            first = min(r.scheduled_s for r in measured)
            last = max(r.sent_s for r in measured)
            if len(measured) > 1 and last > first:
                achieved = (len(measured) - 1) / (last - first)
                notes.append(f"sent {achieved:.3g} req/s (requested {spec.value:g})")
        scopes = {scope for _, scope in memory if scope}
        run = RepeatRun(
            arm=arm.info.name,
            level=spec.key,
            repeat=repeat,
            acceptance=acceptance_between(adapter, before, after, records, arm.k),
            memory=tuple(s for samples, _ in memory for s in samples),
            gpu_scope="device" if "device" in scopes else ("process" if scopes else ""),
            order=self.order,
            interrupted=interrupted,
            counter_deltas=_moved_counters(before, after),
            notes=tuple(notes),
        )
        self.order += 1
        write_run_meta(self.out, run)
        if not interrupted:
            self.finished_runs += 1
        return run

    async def probe(self, arm: ArmPlan) -> tuple[str, ServerInfo, set[str]]:
        ep = EndpointConfig(base_url=arm.info.url, model=arm.model or "", api_key=arm.api_key)
        info = await probe_endpoint(self.session, ep)
        model = choose_model(arm.model, info, arm.info.url)
        snap = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
        return model, info, snap.names() if snap is not None else set()
