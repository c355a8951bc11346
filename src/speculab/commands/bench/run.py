"""One measured run of one endpoint (one arm): preflight -> manifest -> scrape -> load -> scrape -> summary.

Everything a user can get wrong is checked before the first request: the output directory, the endpoint,
the model, the workload's fit with the API. A server that goes away mid-run stops the run under the rule `run` uses
(`servers.liveness`): what was measured is kept, and `BenchResult.server_gone` says why it stopped (exit 3).
Records stream to requests.jsonl as they finish and are not kept in
memory (the client's memory stays flat however long the run); summary.json is computed from that file at the end,
also when the run was interrupted (it then covers the part that ran).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

from speculab.commands.bench.summary import build_summary, validity_warnings
from speculab.config import SloTargets
from speculab.harness.analysis.acceptance import positions_from_summary
from speculab.harness.analysis.metrics import RunAccumulator, RunMetrics, StallConfig
from speculab.harness.analysis.rejections import OptionRejections
from speculab.harness.client.endpoint import Clock, EndpointConfig, RequestSampling, TokenCounter, check_items
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import RequestFunc, make_session, open_connections, request_func
from speculab.harness.client.socket_times import chunk_time_source, send_time_source
from speculab.harness.load.client_health import ClientHealth, HealthProbe
from speculab.harness.load.coordinator import lost_workers, run_workers, worker_warnings
from speculab.harness.load.interrupt import run_interruptible
from speculab.harness.load.runner import LoadConfig, LoadOutcome, Progress, run_load
from speculab.harness.load.worker_plan import plan_workers
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.results.requests_file import iter_records
from speculab.harness.results.run_dir import MANIFEST, MANIFEST_SCHEMA, REQUESTS, RunDir, utc_now, versions
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.acceptance import acceptance_with_reason
from speculab.harness.servers.adapters import adapter_for, detect_engine, forced_by_server, response_reader
from speculab.harness.servers.liveness import EndpointWatch, GoneEvidence, set_when
from speculab.harness.servers.scrape import MetricsSnapshot, scrape_metrics
from speculab.harness.workload.fit import Fit, FitConfig, context_from_cards, fit_items, fit_warning


@dataclass(frozen=True, slots=True)
class BenchConfig:
    endpoint: EndpointConfig  # model "" means: the only model the server serves
    sampling: RequestSampling
    load: LoadConfig
    output_dir: Path
    workload: dict[str, Any] = field(default_factory=dict)  # spec, name, source, n_items: for the manifest
    stall: StallConfig = field(default_factory=StallConfig)
    slo: SloTargets = field(default_factory=SloTargets)
    tokenizer: str | None = None
    scrape: bool = True  # scrape /metrics before and after the measured phase
    command: tuple[str, ...] = ()  # argv, already redacted
    workers: int = 1  # client processes (load.coordinator); 1: this process runs the load
    ray: str | None = None  # the workers as Ray actors on this cluster (load.ray_pool): auto | local | an address
    fit: FitConfig = field(default_factory=FitConfig)  # items that cannot fit the server's context (workload.fit)


@dataclass(frozen=True, slots=True)
class BenchResult:
    summary: dict[str, Any]
    run_dir: Path
    interrupted: bool
    server_gone: str | None = None  # the server stopped answering mid-run: the one-line error (exit 3)
    workers_lost: str | None = None  # a client worker (a load host) ended mid-run: the one-line error (exit 6)

    @property
    def records(self) -> tuple[RequestRecord, ...]:
        """Every record of the run (warmup included) in the order they finished, read back from requests.jsonl on
        each access: a run keeps none of them in memory."""
        return tuple(iter_records(self.run_dir / REQUESTS))


async def run_bench(
    cfg: BenchConfig,
    items: Sequence[RequestSpec],
    *,
    on_progress: Callable[[Progress], None] | None = None,
    stop: asyncio.Event | None = None,
    count_tokens: TokenCounter | None = None,
    clock: Clock = time.perf_counter,
) -> BenchResult:
    check_items(items, cfg.endpoint)
    RunDir.check(cfg.output_dir)
    async with make_session(clock=clock) as session:
        info = await probe_endpoint(session, cfg.endpoint)
        names: set[str] = set()
        if cfg.scrape:
            first = await scrape_metrics(session, cfg.endpoint.base_url, api_key=cfg.endpoint.api_key)
            names = first.names() if first is not None else set()
        ep, engine = bench_endpoint(cfg.endpoint, info, names)
        cfg, fit = fit_bench(cfg, items, context_from_cards(info.model_cards, ep.model), count_tokens)
        items = fit.items
        run_dir = RunDir(cfg.output_dir).create()
        try:
            return await _measure(cfg, ep, info, engine, run_dir, session, fit, on_progress, stop, count_tokens, clock)
        finally:
            run_dir.close()


def fit_bench(
    cfg: BenchConfig, pool: Sequence[RequestSpec], served: int | None, count: TokenCounter | None = None
) -> tuple[BenchConfig, Fit]:
    """The run's items fitted to the context (--max-model-len, else what /v1/models says) before the first request;
    with some max_tokens capped, every item carries its own limit, so the config stops overriding them."""
    sp = cfg.sampling
    fit = fit_items(
        pool,
        context=cfg.fit.max_model_len or served,
        policy=cfg.fit.policy,
        max_tokens=sp.max_tokens,
        overrides_items=sp.max_tokens_overrides_items,
        num_prompts=cfg.load.num_prompts,
        seed=cfg.load.seed,
        count=count,
    )
    if fit.capped:
        cfg = dataclasses.replace(cfg, sampling=dataclasses.replace(sp, max_tokens_overrides_items=False))
    return cfg, fit


def bench_endpoint(ep: EndpointConfig, info: ServerInfo, metric_names: set[str]) -> tuple[EndpointConfig, str]:
    """The endpoint as the bench sends to it, and the engine detected behind it (`detect_engine`: /metrics names,
    /v1/models owned_by, /version). The model defaults to the server's; an engine that drops keep-alive connections
    after a streamed response without saying so (llama.cpp's llama-server) gets `Connection: close` on every
    request, as `speculab run` does for it, or the next request on that connection fails as if the server had."""
    version = info.version if isinstance(info.version, dict) else ({"raw": info.version} if info.version else None)
    engine = detect_engine(version, {"data": list(info.model_cards)}, metric_names)
    model = choose_model(ep.model or None, info, ep.base_url)
    adapter = adapter_for(engine)
    # the fields the engine needs asked to return each response's acceptance (SGLang's spec_tokens_details); the
    # user's --extra-body wins
    extra = {**adapter.request_fields, **ep.extra_body}
    keep_alive = ep.keep_alive and adapter.keep_alive
    read = response_reader(engine)  # each response's own fields, as the engine's adapter reads them
    return dataclasses.replace(ep, model=model, keep_alive=keep_alive, extra_body=extra, read=read), engine


async def _measure(
    cfg: BenchConfig,
    ep: EndpointConfig,
    info: ServerInfo,
    engine: str,
    run_dir: RunDir,
    session: aiohttp.ClientSession,
    fit: Fit,
    on_progress: Callable[[Progress], None] | None,
    stop: asyncio.Event | None,
    count_tokens: TokenCounter | None,
    clock: Clock,
) -> BenchResult:
    items = fit.items
    manifest = _manifest(cfg, ep, info, engine, session, clock)
    manifest["workload"] = {**cfg.workload, "n_items": len(items)}
    manifest["fit"] = fit.to_manifest()  # what was left out (or capped) to fit the context, before any request
    run_dir.write_json(MANIFEST, manifest)
    watched = _Watched.start(session, ep, run_dir, stop, clock)
    try:
        if cfg.workers > 1 or cfg.ray is not None:
            phase = await _load_in_workers(cfg, ep, session, items, watched, on_progress=on_progress)
            manifest["workers"] = list(phase.workers)
            if cfg.ray is not None:
                manifest["ray"] = {"address": cfg.ray}
        else:
            phase = await _load_here(
                cfg, ep, session, items, watched, on_progress=on_progress, count_tokens=count_tokens, clock=clock
            )
        gone = await watched.gone(stop)
    finally:
        watched.close()
    before, outcome = phase.before, phase.outcome
    after = (
        await scrape_metrics(session, ep.base_url, api_key=ep.api_key) if cfg.scrape and before is not None else None
    )
    spec_decode, note = _spec_decode(cfg.scrape, before, after)

    # off the event loop: a long run's file takes seconds to read, and a second Ctrl-C must still stop at once
    m, rejected = await asyncio.to_thread(summarize_records, run_dir.path / REQUESTS, cfg.stall, cfg.slo)
    outputs = (
        await asyncio.to_thread(_outputs, run_dir.path / REQUESTS) if (spec_decode or {}).get("per_position") else []
    )
    said = forced_by_server({"version": info.version, "detected_engine": engine})
    validity = validity_warnings(cfg.workload, cfg.sampling.ignore_eos, spec_decode, said, outputs)
    hints = [*([fitted] if (fitted := fit_warning(fit)) else []), *rejected, *worker_warnings(phase.workers)]
    if gone is not None:
        hints.insert(0, gone.warning())
    finished_at = utc_now()
    summary = build_summary(
        m,
        run={
            "started_at": manifest["started_at"],
            "finished_at": finished_at,
            "wall_s": outcome.ended_s - outcome.started_s,
            "model": ep.model,
            "api": ep.api,
            "stream": ep.stream,
            "base_url": ep.base_url,
            "workload": cfg.workload.get("name"),
        },
        load=cfg.load.to_manifest(),
        stall=cfg.stall,
        warmup_requests=outcome.warmup,
        spec_decode=spec_decode,
        spec_decode_note=note,
        metrics_scraped=after is not None,
        interrupted=outcome.interrupted,
        hints=hints,
        skipped_turns=outcome.skipped,
        client=phase.health,
        validity=validity,
    )
    run_dir.write_summary(summary)
    manifest["finished_at"] = finished_at
    manifest["interrupted"] = outcome.interrupted
    manifest["server_gone"] = gone.warning().to_dict() if gone is not None else None  # a record (manifest /2)
    run_dir.write_json(MANIFEST, manifest)
    return _bench_result(summary, run_dir.path, outcome.interrupted, gone, ep.base_url, phase.workers)


def _bench_result(
    summary: dict[str, Any],
    path: Path,
    interrupted: bool,
    gone: GoneEvidence | None,
    url: str,
    workers: Sequence[dict[str, Any]],
) -> BenchResult:
    """The result with its one-line errors: the server stopped answering (exit 3), a load host was lost (exit 6)."""
    lost = lost_workers(workers)
    return BenchResult(
        summary,
        path,
        interrupted,
        None
        if gone is None
        else f"endpoint {url} stopped answering mid-run ({gone.said()}); what was measured is in {path}",
        None if lost is None else f"{lost}; what was measured is in {path}",
    )


def _manifest(
    cfg: BenchConfig, ep: EndpointConfig, info: ServerInfo, engine: str, session: aiohttp.ClientSession, clock: Clock
) -> dict[str, Any]:
    """manifest.json as written before the first request (`finished_at` None until the run ends)."""
    return {
        "schema": MANIFEST_SCHEMA,
        "command": list(cfg.command),
        "versions": versions(),
        "endpoint": ep.to_manifest(),
        "sampling": dataclasses.asdict(cfg.sampling),
        "load": cfg.load.to_manifest(),
        "workload": cfg.workload,
        "stall": dataclasses.asdict(cfg.stall),
        "slo": cfg.slo.limits,
        "tokenizer": cfg.tokenizer,
        "server": {**info.to_dict(), "detected_engine": engine},
        "clock": getattr(clock, "__name__", str(clock)),
        "chunk_times": chunk_time_source(session, clock),
        "send_times": send_time_source(session, clock),
        "started_at": utc_now(),
        "finished_at": None,
    }


@dataclass(slots=True)
class _Watched:
    """The load's records, stop and sends with the server watched (`servers.liveness`, the rule `run` uses for a URL
    arm): records go to requests.jsonl and the watch; `stop` is set by the user's Ctrl-C or once the server is gone;
    `admit` holds sends while the watch checks whether it is."""

    run_dir: RunDir
    watch: EndpointWatch
    stop: asyncio.Event
    _merge: asyncio.Task[None]

    @classmethod
    def start(
        cls,
        session: aiohttp.ClientSession,
        ep: EndpointConfig,
        run_dir: RunDir,
        stop: asyncio.Event | None,
        clock: Clock,
    ) -> _Watched:
        watch = EndpointWatch(session, ep.base_url, ep.headers(), clock=clock)
        halt = asyncio.Event()
        merge = asyncio.create_task(set_when(halt, watch.gone, *([stop] if stop is not None else [])))
        return cls(run_dir, watch, halt, merge)

    def on_record(self, rec: RequestRecord) -> None:
        self.run_dir.append(rec)  # on disk at once, and nowhere else: the summary reads it back
        self.watch.see(rec)

    def admitted(self, request: RequestFunc) -> RequestFunc:
        async def send(
            session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
        ) -> RequestRecord:
            await self.watch.admit()  # a wait here is client queue time: the request records sent_s when it leaves
            return await request(session, spec, scheduled_s=scheduled_s, warmup=warmup)

        return send

    async def gone(self, user_stop: asyncio.Event | None) -> GoneEvidence | None:
        """What showed the server gone (a check the last requests started concludes first); None when it is there,
        or when the user stopped the run (then it is an interruption, whatever the server did)."""
        if user_stop is not None and user_stop.is_set():
            return None
        await self.watch.settle()
        return self.watch.evidence if self.watch.gone.is_set() else None

    def close(self) -> None:
        self._merge.cancel()
        self.watch.cancel()


@dataclass(frozen=True, slots=True)
class _LoadPhase:
    """What the measured phase left behind for the summary."""

    outcome: LoadOutcome
    health: ClientHealth | None  # the client's CPU share and loop lag (several workers: the worst one's)
    before: MetricsSnapshot | None  # /metrics at the start of the measured phase (None: not scraped or not there)
    workers: tuple[dict[str, Any], ...] = ()  # the workers' reports, as the manifest keeps them


async def _load_here(
    cfg: BenchConfig,
    ep: EndpointConfig,
    session: aiohttp.ClientSession,
    items: Sequence[RequestSpec],
    watched: _Watched,
    *,
    on_progress: Callable[[Progress], None] | None,
    count_tokens: TokenCounter | None,
    clock: Clock,
) -> _LoadPhase:
    """This process runs the load; the first scrape and the client's health probe start with its measured phase."""
    before: list[MetricsSnapshot | None] = [None]
    probe = HealthProbe(clock=clock)

    async def measure_start() -> None:
        if cfg.scrape:
            before[0] = await scrape_metrics(session, ep.base_url, api_key=ep.api_key)
        probe.start()  # the client's own CPU and loop lag over the measured phase only

    request = request_func(ep, cfg.sampling, clock=clock, count_tokens=count_tokens)
    outcome = await run_load(
        items,
        watched.admitted(request),
        session,
        cfg.load,
        on_record=watched.on_record,
        on_progress=on_progress,
        stop=watched.stop,
        clock=clock,
        on_measure_start=measure_start,
        open_connections=partial(open_connections, session, ep.url),
    )
    health = await probe.stop()
    return _LoadPhase(outcome, health, before[0])


