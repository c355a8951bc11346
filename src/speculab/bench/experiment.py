"""The A/B lifecycle: the same workload against a baseline and one or more speculative candidates.

Launch mode (speculab starts every server): for each repeat, for each arm in ABBA order (arms reversed on every
other repeat, to cancel drift): launch the command in its own process group with logs in DIR/logs/, measure the
cold start (process start -> health 200 -> first token of a probe request), warm up, then for each load level:
scrape /metrics, offer the load through the harness runner while sampling memory, scrape again; then stop the
server (SIGTERM, then SIGKILL; always, also on Ctrl-C and errors).

Two-URL mode (both servers already running): each load level's prompts are split into blocks, and the arms take
turns block by block (A B, then B A, ...), so slow drift hits both arms alike. The single change cannot be verified;
what each server says about itself (/version, /v1/models, detected engine) is recorded with the arm.

Both arms see the same prompts in the same order with the same seeds, sampling parameters and limits. Results
stream to DIR in the layout of `speculab.report.inputs` (requests.jsonl appended as requests finish, run.json per
finished repeat, inputs.json rewritten as the run goes), so a crash or Ctrl-C leaves a run `speculab report DIR`
can render. Gates and verdicts are the report's job; this module records what was asked and what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol

import aiohttp

from speculab.bench.arrivals import ArrivalConfig
from speculab.bench.client import Clock, EndpointConfig, RequestFunc, SamplingConfig, make_session, request_func
from speculab.bench.endpoint_probe import ServerInfo, choose_model, probe_endpoint
from speculab.bench.engines import adapter_for, detect_engine, diff_for, is_single_change
from speculab.bench.engines.acceptance import (
    AcceptanceSummary,
    from_counters,
    from_llamacpp_timings,
    from_sglang_gauges,
)
from speculab.bench.engines.base import AcceptanceMetrics, EngineAdapter, refuse_if_speculating
from speculab.bench.engines.flags import is_speculation_flag
from speculab.bench.engines.vllm import counters as counter_metrics
from speculab.bench.memory import GpuMemory, MemorySampler
from speculab.bench.records import RequestRecord, RequestSpec
from speculab.bench.results import json_safe, utc_now, versions
from speculab.bench.runner import LoadConfig, Progress, run_load
from speculab.bench.scrape import MetricsSnapshot, scrape_metrics
from speculab.bench.server_process import ServerCommand, ServerProcess
from speculab.config import Experiment, LoadLevel, SpeculationConfig
from speculab.errors import EndpointError, UserError
from speculab.report.inputs import (
    BASELINE,
    INPUTS_FILE,
    REQUESTS_FILE,
    ArmInfo,
    ChangeCheck,
    ColdStart,
    LevelSpec,
    RepeatRun,
    ReportInputs,
    Setup,
    repeat_dir,
    write_run_meta,
    write_setup,
)

LAUNCHES_FILE = "launches.json"  # every launch's cold start, in order (ArmInfo keeps the first one)
LOGS_DIR = "logs"


# ---------------------------------------------------------------------------------------------------------------
# The plan: what will run, decided (and checked) before anything starts.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArmPlan:
    """One arm: its description for the report, and how to reach (or start) its server."""

    info: ArmInfo
    launch: ServerCommand | None = None  # None: a running server at info.url
    model: str | None = None  # served model name; None: the server's only model
    api_key: str | None = field(default=None, repr=False)
    k: int | None = None  # speculative tokens per step (llama.cpp per-response acceptance needs it)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything the lifecycle needs; `setup` is written to inputs.json as it is."""

    setup: Setup
    arms: tuple[ArmPlan, ...]  # the baseline first
    changes: tuple[ChangeCheck, ...]
    loads: tuple[LoadLevel, ...]  # aligned with setup.levels
    sampling: SamplingConfig
    api: str = "completions"
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # top_k, min_tokens: same for every arm
    logprobs: int | None = None  # top alternatives per token, requested from every arm (near-tie classification)
    warmup_requests: int = 4
    block_size: int | None = None  # two-URL mode: requests per block (None: 2 at concurrency 1, else 4 x it)
    memory_interval_s: float = 1.0
    stop_grace_s: float = 20.0
    request_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if len(self.loads) != len(self.setup.levels):
            raise ValueError("loads and setup.levels must be aligned")
        if not self.arms or self.arms[0].info.name != BASELINE:
            raise ValueError("the first arm must be the baseline")

    @property
    def launch_mode(self) -> bool:
        return all(a.launch is not None for a in self.arms)


