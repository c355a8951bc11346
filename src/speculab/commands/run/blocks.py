"""The block runner: one arm's load at one level, offered block by block, with memory sampled and /metrics scraped
around it, records streamed to the run's requests.jsonl and each repeat's run.json written when it ends.

It knows the plan it sends by (loads, sampling, limits: `plan`, fitted before the first request), not which arm runs
when (the modes decide: `modes`) nor what the run records in inputs.json (`lifecycle`). Both arms see the same prompts
in the same order with the same seeds, sampling parameters and limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import numpy as np

from speculab.commands.run.plan import ArmPlan, RunPlan
from speculab.commands.run.resets import BlockResets
from speculab.config import LoadLevel
from speculab.errors import EndpointError
from speculab.harness.analysis.windows import Window, by_window, send_rate_rps
from speculab.harness.client.endpoint import Clock, EndpointConfig
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import RequestFunc, open_connections, request_func
from speculab.harness.design import LevelSpec, stream_unary_sample
from speculab.harness.load.arrivals import ArrivalConfig
from speculab.harness.load.client_health import ClientHealth, HealthProbe, combined_health
from speculab.harness.load.coordinator import run_workers, worker_notes
from speculab.harness.load.runner import LoadConfig, LoadOutcome, Progress, run_load
from speculab.harness.load.worker_plan import plan_workers
from speculab.harness.records import FORCED, CacheResetOutcome, RequestRecord, RequestSpec
from speculab.harness.results.ab_dir import REQUESTS_FILE, repeat_dir, unary_file, write_run_meta
from speculab.harness.results.ab_run import RepeatRun
from speculab.harness.results.requests_file import RequestsFile, read_records, write_records
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.acceptance import acceptance_with_reason
from speculab.harness.servers.adapters import adapter_for, response_reader
from speculab.harness.servers.liveness import EndpointWatch, ExitWatch, set_when
from speculab.harness.servers.memory import GpuMemory, MemorySampler
from speculab.harness.servers.process import ServerProcess
from speculab.harness.servers.scrape import MetricsSnapshot, counter_deltas, scrape_metrics
from speculab.harness.workload.conversation import conversations, sent_as

# What the terminal shows while an experiment runs: the CLI implements `Reporter` with rich; `Silent` is for
# library use and tests.


class Reporter(Protocol):
    def phase(self, text: str | ReportWarning) -> None:
        """A step of the lifecycle: launching, ready, stopping, ...; or a record the reporter words (a look's
        comparisons still open)."""

    def warn(self, warning: ReportWarning) -> None:
        """A warning the reader should see as it happens (also kept in the run's notes); the report words it."""

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        """`arm` starts sending at `level`; `total` requests in the level, `done` of them finished already (two-URL
        mode calls this for every block of the level, with one level_end after the last)."""

    def progress(self, p: Progress) -> None: ...

    def level_end(self) -> None: ...


class Silent:
    def phase(self, text: str | ReportWarning) -> None:
        pass

    def warn(self, warning: ReportWarning) -> None:
        pass

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        pass

    def progress(self, p: Progress) -> None:
        pass

    def level_end(self) -> None:
        pass


def _moved_counters(before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> dict[str, float]:
    """Every counter that moved during the level, for the record (resets left out: no delta to give)."""
    if before is None or after is None:
        return {}
    return {k: v for k, v in counter_deltas(before, after).items() if v is not None}


def block_seed(seed: int, block: int) -> int:
    """The arrival schedule's seed for a level's block number `block`, the same for every arm: the run's seed for
    the first (launch mode's only block), and one derived from it for each later block. One seed for every block
    would replay the schedule's first gaps in each (blocks of 2 at 1 req/s: the same two-request burst, again
    and again, instead of a Poisson process at 1 req/s)."""
    if block == 0:
        return seed
    return int(np.random.SeedSequence([seed, block]).generate_state(1)[0])


def load_config(lv: LoadLevel, n: int, warmup: int, seed: int, block: int = 0) -> LoadConfig:
    """Level `lv`'s load over `n` items (after `warmup` requests), for the level's block number `block`. A phased
    load runs for its schedule's length, whatever `n` (each phase cycles the items)."""
    if lv.phases:
        arrival = None if lv.rate_rps is None else ArrivalConfig(lv.rate_rps, lv.arrival, lv.burstiness)  # type: ignore[arg-type]
        cap = lv.concurrency if lv.rate_rps is None else lv.max_concurrency
        return LoadConfig(
            concurrency=cap,
            arrival=arrival,
            warmup=warmup,
            seed=seed,
            phases=lv.phases,
            duration_s=lv.duration_s,
            transition_s=lv.transition_s,
        )
    if lv.concurrency is not None:
        return LoadConfig(concurrency=lv.concurrency, num_prompts=n, warmup=warmup, seed=seed, ramp_up_s=lv.ramp_up_s)
    if lv.trace_speed is not None:
        return LoadConfig(
            concurrency=lv.max_concurrency, num_prompts=n, warmup=warmup, seed=seed, trace_speed=lv.trace_speed
        )
    assert lv.rate_rps is not None
    arrival = ArrivalConfig(lv.rate_rps, lv.arrival, lv.burstiness)  # type: ignore[arg-type]
    return LoadConfig(
        concurrency=lv.max_concurrency, arrival=arrival, num_prompts=n, warmup=warmup, seed=block_seed(seed, block)
    )


class _RecordSink:
    """One repeat's requests.jsonl, appended and flushed as each request finishes. The records are read back from
    it once the load is over: held in memory during the load, they would grow the client with every request (and
    every full collection of the cyclic GC with them, pausing the event loop while chunks arrive)."""

    def __init__(self, path: Path):
        self._file = RequestsFile(path)

    def append(self, rec: RequestRecord) -> None:
        self._file.append(rec)

    def close(self) -> None:
        self._file.close()

    @property
    def records(self) -> list[RequestRecord]:
        """Every record appended, in order (read from the file)."""
        return read_records(self._file.path)


@dataclass(slots=True)
class Observed:
    """What one arm gathers at one level and repeat while its blocks run (one block in launch mode)."""

    sink: _RecordSink  # the records, streamed to requests.jsonl
    memory: list[tuple[Sequence[Any], str]] = field(default_factory=list)  # (samples, GPU scope) per block
    before: MetricsSnapshot | None = None  # /metrics before the first measured request (after warmup)
    windows: list[Window] = field(default_factory=list)  # each block's measured phase: start -> last end
    health: list[ClientHealth] = field(default_factory=list)  # the client over each block's measured phase
    workers: list[dict[str, Any]] = field(default_factory=list)  # load.coordinator: each worker's report, per block
    resets: list[CacheResetOutcome] = field(default_factory=list)  # the server's caches before each block

    @classmethod
    def open(cls, out: Path, arm: str, level: str, repeat: int) -> Observed:
        return cls(_RecordSink(repeat_dir(out, arm, level, repeat) / REQUESTS_FILE))


@dataclass(frozen=True, slots=True)
class _Block:
    """One block of a level's items for one arm: the unit two-URL mode interleaves (launch mode runs one)."""

    arm: ArmPlan
    model: str
    request: RequestFunc  # the arm's request function, one for all of a level's blocks
    server: ServerProcess | None  # launch mode: the arm's server process, watched while the block runs
    level_i: int
    items: tuple[RequestSpec, ...]
    warmup: int  # warmup requests before its measured phase (the level's first block only)
    number: int  # its number in the level: its arrival schedule's seed
    scrape_before: bool  # scrape /metrics just before its first measured request (the level's first block)


@dataclass(frozen=True, slots=True)
class _BlockRequest:
    """Sends the item each of the runner's request numbers stands for, with the workload's index (the pairing key).

    The runner numbers each phase's requests by position, 0..n-1, cycling the items it was given when it needs more
    (`runner.plan`). The measured phase sends each of the block's items once: position p is block[p]. Warmup sends
    `warmup_requests`, which can be more than a block holds (a two-URL block is 2 requests at concurrency 1): its
    position p is the workload's item p, cycled, so warmup sends the same prompts in both modes and never indexes
    past a block."""

    inner: RequestFunc
    block: tuple[RequestSpec, ...]
    warmup_items: tuple[RequestSpec, ...]
    admit: Callable[[], Awaitable[None]] | None = None  # awaited before each send (EndpointWatch.admit)

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        if self.admit is not None:
            await self.admit()  # a wait here is client queue time: the request records sent_s when it leaves
        items = self.warmup_items if warmup else self.block
        item = sent_as(items[spec.index % len(items)], spec)
        return await self.inner(session, item, scheduled_s=scheduled_s, warmup=warmup)


def _sent_as(b: _Block, lv: LoadLevel, items: tuple[RequestSpec, ...], watch: EndpointWatch | ExitWatch) -> RequestFunc:
    """What one block's requests send: a schedule's are its windows' own, numbered by window (load.phases), sent as
    the runner made them; any other block's positions stand for its items (`_BlockRequest`)."""
    if lv.phases:
        return b.request
    return _BlockRequest(b.request, b.items, items, watch.admit)


class BlockRunner:
    """Offers the plan's load to one arm at a time, a level's blocks in turn, and writes each repeat's run.json.

    `order` numbers the repeats in the design's order (skipped ones keep their place: `skip`); `server_died` says
    how a level stopped when its server went away (the modes raise it once what ran is saved)."""

    def __init__(
        self,
        plan: RunPlan,
        out: Path,
        session: aiohttp.ClientSession,
        stop: asyncio.Event,
        reporter: Reporter,
        clock: Clock,
        engine_of: Callable[[str], str],
        note: Callable[[ReportWarning], None] = lambda _: None,
    ):
        self.plan, self.out, self.session = plan, out, session
        self.stop, self.reporter, self.clock = stop, reporter, clock
        self.engine_of = engine_of  # an arm's engine as observed (two-URL mode detects it from the server)
        self.order = 0
        self.finished_runs = 0
        # a launched server exited, or a URL arm's server went away, mid-level: the run stops on it
        self.server_died: EndpointError | None = None
        self._watches: dict[str, EndpointWatch] = {}  # URL arms: is the server still there (servers.liveness)
        self.gpu = GpuMemory.open()
        self.resets = BlockResets(engine_of, note)  # caches emptied before each block (`cache: {reset: ...}`)

    def skip(self, repeats: int = 1) -> None:
        """Repeats that finished before a resume keep their place in the order."""
        self.order += repeats

    def request(self, arm: ArmPlan, model: str) -> RequestFunc:
        return request_func(self.endpoint(arm, model), self.plan.sampling, clock=self.clock)

    def endpoint(self, arm: ArmPlan, model: str) -> EndpointConfig:
        adapter = adapter_for(self.engine_of(arm.info.name))  # its request fields: every arm of one engine alike
        return EndpointConfig(
            base_url=arm.info.url,
            model=model,
            api=self.plan.api,  # type: ignore[arg-type]
            api_key=arm.api_key,
            timeout_s=self.plan.request_timeout_s,
            extra_body={**adapter.request_fields, **self.plan.extra_body},
            logprobs=self.plan.logprobs,
            keep_alive=adapter.keep_alive,
            read=response_reader(adapter.kind),
        )

    def endpoint_watch(self, arm: ArmPlan) -> EndpointWatch:
        """One watch per URL arm for the whole run: a run of refused connections may span blocks and levels."""
        if arm.info.name not in self._watches:
            headers = EndpointConfig(base_url=arm.info.url, model="", api_key=arm.api_key).headers()
            self._watches[arm.info.name] = EndpointWatch(self.session, arm.info.url, headers, clock=self.clock)
        return self._watches[arm.info.name]

    async def probe(self, arm: ArmPlan) -> tuple[str, ServerInfo, set[str]]:
        ep = EndpointConfig(base_url=arm.info.url, model=arm.model or "", api_key=arm.api_key)
        info = await probe_endpoint(self.session, ep)
        model = choose_model(arm.model, info, arm.info.url)
        snap = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
        return model, info, snap.names() if snap is not None else set()

    def load_config(self, lv: LoadLevel, n: int, warmup: int, block: int = 0) -> LoadConfig:
        return load_config(lv, n, warmup, self.plan.setup.seed, block)

    async def level(
        self,
        arm: ArmPlan,
        model: str,
        level_i: int,
        repeat: int,
        *,
        warmup: int,
        server: ServerProcess | None,
    ) -> RepeatRun:
        """Launch mode: the arm's whole level as one block, then its run.json."""
        spec = self.plan.setup.levels[level_i]
        items = spec.items_of(self.plan.setup.items)
        self.reporter.level_start(arm.info.label, spec.label, repeat, len(items))
        seen = Observed.open(self.out, arm.info.name, spec.key, repeat)
        t0 = self.clock()
        try:
            interrupted = await self.run_blocks(arm, model, level_i, [items], repeat, warmup, server, t0, seen)
        finally:
            seen.sink.close()
            self.reporter.level_end()
        after = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
        return self.repeat_run(arm, spec, repeat, seen, after, interrupted)

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
        seen: Observed,
        *,
        scrape_before: bool = True,
        first_block: int = 0,
    ) -> bool:
        """Offer the level's load over the given blocks of items, gathering into `seen`; True when interrupted.
        With `scrape_before`, `seen.before` is the /metrics scrape taken after warmup, just before the first
        measured request (so warmup traffic never counts in the level's counter deltas). `first_block`: the first
        block's number in the level (its arrival schedule's seed)."""
        request = self.request(arm, model)
        for bi, block in enumerate(blocks):
            first = bi == 0
            warm = warmup if first else 0
            b = _Block(arm, model, request, server, level_i, block, warm, first_block + bi, scrape_before and first)
            if await self._run_block(b, repeat, t0_s, seen):
                return True
        return False

    async def _run_block(self, b: _Block, repeat: int, t0_s: float, seen: Observed) -> bool:
        """One block with memory sampled and the client's health probed over its measured phase; True when it was
        interrupted or the server went away (then `server_died` says how)."""
        arm, server = b.arm, b.server
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
            counters=adapter_for(self.engine_of(arm.info.name)).acceptance,
        )
        probe = HealthProbe(clock=self.clock)

        async def measure_start() -> None:
            seen.resets.append(await self.resets.before(self.session, arm, b.number, self.plan.cache_reset))
            if b.scrape_before:
                seen.before = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
            if self.plan.loads[b.level_i].phases:  # a schedule's samples in seconds into it, as its requests are
                sampler.t0_s = self.clock()
            sampler.start()
            probe.start()

        # A server that goes away mid-level would turn every remaining request into a connection error (a run of
        # failures that measures nothing): stop the level at once instead, and say so. A launched server's exit is
        # seen by watching its process (its requests held back while it is on its way out); a URL arm's server by what
        # its requests see (servers.liveness).
        watch = self.endpoint_watch(arm) if server is None else ExitWatch(server)
        outcome, block_workers = await self._offer_block(b, watch, seen, measure_start)
        if probe.started:
            health = await probe.stop()
            # with workers the coordinator only waits: the workers' own health is what timed the requests
            seen.health.extend(
                [ClientHealth.from_dict(w["client"]) for w in block_workers if w.get("client")]
                if block_workers
                else [health]
            )
        samples = await sampler.stop()
        seen.memory.append((samples, sampler.gpu_scope))
        if outcome.measured:
            seen.windows.append((outcome.started_s, outcome.ended_s))
        if watch.gone.is_set() and not self.stop.is_set():
            # recorded like an interruption (the level's partial repeat is kept), raised once it is saved
            when = f"during level {self.plan.setup.levels[b.level_i].label}, repeat {repeat}"
            self.server_died = _gone_error(self.out, arm, server, watch, when)
            return True
        return outcome.interrupted

    async def _offer_block(
        self,
        b: _Block,
        watch: EndpointWatch | ExitWatch,
        seen: Observed,
        measure_start: Callable[[], Awaitable[None]],
    ) -> tuple[LoadOutcome, tuple[dict[str, Any], ...]]:
        """The block's load, in this process or over client workers, stopped when the run stops or the server dies:
        (the load's outcome, the workers' reports)."""
        lv = self.plan.loads[b.level_i]
        # the watch's `gone`: set by the server's process exiting (launch mode) or by what a URL arm's requests see
        died = watch.gone
        tasks = [asyncio.create_task(b.server.watch(died))] if b.server is not None else []
        level_stop = asyncio.Event()
        tasks.append(asyncio.create_task(set_when(level_stop, self.stop, died)))

        def on_record(rec: RequestRecord) -> None:
            seen.sink.append(rec)
            watch.see(rec)

        block_workers: tuple[dict[str, Any], ...] = ()
        try:
            load = self.load_config(lv, len(b.items), b.warmup, b.number)
            # load.coordinator: the block's share per client process, one start barrier (a two-URL block shorter than
            # the workers runs on as many as it has conversations)
            n_workers = min(lv.workers, sum(1 for _ in conversations(b.items)))
            if n_workers > 1 or lv.ray is not None:
                done = await run_workers(
                    plan_workers(b.items, load, n_workers),
                    self.endpoint(b.arm, b.model),
                    self.plan.sampling,
                    tokenizer=None,
                    on_record=on_record,
                    on_progress=self.reporter.progress,
                    stop=level_stop,
                    on_measure_start=measure_start,
                    ray=lv.ray,
                )
                outcome, block_workers = done.outcome, done.workers
                seen.workers.extend(block_workers)
            else:
                outcome = await run_load(
                    b.items,
                    _sent_as(b, lv, self.plan.setup.items, watch),
                    self.session,
                    load,
                    on_record=on_record,
                    on_progress=self.reporter.progress,
                    stop=level_stop,
                    clock=self.clock,
                    on_measure_start=measure_start,
                    open_connections=partial(open_connections, self.session, self.endpoint(b.arm, b.model).url),
                )
            if not self.stop.is_set():
                await watch.settle()  # a check the block's last requests started: is the server there?
        finally:
            for t in tasks:
                t.cancel()
            watch.cancel()
        return outcome, block_workers

    def repeat_run(
        self,
        arm: ArmPlan,
        level: LevelSpec,
        repeat: int,
        seen: Observed,
        after: MetricsSnapshot | None,
        interrupted: bool,
    ) -> RepeatRun:
        """The repeat as it ends, numbered in the design's order: its run.json."""
        run = _repeat_run(arm, level, repeat, seen, after, interrupted, self.engine_of(arm.info.name), self.order)
        self.order += 1
        write_run_meta(self.out, run)
        if not interrupted:
            self.finished_runs += 1
        return run