async def _load_in_workers(
    cfg: BenchConfig,
    ep: EndpointConfig,
    session: aiohttp.ClientSession,
    items: Sequence[RequestSpec],
    watched: _Watched,
    *,
    on_progress: Callable[[Progress], None] | None,
) -> _LoadPhase:
    """Client processes (or Ray actors) run the load; the first scrape happens at their start barrier. The workers
    send on their own, so the watch sees their records but cannot hold their sends."""
    before: list[MetricsSnapshot | None] = [None]
    plans = plan_workers(items, cfg.load, cfg.workers)

    async def scrape_before() -> None:
        if cfg.scrape:
            before[0] = await scrape_metrics(session, ep.base_url, api_key=ep.api_key)

    done = await run_workers(
        plans,
        ep,
        cfg.sampling,
        tokenizer=cfg.tokenizer,
        on_record=watched.on_record,
        on_progress=on_progress,
        stop=watched.stop,
        on_measure_start=scrape_before,
        ray=cfg.ray,
    )
    healths = [ClientHealth.from_dict(w["client"]) for w in done.workers if w.get("client")]
    # the summary's client block is the worst worker's (the one whose timings carry the most delay)
    health = max(healths, key=lambda h: (h.loop_lag_s.p99, h.cpu_share)) if healths else None
    return _LoadPhase(done.outcome, health, before[0], done.workers)


