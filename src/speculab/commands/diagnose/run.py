"""`speculab diagnose`: which latency problem does this endpoint have - cold start, queueing, prefill or decode?

The phases, in order, each one request at a time unless stated (records stream to DIR/requests.jsonl tagged with
`extra.phase`; the analysis is pure, in `speculab.commands.diagnose.analysis`):
1. cold:    launch mode: start the server, wait for /health, time its first token. Always: the first request of the
            diagnosis (a short prompt), then `warm_probes` requests of the same size; with `idle_s`, one more after
            waiting that long with nothing in flight.
2. prefill: synthetic prompts of `sweep_points` lengths up to the model's context, `sweep_repeats` each, in a
            seeded shuffled order, max_tokens 1 -> TTFT against prompt tokens.
3. prefix:  a long shared prefix with new suffixes (the first request primes any cache) vs fresh prompts of the
            same length, interleaved.
4. workload at concurrency 1, then at the operating concurrency (closed loop).
Prometheus /metrics is scraped around every phase when the server has it, so the diagnosis can be checked against
what the server says about itself. Probe prompts are fresh text for every run (unless `probe_seed` is given): a
server with prefix caching would otherwise remember a previous diagnosis and answer its sweep from cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from speculab.commands.diagnose import analysis as dg
from speculab.commands.diagnose.causes import (
    PHASE_BASELINE,
    PHASE_COLD,
    PHASE_IDLE,
    PHASE_LOAD,
    PHASE_PREFILL,
    PHASE_PREFIX_CONTROL,
    PHASE_PREFIX_PRIMER,
    PHASE_PREFIX_SHARED,
    PHASE_WARM,
    Inputs,
    ServerPhase,
    Startup,
)
from speculab.commands.diagnose.config import DiagnoseConfig, DiagnoseResult
from speculab.commands.diagnose.document import build_document, diagnose_options
from speculab.commands.diagnose.server_metrics import merge_phases, server_phase
from speculab.errors import EndpointError, UserError
from speculab.harness.analysis.rejections import request_option_warnings
from speculab.harness.analysis.windows import achieved_concurrency
from speculab.harness.client.endpoint import Clock, EndpointConfig, RequestSampling, check_items
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import make_session, open_connections, request_func
from speculab.harness.load.coordinator import run_workers
from speculab.harness.load.interrupt import run_interruptible
from speculab.harness.load.runner import LoadConfig, run_load
from speculab.harness.load.worker_plan import plan_workers
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.results.run_dir import MANIFEST, RunDir, utc_now, versions
from speculab.harness.servers.adapters import response_reader
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.servers.process import ServerProcess, launch_server
from speculab.harness.servers.scrape import MetricsSnapshot, scrape_metrics
from speculab.harness.workload.fit import context_from_cards, fit_items
from speculab.harness.workload.items import MAX_CONTEXT_TOKENS, approx_tokens, item_text
from speculab.harness.workload.sources import load_workload

DIAGNOSIS_JSON = "diagnosis.json"
PhaseCallback = Callable[[str], None]


# --------------------------------------------------------------------------------------------------------------
# Probe prompts


def _synthetic(tokens: int, n: int, seed: int, api: str, prefix: int = 0) -> tuple[RequestSpec, ...]:
    spec = f"synthetic:input={tokens},output=1,n={n}" + (f",prefix={prefix}" if prefix else "")
    return load_workload(spec, seed=seed, num_prompts=n, api=api).items


def _plan_lengths(cfg: DiagnoseConfig, context: int) -> tuple[int, ...]:
    # approximate tokens can undercount a real tokenizer's by ~10% (docs/workloads.md), and chat templates add some:
    # keep the longest probe well inside the context
    room = int((context - 8) * 0.85)
    top = min(room, cfg.max_prompt_tokens) if cfg.max_prompt_tokens else room
    if top < cfg.min_prompt_tokens * 2:
        raise UserError(
            f"a context of {context} tokens leaves no room for a prompt-length sweep; check --max-model-len "
            f"or lower --min-prompt-tokens"
        )
    return dg.sweep_lengths(top, cfg.sweep_points, cfg.min_prompt_tokens)


def _context_length(cfg: DiagnoseConfig, info: ServerInfo, model: str) -> int:
    context = cfg.max_model_len or context_from_cards(info.model_cards, model)
    if context is not None:
        return context
    said = next((c.get("max_model_len") for c in info.model_cards if c.get("id") == model), None)
    if isinstance(said, int) and not isinstance(said, bool) and said > MAX_CONTEXT_TOKENS:
        # the sweep builds prompts up to the context: a server's 10^30 would be a prompt no machine can hold
        raise EndpointError(
            f"{cfg.endpoint.base_url}/v1/models says model {model!r} has a context of {said:.3g} tokens, more than "
            f"any model ({MAX_CONTEXT_TOKENS}); pass --max-model-len N"
        )
    raise EndpointError(
        f"{cfg.endpoint.base_url}/v1/models does not say model {model!r}'s context length (max_model_len); "
        "pass --max-model-len N"
    )


# --------------------------------------------------------------------------------------------------------------
# The run


class _Session:
    """One diagnosis in progress: sends phases, tags and streams records, scrapes around phases."""

    def __init__(
        self,
        cfg: DiagnoseConfig,
        ep: EndpointConfig,
        http: aiohttp.ClientSession,
        run_dir: RunDir | None,
        stop: asyncio.Event,
        on_phase: PhaseCallback | None,
        clock: Clock,
    ):
        self.cfg, self.ep, self.http, self.run_dir, self.stop = cfg, ep, http, run_dir, stop
        self.on_phase, self.clock = on_phase, clock
        self.phases: dict[str, list[RequestRecord]] = {}
        self.server: dict[str, ServerPhase] = {}
        self.records: list[RequestRecord] = []
        self.workers: list[dict[str, Any]] = []  # load.coordinator's report per worker, as bench's manifest keeps it
        self.metrics_available = cfg.scrape

    async def _scrape(self) -> MetricsSnapshot | None:
        if not self.metrics_available:
            return None
        snap = await scrape_metrics(self.http, self.ep.base_url, clock=self.clock, api_key=self.ep.api_key)
        if snap is None:
            self.metrics_available = False
        return snap

    async def phase(
        self,
        name: str,
        specs: Sequence[RequestSpec],
        *,
        concurrency: int = 1,
        sampling: RequestSampling | None = None,
        trace_speed: float | None = None,
        workers: int = 1,
        ray: str | None = None,
    ) -> list[RequestRecord]:
        """Send `specs`: a closed loop at `concurrency`, or with `trace_speed` a trace replay (open loop at the
        requests' arrival times, `concurrency` > 1 capping requests in flight)."""
        if self.stop.is_set() or not specs:
            return []
        if self.on_phase is not None:
            how = f" at concurrency {concurrency}" if concurrency > 1 else ""
            if trace_speed is not None:
                cap = f", at most {concurrency} in flight" if concurrency > 1 else ""
                how = f" replaying the trace at ×{trace_speed:g}{cap}"
            self.on_phase(f"{name}: {len(specs)} requests{how}")
        sp = sampling or RequestSampling(max_tokens=1, max_tokens_overrides_items=True, temperature=0.0)
        request = request_func(self.ep, sp, clock=self.clock)
        out = self.phases.setdefault(name, [])

        def on_record(rec: RequestRecord) -> None:
            rec = dataclasses.replace(rec, extra={**rec.extra, "phase": name})
            if self.run_dir is not None:
                self.run_dir.append(rec)
            out.append(rec)
            self.records.append(rec)

        before = await self._scrape()
        if trace_speed is not None:
            load = LoadConfig(concurrency=concurrency if concurrency > 1 else None, trace_speed=trace_speed)
        else:
            load = LoadConfig(concurrency=concurrency, num_prompts=len(specs))
        if workers > 1 or ray is not None:  # the operating point from several client processes (load.coordinator)
            done = await run_workers(
                plan_workers(specs, load, workers),
                self.ep,
                sp,
                tokenizer=None,
                on_record=on_record,
                stop=self.stop,
                ray=ray,
            )
            self.workers += [{"phase": name, **w} for w in done.workers]
        else:
            warm = partial(open_connections, self.http, self.ep.url)
            await run_load(
                list(specs),
                request,
                self.http,
                load,
                on_record=on_record,
                stop=self.stop,
                clock=self.clock,
                open_connections=warm,
            )
        after = await self._scrape() if before is not None else None
        sp_phase = server_phase(before, after)
        if sp_phase is not None:
            # several calls with the same name (interleaved prefix probes) add up
            self.server[name] = merge_phases(self.server.get(name), sp_phase)
        return out

    async def idle(self, seconds: float) -> bool:
        """Wait with nothing in flight; False if stopped first."""
        if self.on_phase is not None:
            self.on_phase(f"idle: waiting {seconds:g} s with nothing in flight")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
        return not self.stop.is_set()


@dataclass(frozen=True, slots=True)
class _Launched:
    """A server this diagnosis started: the process (stopped at the end) and its start and readiness times."""

    process: ServerProcess
    started_s: float  # process start, on the diagnosis clock
    ready_s: float  # process start -> health 200, seconds


async def _cold_phases(s: _Session, cfg: DiagnoseConfig, seed: int, launched: _Launched | None) -> Startup | None:
    api = cfg.endpoint.api
    probes = _synthetic(cfg.cold_probe_tokens, cfg.warm_probes + 2, seed, api)
    first = await s.phase(PHASE_COLD, probes[:1])
    startup = None
    if launched is not None:
        ok = first and first[0].ok and first[0].chunks
        t_first = first[0].chunks[0].t_s - launched.started_s if ok else None
        startup = Startup(ready_s=launched.ready_s, first_token_s=t_first)
    await s.phase(PHASE_WARM, probes[1 : 1 + cfg.warm_probes])
    if cfg.idle_s > 0 and await s.idle(cfg.idle_s):
        await s.phase(PHASE_IDLE, probes[-1:])
    return startup


def synthetic_token_ratio(records: Sequence[RequestRecord], nominal: int) -> float:
    """The server's prompt tokens per nominal synthetic token, from probes of `nominal` tokens (median; 1.0 when
    the server reports no usage). Synthetic text is counted in common English words, one token each in GPT-2 and
    Llama vocabularies; a small or code-trained tokenizer splits them further, and a sweep sized in words would
    then overshoot the context. Clipped to [0.5, 4]: a wilder ratio means the probes were not what they seem."""
    ratios = sorted(r.prompt_tokens / nominal for r in records if r.ok and r.prompt_tokens and nominal > 0)
    if not ratios:
        return 1.0
    return min(4.0, max(0.5, ratios[len(ratios) // 2]))


def _scaled(n: int, ratio: float) -> int:
    return max(1, round(n / ratio))


async def _prefill_phase(
    s: _Session, cfg: DiagnoseConfig, lengths: Sequence[int], seed: int, ratio: float = 1.0
) -> dict[int, int]:
    api = cfg.endpoint.api
    specs: list[tuple[int, RequestSpec]] = []
    for i, n in enumerate(lengths):
        # n server tokens: n / ratio synthetic ones (the fallback token count, without usage, is then n)
        specs.extend((n, spec) for spec in _synthetic(_scaled(n, ratio), cfg.sweep_repeats, seed + 1000 + i, api))
    # shuffled (seeded): slow drift of the server, or a cache warming up, then spreads over all lengths alike
    random.Random(seed).shuffle(specs)
    await s.phase(PHASE_PREFILL, [sp for _, sp in specs])
    return {pos: n for pos, (n, _) in enumerate(specs)}


async def _prefix_phases(
    s: _Session, cfg: DiagnoseConfig, prefix: int, total: int, seed: int, ratio: float = 1.0
) -> None:
    api = cfg.endpoint.api
    k = cfg.prefix_repeats
    total, prefix = _scaled(total, ratio), _scaled(prefix, ratio)
    shared = _synthetic(total, k + 1, seed + 2000, api, prefix=prefix)
    control = _synthetic(total, k, seed + 3000, api)
    await s.phase(PHASE_PREFIX_PRIMER, shared[:1])
    for i in range(k):  # interleaved: drift hits both kinds alike
        await s.phase(PHASE_PREFIX_SHARED, shared[1 + i : 2 + i])
        await s.phase(PHASE_PREFIX_CONTROL, control[i : i + 1])


async def _workload_phases(s: _Session, cfg: DiagnoseConfig, items: Sequence[RequestSpec]) -> None:
    sp = cfg.sampling
    await s.phase(PHASE_BASELINE, items[: cfg.num_prompts], sampling=sp)
    if cfg.trace_speed is not None:
        await s.phase(
            PHASE_LOAD,
            items,
            concurrency=cfg.concurrency,
            sampling=sp,
            trace_speed=cfg.trace_speed,
            workers=cfg.workers,
            ray=cfg.ray,
        )
    elif cfg.concurrency > 1:
        n = max(cfg.num_prompts, 2 * cfg.concurrency)
        cycled = [dataclasses.replace(items[i % len(items)], index=i) for i in range(n)]
        await s.phase(PHASE_LOAD, cycled, concurrency=cfg.concurrency, sampling=sp, workers=cfg.workers, ray=cfg.ray)


async def run_diagnosis(
    cfg: DiagnoseConfig,
    *,
    stop: asyncio.Event | None = None,
    on_phase: PhaseCallback | None = None,
    clock: Clock = time.perf_counter,
) -> DiagnoseResult:
    """Measure every phase against `cfg.endpoint` (or a server launched from `cfg.launch`) and diagnose it.
    Every user mistake is raised as a UserError before the first request."""
    stop = stop or asyncio.Event()
    # the default workload is loaded whole, so that prompts too long for the server's context can be left out
    # so is a trace: the operating point replays all of it
    is_trace = cfg.workload.startswith("trace:")
    n_load = None if cfg.workload_default or is_trace else cfg.num_prompts
    items = load_workload(cfg.workload, seed=cfg.seed, num_prompts=n_load, api=cfg.endpoint.api).items
    if cfg.trace_speed is not None and not is_trace:
        raise UserError("--trace-speed replays a trace's arrival times; use it with --workload trace:PATH")
    if is_trace:
        cfg = dataclasses.replace(cfg, trace_speed=cfg.trace_speed or 1.0)
    check_items(items, cfg.endpoint)
    if cfg.output_dir is not None:
        RunDir.check(cfg.output_dir)
    probe_seed = cfg.probe_seed if cfg.probe_seed is not None else random.SystemRandom().randrange(2**31 - 10_000)
    launched: _Launched | None = None
    async with make_session(clock=clock) as http:
        try:
            if cfg.launch is not None:
                launched = await _launch(cfg, http, stop, clock)
                if launched.process.cmd.port != cfg.launch.port:  # its chosen port was taken: it listens elsewhere
                    moved = launched.process.cmd
                    endpoint = dataclasses.replace(cfg.endpoint, base_url=moved.url)
                    cfg = dataclasses.replace(cfg, launch=moved, endpoint=endpoint)
            info = await probe_endpoint(http, cfg.endpoint)
            model = choose_model(cfg.endpoint.model or None, info, cfg.endpoint.base_url)
            context = _context_length(cfg, info, model)
            lengths = _plan_lengths(cfg, context)
            left_out = 0
            if cfg.workload_default:
                items, left_out = _fitting_items(items, context, cfg)
            _check_workload_fits(items, context, cfg)
            if left_out:
                cfg = dataclasses.replace(cfg, workload_left_out=left_out)
            ep = dataclasses.replace(cfg.endpoint, model=model)
            run_dir = RunDir(cfg.output_dir).create() if cfg.output_dir is not None else None
            try:
                return await _measure(
                    cfg, ep, info, context, lengths, items, probe_seed, http, run_dir, stop, on_phase, clock, launched
                )
            finally:
                if run_dir is not None:
                    run_dir.close()
        finally:
            if launched is not None:
                await asyncio.to_thread(launched.process.stop)


async def _launch(cfg: DiagnoseConfig, http: aiohttp.ClientSession, stop: asyncio.Event, clock: Clock) -> _Launched:
    """Start the server with the lifecycle's launcher (own process group, log file) and wait until it is ready."""
    assert cfg.launch is not None
    log_dir = cfg.output_dir if cfg.output_dir is not None else Path(".")
    # start() checks the port before it creates the log's directory: a refused launch leaves nothing behind; a port
    # speculab chose (`port: auto`) that another process takes moves the server to another (launch_server)
    launched = await launch_server(cfg.launch, log_dir / "server.log", http, stop, name="launched", clock=clock)
    server, ready = launched.server, launched.ready_s
    if ready is None:  # stopped while waiting
        await asyncio.to_thread(server.stop)
        raise KeyboardInterrupt
    assert server.started_s is not None
    return _Launched(server, server.started_s, ready)


def _fitting_items(
    items: Sequence[RequestSpec], context: int, cfg: DiagnoseConfig
) -> tuple[tuple[RequestSpec, ...], int]:
    """The first `num_prompts` items that fit the context (`workload.fit`, policy skip), and how many were left out.
    Nothing fits: the items as they are (`_check_workload_fits` says so)."""
    sp = cfg.sampling
    try:
        fit = fit_items(
            items,
            context=context,
            policy="skip",
            max_tokens=sp.max_tokens,
            overrides_items=sp.max_tokens_overrides_items,
            num_prompts=cfg.num_prompts,
            seed=cfg.seed,
        )
    except UserError:
        return tuple(items[: cfg.num_prompts]), 0
    return fit.items, len(fit.left_out)


def _check_workload_fits(items: Sequence[RequestSpec], context: int, cfg: DiagnoseConfig) -> None:
    longest = max((approx_tokens(item_text(it)) for it in items), default=0)
    if longest >= context:
        raise UserError(
            f"the workload has a prompt of about {longest} tokens but the context is {context}; use shorter prompts "
            "or a model with a longer context"
        )


async def _measure(
    cfg: DiagnoseConfig,
    ep: EndpointConfig,
    info: ServerInfo,
    context: int,
    lengths: tuple[int, ...],
    items: Sequence[RequestSpec],
    probe_seed: int,
    http: aiohttp.ClientSession,
    run_dir: RunDir | None,
    stop: asyncio.Event,
    on_phase: PhaseCallback | None,
    clock: Clock,
    launched: _Launched | None,
) -> DiagnoseResult:
    started_at = utc_now()
    prefix = cfg.prefix_tokens or max(cfg.min_prompt_tokens, lengths[-1] // 2)
    prefix_total = min(lengths[-1], prefix + 64)
    prefix = min(prefix, prefix_total - 8)
    manifest: dict[str, Any] = {
        "schema": "speculab.diagnose.manifest/1",
        "command": list(cfg.command),
        "versions": versions(),
        "endpoint": ep.to_manifest(),
        "server": info.to_dict(),
        "launch": list(redact_command(cfg.launch.command)) if cfg.launch is not None else None,
        "options": diagnose_options(cfg, context, lengths, probe_seed, prefix, prefix_total),
        "started_at": started_at,
        "finished_at": None,
    }
    if run_dir is not None:
        run_dir.write_json(MANIFEST, manifest)
    s = _Session(cfg, ep, http, run_dir, stop, on_phase, clock)
    startup = await _cold_phases(s, cfg, probe_seed, launched)
    _stop_if_rejected(s.records)
    # completions only: a chat template adds tokens of its own that a 32-token probe cannot tell from the text's
    ratio = synthetic_token_ratio(s.records, cfg.cold_probe_tokens) if ep.api == "completions" else 1.0
    approx = await _prefill_phase(s, cfg, lengths, probe_seed, ratio)
    await _prefix_phases(s, cfg, prefix, prefix_total, probe_seed, ratio)
    await _workload_phases(s, cfg, items)
    interrupted = stop.is_set()
    in_flight = achieved_concurrency(s.phases.get(PHASE_LOAD, ())) if cfg.trace_speed is not None else None
    inp = Inputs(
        phases=s.phases,
        concurrency=max(1, round(in_flight)) if in_flight is not None else cfg.concurrency,
        operating_label=(
            f"trace ×{cfg.trace_speed:g}, {in_flight:.2g} in flight on average" if in_flight is not None else ""
        ),
        in_flight=in_flight,
        idle_s=cfg.idle_s or None,
        prefix_tokens=prefix,
        prefix_prompt_tokens=prefix_total,
        startup=startup,
        server=s.server,
        workload_prompt_tokens=float(np.mean([approx_tokens(item_text(it)) for it in items[: cfg.num_prompts]])),
        thresholds=cfg.thresholds,
    )
    d = dg.analyze(inp, approx_tokens=approx)
    finished_at = utc_now()
    doc = build_document(d, cfg, ep, context, lengths, probe_seed, prefix, prefix_total, interrupted)
    doc["run"] = {"started_at": started_at, "finished_at": finished_at, "model": ep.model, "base_url": ep.base_url}
    doc["options"]["synthetic_token_ratio"] = round(ratio, 4)  # server tokens per synthetic token (sizes the sweep)
    if run_dir is not None:
        run_dir.write_json(DIAGNOSIS_JSON, doc)
        manifest.update(finished_at=finished_at, interrupted=interrupted)
        if s.workers:
            manifest["workers"] = s.workers
        run_dir.write_json(MANIFEST, manifest)
    return DiagnoseResult(d, doc, run_dir.path if run_dir else None, interrupted, tuple(s.records))


def _stop_if_rejected(records: Sequence[RequestRecord]) -> None:
    """Every request so far was refused as invalid (HTTP 4xx): every later one would be too. Stop with the server's
    reason and the flag that fixes it (the records stay in requests.jsonl)."""
    if not records or any(r.ok for r in records):
        return
    err = records[0].error
    if err is None or err.status is None or not 400 <= err.status < 500:
        return
    fixes = [w.fields["fix"] for w in request_option_warnings(records) if "fix" in w.fields]  # those naming a flag
    fix = fixes[0] if fixes else "check --api, --model and --extra-body"
    reason = err.message[:200] if err.message.startswith("HTTP") else f"HTTP {err.status}: {err.message[:200]}"
    raise EndpointError(f"the server rejected the diagnosis's requests ({reason}); {fix}")


def diagnose_interruptible(cfg: DiagnoseConfig, *, on_phase: PhaseCallback | None = None) -> DiagnoseResult:
    """`run_diagnosis` on a fresh event loop: the first Ctrl-C or SIGTERM stops it cleanly (in-flight requests
    cancelled and recorded, a launched server stopped, the diagnosis of what ran written); a second Ctrl-C
    interrupts at once."""
    return run_interruptible(lambda stop: run_diagnosis(cfg, stop=stop, on_phase=on_phase))


def diagnose_endpoint(url: str, **options: Any) -> DiagnoseResult:
    """Library entry point: diagnose the endpoint at `url` with DiagnoseConfig `options` (`model`, `api`,
    `api_key` and `timeout_s` go to the endpoint). Writes nothing unless `output_dir` is given."""
    ep_keys = {k: options.pop(k) for k in ("model", "api", "api_key", "timeout_s") if k in options}
    model = ep_keys.pop("model", "") or ""
    ep = EndpointConfig(base_url=url, model=model, read=response_reader("other"), **ep_keys)  # any engine's fields
    return asyncio.run(run_diagnosis(DiagnoseConfig(endpoint=ep, **options)))
