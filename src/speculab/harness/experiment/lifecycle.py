"""The shared mechanics of an A/B run: one arm at one load level, and the record of what happened.

`Lifecycle` holds the run's state (arms as observed, notes, launches, order) and knows how to offer one level's load
to one arm while sampling memory and scraping /metrics around it; launch mode and two-URL mode
(`launch_mode`, `two_url`) decide which arm runs when. Both arms see the same prompts in the same order with the same
seeds, sampling parameters and limits. Results stream to DIR in the A/B layout of `speculab.harness.results`
(requests.jsonl appended as requests finish, run.json per finished repeat, inputs.json rewritten as the run goes).
Gates and verdicts are `speculab.harness.verdict`'s (asked after each look of adaptive repeats); this records what was
asked and what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import numpy as np

from speculab.config import LoadLevel
from speculab.errors import EndpointError
from speculab.harness.analysis.sequential import look_alphas
from speculab.harness.analysis.windows import Window, by_window, send_rate_rps
from speculab.harness.client.endpoint import Clock, EndpointConfig
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import RequestFunc, request_func
from speculab.harness.design import ArmInfo, LevelSpec
from speculab.harness.experiment.plan import ArmPlan, RunPlan
from speculab.harness.experiment.resume import Resumed, plan_identity
from speculab.harness.load.arrivals import ArrivalConfig
from speculab.harness.load.client_health import ClientHealth, HealthProbe, combined_health
from speculab.harness.load.runner import LoadConfig, LoadOutcome, Progress, run_load
from speculab.harness.load.workers import plan_workers, run_workers, worker_notes
from speculab.harness.records import ColdStartTimes, RequestRecord, RequestSpec
from speculab.harness.results.ab_dir import REQUESTS_FILE, repeat_dir, write_run_meta, write_setup
from speculab.harness.results.ab_run import RepeatRun, ReportInputs
from speculab.harness.results.requests_file import RequestsFile, read_records
from speculab.harness.results.run_dir import utc_now, versions
from speculab.harness.servers.acceptance import (
    acceptance_with_reason,
)
from speculab.harness.servers.adapters import adapter_for, detect_engine
from speculab.harness.servers.liveness import EndpointWatch
from speculab.harness.servers.memory import GpuMemory, MemorySampler
from speculab.harness.servers.process import ServerProcess
from speculab.harness.servers.scrape import MetricsSnapshot, counter_deltas, scrape_metrics
from speculab.harness.verdict import looks as verdict_looks
from speculab.harness.workload.conversation import conversations, sent_as

# What the terminal shows while an experiment runs: the CLI implements `Reporter` with rich; `Silent` is for
# library use and tests.


class Reporter(Protocol):
    def phase(self, text: str) -> None:
        """A step of the lifecycle: launching, ready, stopping, ..."""

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        """`arm` starts sending at `level`; `total` requests in the level, `done` of them finished already (two-URL
        mode calls this for every block of the level, with one level_end after the last)."""

    def progress(self, p: Progress) -> None: ...

    def level_end(self) -> None: ...


class Silent:
    def phase(self, text: str) -> None:
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
    workers: list[dict[str, Any]] = field(default_factory=list)  # load.workers: each worker's report, per block

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


class Lifecycle:
    def __init__(
        self,
        plan: RunPlan,
        out: Path,
        session: aiohttp.ClientSession,
        stop: asyncio.Event,
        reporter: Reporter,
        clock: Clock,
        resumed: Resumed | None = None,
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
        # a launched server exited, or a URL arm's server went away, mid-level: the run stops on it
        self.server_died: EndpointError | None = None
        self._watches: dict[str, EndpointWatch] = {}  # URL arms: is the server still there (servers.liveness)
        self.plan_id = plan_identity(plan)  # in inputs.json, for `--resume` to check against
        self.done: frozenset[tuple[str, str, int]] = frozenset()  # (arm, level, repeat) finished before a resume
        if resumed is not None:  # the run so far, extended: its start, looks, notes, arms as observed, launches
            self.setup, self.done = resumed.setup, resumed.done
            self.notes, self.launches = list(resumed.notes), list(resumed.launches)
            self.arms = {a.name: a for a in resumed.arms}
        self.gpu = GpuMemory.open()

    def is_done(self, arm: str, level: str, repeat: int) -> bool:
        """The block finished before this run was resumed: skipped (its place in the order counts all the same)."""
        return (arm, level, repeat) in self.done

    # --- adaptive repeats -----------------------------------------------------------------------------------
    def enough(self, repeat: int) -> bool:
        """After `repeat` finished: look at the data (adaptive repeats only) and say whether to stop. Each look gets
        its own alpha from the spending function, so the design's false-positive rate stays at 5 % however many
        looks it takes (analysis.sequential); the look's result is recorded in inputs.json."""
        seq = self.setup.sequential
        if seq is None:
            return False
        alphas = look_alphas(seq["min"], seq["max"], seq["alpha"], seq["spending"], seq.get("round", 1))
        if repeat not in alphas:
            return False
        alpha = alphas[repeat]
        taken = next((lk for lk in seq.get("looks", ()) if lk.get("repeat") == repeat), None)
        if taken is not None:  # a resumed run: this look was taken before, on the same data; it stands as recorded
            return bool(taken.get("decided")) and repeat < seq["max"]
        self.write_inputs()
        done, undecided = verdict_looks.decide(self.out, alpha)  # the verdict's comparisons, this alpha
        looks = [*seq.get("looks", ()), {"repeat": repeat, "alpha": alpha, "decided": done, "undecided": undecided}]
        stop = done and repeat < seq["max"]
        self.setup = replace(
            self.setup, sequential={**seq, "looks": looks}, repeats=repeat if stop else self.setup.repeats
        )
        if stop:
            self.notes.append(
                f"adaptive repeats: every verdict was decided after repeat {repeat} of at most {seq['max']} "
                f"(alpha {alpha:.3g} at this look; analysis.sequential)"
            )
            self.reporter.phase(f"every verdict decided after repeat {repeat}: stopping (at most {seq['max']})")
        elif repeat < seq["max"]:
            self.reporter.phase(f"after repeat {repeat}: still open: {', '.join(undecided[:3])}")
        self.write_inputs()
        return stop

    # --- inputs.json ----------------------------------------------------------------------------------------
    def write_inputs(self, *, final: bool = False) -> None:
        setup = replace(self.setup, finished_utc=utc_now()) if final else self.setup
        inputs = ReportInputs(
            setup=setup,
            arms=tuple(self.arms[a.info.name] for a in self.plan.arms),
            changes=self.plan.changes,
            interrupted=self.interrupted,
            notes=tuple(self.notes),
            plan=self.plan_id,
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
        return request_func(self.endpoint(arm, model), self.plan.sampling, clock=self.clock)

    def endpoint(self, arm: ArmPlan, model: str) -> EndpointConfig:
        return EndpointConfig(
            base_url=arm.info.url,
            model=model,
            api=self.plan.api,  # type: ignore[arg-type]
            api_key=arm.api_key,
            timeout_s=self.plan.request_timeout_s,
            extra_body=dict(self.plan.extra_body),
            logprobs=self.plan.logprobs,
            keep_alive=adapter_for(self.arms[arm.info.name].engine).keep_alive,
        )

    def endpoint_watch(self, arm: ArmPlan) -> EndpointWatch:
        """One watch per URL arm for the whole run: a run of refused connections may span blocks and levels."""
        if arm.info.name not in self._watches:
            headers = EndpointConfig(base_url=arm.info.url, model="", api_key=arm.api_key).headers()
            self._watches[arm.info.name] = EndpointWatch(self.session, arm.info.url, headers, clock=self.clock)
        return self._watches[arm.info.name]

    def block_seed(self, block: int) -> int:
        """The arrival schedule's seed for a level's block number `block`, the same for every arm: the run's seed for
        the first (launch mode's only block), and one derived from it for each later block. One seed for every block
        would replay the schedule's first gaps in each (blocks of 2 at 1 req/s: the same two-request burst, again
        and again, instead of a Poisson process at 1 req/s)."""
        if block == 0:
            return self.setup.seed
        return int(np.random.SeedSequence([self.setup.seed, block]).generate_state(1)[0])

    def load_config(self, lv: LoadLevel, n: int, warmup: int, block: int = 0) -> LoadConfig:
        if lv.concurrency is not None:
            return LoadConfig(
                concurrency=lv.concurrency, num_prompts=n, warmup=warmup, seed=self.setup.seed, ramp_up_s=lv.ramp_up_s
            )
        if lv.trace_speed is not None:
            return LoadConfig(
                concurrency=lv.max_concurrency, num_prompts=n, warmup=warmup, seed=self.setup.seed,
                trace_speed=lv.trace_speed,
            )  # fmt: skip
        assert lv.rate_rps is not None
        arrival = ArrivalConfig(lv.rate_rps, lv.arrival, lv.burstiness)  # type: ignore[arg-type]
        return LoadConfig(
            concurrency=lv.max_concurrency, arrival=arrival, num_prompts=n, warmup=warmup, seed=self.block_seed(block)
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
            b = _Block(arm, model, request, server, level_i, block, warmup if first else 0, first_block + bi,
                       scrape_before and first)  # fmt: skip
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
        )
        probe = HealthProbe(clock=self.clock)

        async def measure_start() -> None:
            if b.scrape_before:
                seen.before = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
            sampler.start()
            probe.start()

        # A server that goes away mid-level would turn every remaining request into a connection error (a run of
        # failures that measures nothing): stop the level at once instead, and say so. A launched server's exit is
        # seen by watching its process; a URL arm's server by what its requests see (servers.liveness).
        watch = self.endpoint_watch(arm) if server is None else None
        died = watch.gone if watch is not None else asyncio.Event()
        outcome, block_workers = await self._offer_block(b, watch, died, seen, measure_start)
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
        if died.is_set() and not self.stop.is_set():
            # recorded like an interruption (the level's partial repeat is kept), raised once it is saved
            self.server_died = self._gone_error(arm, server, watch, b.level_i, repeat)
            return True
        return outcome.interrupted

    async def _offer_block(
        self,
        b: _Block,
        watch: EndpointWatch | None,
        died: asyncio.Event,
        seen: Observed,
        measure_start: Callable[[], Awaitable[None]],
    ) -> tuple[LoadOutcome, tuple[dict[str, Any], ...]]:
        """The block's load, in this process or over client workers, stopped when the run stops or the server dies:
        (the load's outcome, the workers' reports)."""
        lv = self.plan.loads[b.level_i]
        tasks = [asyncio.create_task(b.server.watch(died))] if b.server is not None else []
        level_stop = asyncio.Event()
        tasks.append(asyncio.create_task(_set_when(level_stop, self.stop, died)))

        def on_record(rec: RequestRecord) -> None:
            seen.sink.append(rec)
            if watch is not None:
                watch.see(rec)

        block_workers: tuple[dict[str, Any], ...] = ()
        try:
            load = self.load_config(lv, len(b.items), b.warmup, b.number)
            # load.workers: the block's share per client process, one start barrier (a two-URL block shorter than
            # the workers runs on as many as it has conversations)
            n_workers = min(lv.workers, sum(1 for _ in conversations(b.items)))
            if n_workers > 1 or lv.ray is not None:
                done = await run_workers(
                    plan_workers(b.items, load, n_workers), self.endpoint(b.arm, b.model), self.plan.sampling,
                    tokenizer=None, on_record=on_record, on_progress=self.reporter.progress, stop=level_stop,
                    on_measure_start=measure_start, ray=lv.ray,
                )  # fmt: skip
                outcome, block_workers = done.outcome, done.workers
                seen.workers.extend(block_workers)
            else:
                outcome = await run_load(
                    b.items,
                    _BlockRequest(b.request, b.items, self.setup.items, watch.admit if watch is not None else None),
                    self.session,
                    load,
                    on_record=on_record,
                    on_progress=self.reporter.progress,
                    stop=level_stop,
                    clock=self.clock,
                    on_measure_start=measure_start,
                )
            if watch is not None and not self.stop.is_set():
                await watch.settle()  # a check the block's last requests started: is the server there?
        finally:
            for t in tasks:
                t.cancel()
            if watch is not None:
                watch.cancel()
        return outcome, block_workers

    def _gone_error(
        self, arm: ArmPlan, server: ServerProcess | None, watch: EndpointWatch | None, level_i: int, repeat: int
    ) -> EndpointError:
        spec = self.setup.levels[level_i]
        when = f"during level {spec.label}, repeat {repeat}"
        saved = f"what finished is in {self.out}; once it is back, `speculab run --resume {self.out}` finishes the run"
        if server is not None:
            return server.died_error(f"{when}; {saved}")
        role = "baseline" if arm.info.is_baseline else f"candidate {arm.info.name}"
        evidence = watch.evidence if watch is not None else "it stopped answering"
        return EndpointError(f"{role} endpoint {arm.info.url} stopped answering {when} ({evidence}); {saved}")

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
        seen = Observed.open(self.out, arm.info.name, spec.key, repeat)
        t0 = self.clock()
        try:
            interrupted = await self.run_blocks(arm, model, level_i, blocks, repeat, warmup, server, t0, seen)
        finally:
            seen.sink.close()
            self.reporter.level_end()
        after = await scrape_metrics(self.session, arm.info.url, api_key=arm.api_key)
        return self.repeat_run(arm, spec, repeat, seen, after, interrupted)

    def repeat_run(
        self,
        arm: ArmPlan,
        spec: LevelSpec,
        repeat: int,
        seen: Observed,
        after: MetricsSnapshot | None,
        interrupted: bool,
    ) -> RepeatRun:
        adapter = adapter_for(self.arms[arm.info.name].engine)
        before, records = seen.before, seen.sink.records
        notes: list[str] = []
        if before is None or after is None:
            notes.append("no Prometheus /metrics read around this level: no server-side counters")
        if spec.open_loop:
            achieved = send_rate_rps(by_window(records, seen.windows))  # over this arm's own blocks
            if achieved is not None:
                asked = f"requested {spec.value:g}" if spec.kind == "rate" else f"the trace at ×{spec.value:g}"
                notes.append(f"sent {achieved:.3g} req/s ({asked})")
        scopes = {scope for _, scope in seen.memory if scope}
        acceptance, why = acceptance_with_reason(adapter, before, after, records, arm.k)
        if acceptance is None and why:  # e.g. a counter that went backwards: the server restarted mid-level
            notes.append(f"acceptance unknown: {why}")
        run = RepeatRun(
            arm=arm.info.name,
            level=spec.key,
            repeat=repeat,
            acceptance=acceptance,
            memory=tuple(s for samples, _ in seen.memory for s in samples),
            gpu_scope="device" if "device" in scopes else ("process" if scopes else ""),
            order=self.order,
            interrupted=interrupted,
            counter_deltas=_moved_counters(before, after),
            notes=tuple([*notes, *worker_notes(seen.workers)]),
            windows_s=tuple(seen.windows),
            client=combined_health(seen.health),
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