def _spec_decode(
    scrape: bool, before: MetricsSnapshot | None, after: MetricsSnapshot | None
) -> tuple[dict[str, Any] | None, ReportWarning | None]:
    """summary.json's `server.spec_decode` from the two scrapes (None where nothing was reported), and why not (a
    record the report words)."""
    if before is None:
        return None, ReportWarning(WarningKind.METRICS_UNREAD, fields={"how": "absent" if scrape else "disabled"})
    if after is None:
        return None, ReportWarning(WarningKind.METRICS_UNREAD, fields={"how": "after"})
    # No engine is named here: the `other` adapter reads whichever vLLM-, speculab- or SGLang-style metrics exist.
    acc, note = acceptance_with_reason(adapter_for("other"), before, after)
    if acc is None or not acc.active:
        return None, note
    out = acc.to_spec_decode_dict()
    # the canon per draft position (docs/metrics.md): conditional rates with intervals (over steps: counters are
    # all a bench run reads) and the acceptance length at every k up to the measured one
    by_position = positions_from_summary(acc)
    # a position no step reached has no rate: null, as the file keeps it (NaN is not JSON)
    rates = [r.conditional.estimate for r in by_position.positions] if by_position else []
    out["conditional_per_position"] = [x if math.isfinite(x) else None for x in rates]
    out["by_position"] = json_safe(asdict(by_position)) if by_position is not None else None
    return out, note