async def send_unary(runner: BlockRunner, arm: ArmPlan, model: str) -> None:
    """The stream against unary sample (`design.stream_unary_sample`), once per arm after its measured load: the same
    prompts sent unary at the run's sampling, as many at once as its first load has in flight, into
    runs/<arm>/unary.jsonl whole (never among its measured records). Stopped part way, nothing is written: a resumed
    run sends it again."""
    path = unary_file(runner.out, arm.info.name)
    sample = stream_unary_sample(runner.plan.setup)
    if not sample or path.is_file() or runner.stop.is_set():
        return
    runner.reporter.phase(f"{arm.info.label}: {len(sample)} prompts sent unary too (stream against unary)")
    unary = request_func(replace(runner.endpoint(arm, model), stream=False), runner.plan.sampling, clock=runner.clock)
    gate = asyncio.Semaphore(runner.plan.loads[0].concurrency or len(sample))

    async def one(spec: RequestSpec) -> RequestRecord:
        async with gate:
            return await unary(runner.session, spec, scheduled_s=runner.clock())

    records = await asyncio.gather(*(one(spec) for spec in sample))
    if not runner.stop.is_set():
        write_records(path, records)


def _repeat_run(
    arm: ArmPlan,
    level: LevelSpec,
    repeat: int,
    seen: Observed,
    after: MetricsSnapshot | None,
    interrupted: bool,
    engine: str,
    order: int,
) -> RepeatRun:
    """What one arm gathered at one level and repeat: acceptance from the counters (or the responses), memory,
    windows, the client's health, and notes for the reader."""
    before, records = seen.before, seen.sink.records
    acceptance, why = acceptance_with_reason(adapter_for(engine), before, after, records, arm.k)
    if acceptance is not None and arm.info.forced_acceptance:  # started forcing it: no measurement, said or not
        acceptance = replace(acceptance, provenance=FORCED)
    scopes = {scope for _, scope in seen.memory if scope}
    notes = _repeat_notes(level, seen, records, before, after, why if acceptance is None else None)
    return RepeatRun(
        arm=arm.info.name,
        level=level.key,
        repeat=repeat,
        acceptance=acceptance,
        memory=tuple(s for samples, _ in seen.memory for s in samples),
        gpu_scope="device" if "device" in scopes else ("process" if scopes else ""),
        order=order,
        interrupted=interrupted,
        counter_deltas=_moved_counters(before, after),
        notes=tuple([*notes, *worker_notes(seen.workers)]),
        windows_s=tuple(seen.windows),
        client=combined_health(seen.health),
        cache_resets=tuple(seen.resets),
    )