def candidate_name(method: str, k: int) -> str:
    """Directory-safe arm name for a candidate: 'ngram-k4', 'draft_model-k4'."""
    return f"{method}-k{k}"


def _env_lines(base: Mapping[str, str], cand: Mapping[str, str]) -> list[str]:
    out = []
    for k in sorted(set(base) | set(cand)):
        if base.get(k) != cand.get(k):
            out.append(f"env {k}: {base.get(k, '(absent)')} -> {cand.get(k, '(absent)')}")
    return out


def derive_candidate(
    adapter: EngineAdapter,
    baseline: ServerCommand,
    spec: SpeculationConfig,
    *,
    name: str,
    command: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> tuple[ServerCommand, ChangeCheck]:
    """The candidate's server command (derived by the adapter unless given) and its single-change check.

    verified: True when only speculation flags differ; False when more differs; None when it cannot be known
    (engine `other`, whose speculation flags speculab does not know)."""
    refuse_if_speculating(adapter, baseline.command)
    cmd = tuple(command) if command is not None else tuple(adapter.candidate_command(baseline.command, spec))
    cand = replace(
        baseline,
        command=cmd,
        env=dict(env) if env is not None else dict(baseline.env),
        port=port if port is not None else baseline.port,
    )
    diff = diff_for(adapter, baseline.command, cmd)
    env_diff = _env_lines(baseline.env, cand.env)
    lines = tuple([*diff.lines(), *env_diff] if diff.differences else env_diff or diff.lines())
    if adapter.kind == "other":
        note = "engine `other`: speculab does not know its speculation flags; check the difference yourself"
        return cand, ChangeCheck(name, lines, None, note)
    verified = is_single_change(diff, adapter) and not env_diff
    if verified:
        return cand, ChangeCheck(name, lines, True)
    extra = [
        d.describe()
        for d in diff.differences
        if not is_speculation_flag(d.flag, adapter.speculation_flags, adapter.speculation_prefixes)
    ]
    note = "; ".join([*extra, *env_diff]) or "the commands are identical"
    return cand, ChangeCheck(name, lines, False, f"not speculation: {note}")


def enforce_single_change(change: ChangeCheck, allow_extra_diff: bool) -> ChangeCheck:
    """Refuse a candidate that differs in more than speculation, unless allowed (then say so in the record)."""
    if change.verified is not False:
        return change
    if not allow_extra_diff:
        if change.diff_lines == ("(the commands are identical)",):
            raise UserError(
                f"candidate {change.candidate}: its command is identical to the baseline's, so speculation would not "
                "be switched on; check the speculation block (or pass --allow-extra-diff for an A-vs-A run)"
            )
        extra = change.note.removeprefix("not speculation: ")
        raise UserError(
            f"candidate {change.candidate} differs from the baseline in more than speculation ({extra}); make the "
            "commands differ only in speculation, or pass --allow-extra-diff to run anyway"
        )
    return replace(change, note=f"{change.note}; run anyway because of --allow-extra-diff")


def _levels_and_loads(exp: Experiment) -> tuple[tuple[LevelSpec, ...], tuple[LoadLevel, ...]]:
    """Distinct levels in run order (low, operating, sweep), each with all its roles."""
    specs: dict[tuple[str, float], LevelSpec] = {}
    loads: dict[tuple[str, float], LoadLevel] = {}
    tagged = [(exp.loads.low, "low"), (exp.loads.operating, "operating"), *((lv, "sweep") for lv in exp.loads.sweep)]
    for lv, role in tagged:
        key = (lv.kind, lv.value)
        if key in specs:
            prev = specs[key]
            if role not in prev.roles:
                specs[key] = replace(prev, roles=(*prev.roles, role))
            continue
        rate = lv.kind == "rate"
        specs[key] = LevelSpec(
            lv.kind, lv.value, (role,), lv.arrival if rate else None, lv.max_concurrency if rate else None
        )
        loads[key] = lv
    return tuple(specs.values()), tuple(loads[k] for k in specs)


def _api_key(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise UserError(f"baseline.api_key_env names {env_name}, which is not set; export it or remove the key")
    return key


def plan_experiment(
    exp: Experiment,
    *,
    allow_extra_diff: bool = False,
    on_change: Callable[[ChangeCheck], None] | None = None,
) -> RunPlan:
    """Load the workload, derive the candidate, check the single change. Nothing is started or sent.

    on_change sees each candidate's command difference before any refusal, so the user sees what differs."""
    from speculab.bench.workload import load_workload

    wl = load_workload(
        exp.workload.spec, seed=exp.sampling.seed, num_prompts=exp.workload.num_prompts, api=exp.workload.api
    )
    if exp.workload.api == "completions" and any(it.prompt is None for it in wl.items):
        raise UserError(f"{exp.source}: workload.api is completions but the workload has chat messages; use chat")
    levels, loads = _levels_and_loads(exp)
    sp = exp.speculation
    key = _api_key(exp.baseline.api_key_env)
    cost = exp.cost
    cname = candidate_name(sp.method, sp.num_speculative_tokens)
    base_info = ArmInfo(
        BASELINE,
        "plain",
        usd_per_hour=cost.baseline.usd_per_hour if cost else None,
        gpus=cost.baseline.gpus if cost else 1,
    )
    cand_info = ArmInfo(
        cname,
        sp.label,
        method=sp.method,
        num_speculative_tokens=sp.num_speculative_tokens,
        usd_per_hour=cost.candidate.usd_per_hour if cost else None,
        gpus=cost.candidate.gpus if cost else 1,
    )
    c = exp.candidate
    if exp.two_url_mode:
        assert exp.baseline.url is not None and c is not None and c.url is not None
        base = ArmPlan(replace(base_info, url=exp.baseline.url), None, exp.baseline.model, key)
        cand = ArmPlan(
            replace(cand_info, url=c.url), None, c.model or exp.baseline.model, key, sp.num_speculative_tokens
        )
        change = ChangeCheck(
            cname,
            (),
            None,
            "two-URL mode: both servers were already running, so speculab could not verify that speculation is the "
            "only difference; what each server reports about itself is recorded with the arms",
        )
        if on_change is not None:
            on_change(change)
    else:
        la = exp.baseline.launch
        assert la is not None
        adapter = adapter_for(la.engine)
        base_cmd = ServerCommand(
            la.command, la.port, dict(la.env), la.host, la.health_path or adapter.health_path, la.ready_timeout_s
        )
        cand_cmd, change = derive_candidate(
            adapter,
            base_cmd,
            sp,
            name=cname,
            command=c.command if c is not None else None,
            env=c.env if c is not None else None,
            port=c.port if c is not None else None,
        )
        if on_change is not None:
            on_change(change)
        change = enforce_single_change(change, allow_extra_diff or exp.allow_extra_diff)
        engine = la.engine
        base = ArmPlan(
            replace(base_info, url=base_cmd.url, engine=engine, command=base_cmd.command),
            base_cmd,
            exp.baseline.model,
            key,
        )
        cand = ArmPlan(
            replace(cand_info, url=cand_cmd.url, engine=engine, command=cand_cmd.command),
            cand_cmd,
            (c.model if c is not None else None) or exp.baseline.model,
            key,
            sp.num_speculative_tokens,
        )
    s = exp.sampling
    setup = Setup(
        name=exp.name or Path(exp.source).stem,
        workload_name=wl.name,
        workload_source=wl.source,
        api=exp.workload.api,
        items=wl.items,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
        max_tokens=s.max_tokens,
        min_tokens=s.min_tokens,
        ignore_eos=s.ignore_eos,
        levels=levels,
        repeats=exp.repeats,
        slo_ttft_s=exp.slos.ttft_s,
        slo_tpot_s=exp.slos.tpot_s,
        slo_e2e_s=exp.slos.e2e_s,
        slo_attainment=exp.slos.attainment,
        target_rate_rps=cost.target_rate_rps if cost else None,
        checks_enabled=exp.checks,
        two_url_mode=exp.two_url_mode,
    )
    return RunPlan(
        setup=setup,
        arms=(base, cand),
        changes=(change,),
        loads=loads,
        sampling=SamplingConfig(
            max_tokens=s.max_tokens, temperature=s.temperature, top_p=s.top_p, seed=s.seed, ignore_eos=s.ignore_eos
        ),
        api=exp.workload.api,
        extra_body=sampling_extras(s.top_k, s.min_tokens),
        logprobs=s.logprobs,
        warmup_requests=exp.workload.warmup_requests,
    )


def sampling_extras(top_k: int | None, min_tokens: int | None) -> dict[str, Any]:
    """Sampling keys outside the OpenAI schema that vLLM, SGLang and speculab accept in the body."""
    out: dict[str, Any] = {}
    if top_k is not None:
        out["top_k"] = top_k
    if min_tokens is not None:
        out["min_tokens"] = min_tokens
    return out


# ---------------------------------------------------------------------------------------------------------------
# Progress: what the terminal shows (the CLI implements it with rich; tests pass None).
# ---------------------------------------------------------------------------------------------------------------


class Reporter(Protocol):
    def phase(self, text: str) -> None:
        """A step of the lifecycle: launching, ready, stopping, ..."""

    def level_start(self, arm: str, level: str, repeat: int, total: int) -> None: ...

    def progress(self, p: Progress) -> None: ...

    def level_end(self) -> None: ...


class _Silent:
    def phase(self, text: str) -> None:
        pass

    def level_start(self, arm: str, level: str, repeat: int, total: int) -> None:
        pass

    def progress(self, p: Progress) -> None:
        pass

    def level_end(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------------
# Acceptance from what the server reported.
# ---------------------------------------------------------------------------------------------------------------


def _counter_acceptance(
    kind: str, metrics: AcceptanceMetrics, before: MetricsSnapshot, after: MetricsSnapshot
) -> AcceptanceSummary | None:
    names = [metrics.drafts, metrics.draft_tokens, metrics.accepted_tokens]
    if any(n is None or after.resolve(n) is None for n in names):
        return None
    deltas: dict[str, float] = {}
    for n in names:
        a, b = after.total(n) or 0.0, before.total(n) or 0.0  # type: ignore[arg-type]
        if a < b:  # a counter reset: the server restarted between scrapes
            return None
        deltas[n] = a - b  # type: ignore[index]
    per_pos: dict[int, float] = {}
    if metrics.accepted_per_position:
        pa = after.by_label(metrics.accepted_per_position, "position")
        pb = before.by_label(metrics.accepted_per_position, "position")
        for pos, v in pa.items():
            if pos.isdigit():
                per_pos[int(pos)] = v - pb.get(pos, 0.0)
    return from_counters(kind, metrics, deltas, per_pos)


def acceptance_between(
    adapter: EngineAdapter,
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    records: Sequence[RequestRecord],
    k: int | None,
) -> AcceptanceSummary | None:
    """The adapter's acceptance source for one load level; None when the engine reported nothing.

    Counters named by the adapter first; then per-response fields (llama.cpp timings); then, for any engine,
    vLLM- or speculab-style counters if the server happens to expose them (e.g. an `other` engine built on vLLM)."""
    acc = adapter.acceptance
    measured = [r for r in records if not r.warmup]
    if before is not None and after is not None:
        if acc.kind == "counters":
            found = _counter_acceptance(adapter.kind, acc, before, after)
            if found is not None:
                return found
        if acc.kind == "gauges" and after.resolve(acc.accept_length_gauge or "") is not None:
            return from_sglang_gauges(
                after.total(acc.accept_length_gauge or ""), after.total(acc.accept_rate_gauge or "")
            )
    if adapter.kind == "llamacpp":
        timings = [r.extra["timings"] for r in measured if isinstance(r.extra.get("timings"), dict)]
        if any("draft_n" in t for t in timings):
            return from_llamacpp_timings(timings, k)
    if before is not None and after is not None:
        for prefix in ("vllm", "speculab"):
            found = _counter_acceptance(prefix, counter_metrics(prefix), before, after)
            if found is not None:
                return found
    return None


def counter_deltas(before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> dict[str, float]:
    """Every counter that moved during the level (after - before, summed over labels), for the record."""
    if before is None or after is None:
        return {}
    out: dict[str, float] = {}
    for name in sorted({s.name for s in after.samples if s.name.endswith("_total")}):
        a, b = after.total(name) or 0.0, before.total(name) or 0.0
        if a != b:
            out[name] = a - b
    return out


# ---------------------------------------------------------------------------------------------------------------
# Running.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunOutcome:
    out_dir: Path
    interrupted: bool
    runs: int  # repeats finished (arm x level x repeat)


async def _set_when(target: asyncio.Event, *sources: asyncio.Event) -> None:
    """Set `target` as soon as any of `sources` is set (run as a task; cancel it when done)."""
    waits = [asyncio.create_task(e.wait()) for e in sources]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        target.set()
    finally:
        for w in waits:
            w.cancel()


class _RecordFile:
    """requests.jsonl of one repeat, appended and flushed as each request finishes."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] = path.open("a", encoding="utf-8")
        self.records: list[RequestRecord] = []

    def append(self, rec: RequestRecord) -> None:
        self._f.write(json.dumps(json_safe(rec.to_dict()), ensure_ascii=False, allow_nan=False) + "\n")
        self._f.flush()
        self.records.append(rec)

    def close(self) -> None:
        self._f.close()


@dataclass(frozen=True, slots=True)
class _BlockRequest:
    """The runner renumbers the items it is given 0..n-1; a block keeps the workload's indices (pairing keys)."""

    inner: RequestFunc
    block: tuple[RequestSpec, ...]

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        return await self.inner(session, self.block[spec.index], scheduled_s=scheduled_s, warmup=warmup)


def check_output_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise UserError(f"--output {path} is a file; give a directory")
    if path.is_dir() and ((path / INPUTS_FILE).exists() or (path / "runs").exists()):
        raise UserError(f"--output {path} already holds a run; choose a new directory or remove it")


class _Lifecycle:
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

    def note_server(self, arm: ArmPlan, info: ServerInfo, metric_names: set[str], cold: ColdStart | None) -> None:
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
    def _request(self, arm: ArmPlan, model: str) -> RequestFunc:
        ep = EndpointConfig(
            base_url=arm.info.url,
            model=model,
            api=self.plan.api,  # type: ignore[arg-type]
            api_key=arm.api_key,
            timeout_s=self.plan.request_timeout_s,
            extra_body=dict(self.plan.extra_body),
            logprobs=self.plan.logprobs,
        )
        return request_func(ep, self.plan.sampling, clock=self.clock)

    def _load(self, lv: LoadLevel, n: int, warmup: int) -> LoadConfig:
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
        sink: _RecordFile,
        memory: list[Any],
        before: list[MetricsSnapshot | None] | None = None,
    ) -> bool:
        """Offer the level's load over the given blocks of items; returns True when interrupted.
        `before`, when given, receives the /metrics scrape taken after warmup, just before the first measured
        request (so warmup traffic never counts in the level's counter deltas)."""
        lv = self.plan.loads[level_i]
        request = self._request(arm, model)
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
            )

            async def measure_start(s: MemorySampler = sampler, first: bool = bi == 0) -> None:
                if first and before is not None:
                    before[0] = await scrape_metrics(self.session, arm.info.url)
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
                    self._load(lv, len(block), warmup if bi == 0 else 0),
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
        sink = _RecordFile(repeat_dir(self.out, arm.info.name, spec.key, repeat) / REQUESTS_FILE)
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
        after = await scrape_metrics(self.session, arm.info.url)
        return self._repeat_run(arm, spec, repeat, sink.records, before[0], after, memory, interrupted)

    def _repeat_run(
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
            counter_deltas=counter_deltas(before, after),
            notes=tuple(notes),
        )
        self.order += 1
        write_run_meta(self.out, run)
        if not interrupted:
            self.finished_runs += 1
        return run

    # --- launch mode ------------------------------------------------------------------------------------------
    async def launch(self, arm: ArmPlan, repeat: int) -> tuple[ServerProcess, float | None]:
        assert arm.launch is not None
        log = self.out / LOGS_DIR / f"{arm.info.name}-r{repeat}.log"
        server = ServerProcess(arm.launch, log, name=arm.info.name, clock=self.clock)
        self.reporter.phase(f"{arm.info.label}: starting {' '.join(arm.launch.command)}")
        server.start()
        ready_s = await server.wait_ready(self.session, self.stop)
        return server, ready_s

    async def probe(self, arm: ArmPlan) -> tuple[str, ServerInfo, set[str]]:
        ep = EndpointConfig(base_url=arm.info.url, model=arm.model or "", api_key=arm.api_key)
        info = await probe_endpoint(self.session, ep)
        model = choose_model(arm.model, info, arm.info.url)
        snap = await scrape_metrics(self.session, arm.info.url)
        return model, info, snap.names() if snap is not None else set()

    async def first_token(self, arm: ArmPlan, model: str, server: ServerProcess) -> float | None:
        """Process start -> first token of a short probe request (the cold start a user would see)."""
        # a few tokens, not one: a lone token can be an incomplete UTF-8 sequence that streams no text at all
        probe = replace(self.setup.items[0], index=0, max_tokens=8)
        rec = await self._request(arm, model)(self.session, probe, scheduled_s=self.clock())
        if rec.ok and not rec.chunks and rec.completion_tokens and server.started_s is not None:
            # The model ended at once (e.g. its first token was end-of-sequence): no text, but a token was made, and
            # the response that carried its finish_reason is when it reached us.
            return rec.end_s - server.started_s
        if not rec.ok or not rec.chunks or server.started_s is None:
            why = rec.error.message[:200] if rec.error is not None else "no text streamed"
            self.notes.append(f"{arm.info.name}: cold-start probe gave no first token ({why})")
            return None
        return rec.chunks[0].t_s - server.started_s

    async def run_launch_mode(self) -> None:
        arms = list(self.plan.arms)
        for repeat in range(1, self.setup.repeats + 1):
            order = arms if repeat % 2 == 1 else arms[::-1]  # ABBA: A B | B A | A B ...
            for arm in order:
                if self.stop.is_set():
                    return
                server: ServerProcess | None = None
                try:
                    server, ready_s = await self.launch(arm, repeat)
                    if ready_s is None:
                        return  # stopped while waiting
                    model, info, names = await self.probe(arm)
                    first = await self.first_token(arm, model, server)
                    cold = ColdStart(ready_s, first)
                    self.launches.append(
                        {"arm": arm.info.name, "repeat": repeat, "ready_s": ready_s, "first_token_s": first}
                    )
                    (self.out / LAUNCHES_FILE).write_text(json.dumps(json_safe(self.launches), indent=2) + "\n")
                    self.note_server(arm, info, names, cold)
                    first_txt = f", first token {first:.1f} s" if first is not None else ""
                    self.reporter.phase(f"{arm.info.label}: ready in {ready_s:.1f} s{first_txt}")
                    for li in range(len(self.setup.levels)):
                        run = await self.level(
                            arm, model, li, repeat, warmup=self.plan.warmup_requests if li == 0 else 0, server=server
                        )
                        if self.server_died is not None:
                            raise self.server_died
                        if run.interrupted or self.stop.is_set():
                            self.interrupted = True
                            return
                finally:
                    if server is not None:
                        self.reporter.phase(f"{arm.info.label}: stopping the server")
                        code = server.stop(self.plan.stop_grace_s)
                        if code not in (0, None, -signal.SIGTERM, -signal.SIGKILL, 143, 137) and not self.stop.is_set():
                            self.notes.append(f"{arm.info.name} r{repeat}: server exited with code {code}")

    # --- two-URL mode -----------------------------------------------------------------------------------------
    def blocks_for(self, level_i: int) -> list[tuple[RequestSpec, ...]]:
        lv = self.plan.loads[level_i]
        width = lv.concurrency or lv.max_concurrency or max(1, round(lv.rate_rps or 1))
        # Small blocks keep each prompt's two measurements close in time, so a burst of contention hits both
        # arms of a pair; at higher load a block must be long enough for the load to reach steady state.
        size = self.plan.block_size or (2 if width == 1 else 4 * width)
        items = self.setup.items
        return [tuple(items[i : i + size]) for i in range(0, len(items), size)]

    async def run_two_url_mode(self) -> None:
        arms = list(self.plan.arms)
        models: dict[str, str] = {}
        for arm in arms:
            model, info, names = await self.probe(arm)
            models[arm.info.name] = model
            self.note_server(arm, info, names, None)
        warmed: set[str] = set()
        for repeat in range(1, self.setup.repeats + 1):
            for li, spec in enumerate(self.setup.levels):
                blocks = self.blocks_for(li)
                per_arm: dict[str, dict[str, Any]] = {
                    a.info.name: {"memory": [], "sink": None, "before": [None]} for a in arms
                }
                for a in arms:
                    st = per_arm[a.info.name]
                    st["sink"] = _RecordFile(repeat_dir(self.out, a.info.name, spec.key, repeat) / REQUESTS_FILE)
                    st["before"][0] = await scrape_metrics(self.session, a.info.url)
                t0 = self.clock()
                interrupted = False
                try:
                    for bi, block in enumerate(blocks):
                        order = arms if (bi + repeat) % 2 == 1 else arms[::-1]  # ABBA over blocks and repeats
                        for arm in order:
                            st = per_arm[arm.info.name]
                            warm = self.plan.warmup_requests if arm.info.name not in warmed else 0
                            warmed.add(arm.info.name)
                            self.reporter.level_start(arm.info.label, spec.label, repeat, len(block))
                            try:
                                interrupted = await self.run_blocks(
                                    arm,
                                    models[arm.info.name],
                                    li,
                                    [block],
                                    repeat,
                                    warm,
                                    None,
                                    t0,
                                    st["sink"],
                                    st["memory"],
                                    st["before"] if warm else None,  # warmup traffic must not count
                                )
                            finally:
                                self.reporter.level_end()
                            if interrupted:
                                break
                        if interrupted:
                            break
                finally:
                    for a in arms:
                        per_arm[a.info.name]["sink"].close()
                for a in arms:
                    st = per_arm[a.info.name]
                    after = await scrape_metrics(self.session, a.info.url)
                    self._repeat_run(
                        a, spec, repeat, st["sink"].records, st["before"][0], after, st["memory"], interrupted
                    )
                if interrupted or self.stop.is_set():
                    self.interrupted = True
                    return

    async def run(self) -> RunOutcome:
        self.write_inputs()
        try:
            if self.plan.launch_mode:
                await self.run_launch_mode()
            else:
                await self.run_two_url_mode()
        except BaseException as e:
            self.interrupted = True
            why = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            self.notes.append(f"the run stopped on an error ({why}): the report covers the part that ran")
            raise
        finally:
            if self.stop.is_set() and not self.interrupted:
                self.interrupted = True
            if self.interrupted and not any(n.startswith("the run stopped") for n in self.notes):
                self.notes.append("the run was interrupted: the report covers the part that ran")
            with contextlib.suppress(Exception):
                self.write_inputs(final=True)
            if self.gpu is not None:
                self.gpu.close()
        return RunOutcome(self.out, self.interrupted, self.finished_runs)


async def run_plan(
    plan: RunPlan,
    out_dir: Path,
    *,
    stop: asyncio.Event | None = None,
    reporter: Reporter | None = None,
    clock: Clock = time.perf_counter,
) -> RunOutcome:
    """Run every arm at every level and repeat, streaming results to out_dir. Servers are always stopped."""
    check_output_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    async with make_session(clock=clock) as session:
        life = _Lifecycle(plan, out_dir, session, stop or asyncio.Event(), reporter or _Silent(), clock)
        return await life.run()


def run_plan_interruptible(plan: RunPlan, out_dir: Path, *, reporter: Reporter | None = None) -> RunOutcome:
    """`run_plan` on a fresh event loop where the first Ctrl-C stops cleanly (in-flight requests are recorded as
    cancelled, servers stopped, inputs.json marked interrupted) and a second one interrupts at once (servers are
    still stopped: every launch is inside try/finally)."""

    async def main() -> RunOutcome:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        try:
            return await run_plan(plan, out_dir, stop=stop, reporter=reporter)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(main())


def describe_plan(plan: RunPlan) -> list[str]:
    """A few lines for the terminal before the run starts."""
    s = plan.setup
    lines = [
        f"workload {s.workload_name}: {len(s.items)} prompts; temperature {s.temperature:g}, max_tokens {s.max_tokens}",
        "loads: "
        + ", ".join(lv.label for lv in s.levels)
        + f"; {s.repeats} repeat(s)"
        + (" alternating ABBA" if s.repeats > 1 else ""),
        "arms: "
        + ", ".join(a.info.label for a in plan.arms)
        + (" (two-URL mode: blocks of requests interleaved)" if s.two_url_mode else " (launched one at a time)"),
    ]
    return lines