def _outputs(path: Path) -> list[tuple[int | None, str | None]]:
    """Each measured successful request's (output tokens, finish reason), for the short-outputs rule."""
    return [(r.completion_tokens, r.finish_reason) for r in iter_records(path) if r.ok and not r.warmup]


def summarize_records(path: Path, stall: StallConfig, slo: SloTargets) -> tuple[RunMetrics, list[ReportWarning]]:
    """The run's numbers and the request options the server rejected, from its requests.jsonl, in one pass that
    holds one record at a time: the file is the one copy of the records, and a run of hours would not fit in memory
    as objects."""
    acc, rejections = RunAccumulator(stall=stall, slo=slo), OptionRejections()
    for rec in iter_records(path):
        if not rec.warmup:
            acc.add(rec)
            rejections.add(rec)
    return acc.result(), rejections.warnings()


def run_bench_interruptible(
    cfg: BenchConfig,
    items: Sequence[RequestSpec],
    *,
    on_progress: Callable[[Progress], None] | None = None,
    count_tokens: TokenCounter | None = None,
) -> BenchResult:
    """`run_bench` on a fresh event loop where the first Ctrl-C (or SIGTERM: `timeout`, a CI job's cancel) stops
    the run cleanly (in-flight requests are cancelled and recorded, the summary is written) and a second Ctrl-C
    interrupts at once."""
    return run_interruptible(
        lambda stop: run_bench(cfg, items, on_progress=on_progress, stop=stop, count_tokens=count_tokens)
    )