def _repeat_notes(
    level: LevelSpec,
    seen: Observed,
    records: Sequence[RequestRecord],
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    acceptance_unknown: ReportWarning | None,
) -> list[ReportWarning]:
    notes: list[ReportWarning] = []
    if before is None or after is None:
        notes.append(ReportWarning(WarningKind.NO_METRICS_READ))
    if level.open_loop:
        achieved = send_rate_rps(by_window(records, seen.windows))  # over this arm's own blocks
        if achieved is not None:
            sent = {"achieved_rps": achieved, "kind": "rate" if level.kind == "rate" else "trace", "value": level.value}
            notes.append(ReportWarning(WarningKind.SENT_RATE, fields=sent))
    if acceptance_unknown is not None:  # e.g. a counter that went backwards: the server restarted mid-level
        notes.append(ReportWarning(WarningKind.ACCEPTANCE_UNKNOWN, fields={"why": acceptance_unknown.to_dict()}))
    return notes


def _gone_error(
    out: Path, arm: ArmPlan, server: ServerProcess | None, watch: EndpointWatch | ExitWatch, when: str
) -> EndpointError:
    saved = f"what finished is in {out}; once it is back, `speculab run --resume {out}` finishes the run"
    if server is not None:
        return server.died_error(f"{when}; {saved}")
    role = "baseline" if arm.info.is_baseline else f"candidate {arm.info.name}"
    seen = watch.evidence
    evidence = seen.said() if seen is not None else "it stopped answering"
    return EndpointError(f"{role} endpoint {arm.info.url} stopped answering {when} ({evidence}); {saved}")
