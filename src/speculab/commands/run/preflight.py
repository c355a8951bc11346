"""Before a run: its items fitted to the servers' context (`workload.fit`), and how big and how long it will be
(`speculab run --dry-run`, docs/experiment.md).

**Fitting.** The context comes from, in order: `--max-model-len`; the baseline's launch command (its engine's
context flag); in two-URL mode the baseline's /v1/models. In launch mode without a context flag it is known only once
the first server is up: launch mode then fits after that server's /v1/models and before its first request. Either
way every arm, level and repeat sends the same fitted items, and inputs.json records what was left out
(`Setup.fit`).

**Size and duration.** The size comes from the design alone: requests per arm and load, launches. The duration
comes from a few probe requests on the baseline (the run's own fitted items, as the run sends them): a handful one
at a time, then as many at once as the highest concurrency asks (16 at most), so the estimate knows what batching
does on this server. With a closed loop at concurrency c, a level of N requests takes about N x E2E(c) / c, E2E(c)
interpolated between the two probes; an open loop N / rate; a trace its own span. Every arm is assumed as fast as
the baseline (speculation changes that, by what the run is there to measure), and each launch as long as the probed
one. In launch mode with no server up, the dry run starts the baseline itself to time its start-up and probe it,
then stops it. Nothing is written to the output directory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp

from speculab.commands.run.lifecycle import Lifecycle
from speculab.commands.run.plan import RunPlan
from speculab.commands.run.probing.budget import search_size_lines, worst_case_levels, worst_case_rounds
from speculab.errors import EndpointError
from speculab.harness.client.endpoint import Clock, EndpointConfig
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import make_session, request_func
from speculab.harness.design import LevelSpec, stream_unary_sample
from speculab.harness.load.interrupt import run_interruptible
from speculab.harness.load.phases import windows
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.servers.adapters import adapter_for, engine_kinds, response_reader
from speculab.harness.servers.process import launch_server
from speculab.harness.workload.conversation import conversations
from speculab.harness.workload.fit import Fit, context_from_cards, fit_items, fit_warning


def command_context(engine: str | None, command: Sequence[str]) -> int | None:
    """The context length a launch command sets (`--flag N` or `--flag=N`, the flag its engine's adapter names), None
    where it does not say."""
    for flag in adapter_for(engine).context_flags if engine in engine_kinds() else ():
        for i, arg in enumerate(command):
            value = command[i + 1] if arg == flag and i + 1 < len(command) else arg.partition("=")[2]
            if (arg == flag or arg.startswith(flag + "=")) and value.isdigit():
                return int(value)
    return None


def planned_context(plan: RunPlan) -> int | None:
    """The context known before anything starts: --max-model-len, else the baseline's launch command."""
    base = plan.arms[0]
    if plan.max_model_len is not None:
        return plan.max_model_len
    return command_context(base.info.engine, base.launch.command) if base.launch is not None else None


def fit_plan(plan: RunPlan, context: int | None) -> tuple[RunPlan, Fit]:
    """The plan with its items fitted to `context` (pure): items from the plan's pool (the whole set, so that a
    prompt left out is replaced by the next), taken to num_prompts; capped limits carried by the items."""
    s = plan.setup
    pool = plan.pool or s.items
    sp = plan.sampling
    fit = fit_items(pool, context=context, policy=plan.fit_policy, max_tokens=sp.max_tokens,
                    overrides_items=sp.max_tokens_overrides_items,
                    num_prompts=plan.num_prompts if plan.pool else None, seed=s.seed)  # fmt: skip
    setup = replace(s, items=fit.items, fit=fit.to_manifest())
    sampling = replace(sp, max_tokens_overrides_items=False) if fit.capped else sp
    return replace(plan, setup=setup, sampling=sampling), fit


def fit_lifecycle(life: Lifecycle, context: int | None) -> None:
    """Fit the run in progress (before its first request) and say what was left out, once."""
    fitted, fit = fit_plan(life.plan, context)
    life.plan = fitted
    life.setup = replace(life.setup, items=fitted.setup.items, fit=fitted.setup.fit)
    warning = fit_warning(fit)
    if warning is not None:
        life.note(warning)
        life.reporter.warn(warning)


async def fit_when_known(life: Lifecycle) -> None:
    """Before the run: fit with the context known now (a flag, the launch command, or the baseline's /v1/models in
    two-URL mode); in launch mode with none, launch mode calls `fit_after_launch` once the first server is up."""
    context = planned_context(life.plan)
    if context is None and not life.plan.launch_mode:
        model, info, _ = await life.probe(life.plan.arms[0])
        context = context_from_cards(info.model_cards, model)
    if context is not None or not life.plan.launch_mode:
        fit_lifecycle(life, context)


def fit_after_launch(life: Lifecycle, info_cards: Sequence[Mapping[str, Any]], model: str) -> None:
    """Launch mode, the first server up: fit now if nothing did before (`Setup.fit` is None until fitted)."""
    if life.setup.fit is None:
        fit_lifecycle(life, context_from_cards(info_cards, model))


# --- size and duration (`--dry-run`) ---------------------------------------------------------------------------

SEQUENTIAL_PROBES = 4
MAX_BATCH_PROBE = 16
# seconds a run spends outside its levels and launches, measured on the demo (2 cores): the process's own start,
# each server's SIGTERM stop, rendering report.html with its plots at the end
STOP_S = 1.0
REPORT_S = 8.0


@dataclass(frozen=True, slots=True)
class Timing:
    """What the probes said about the baseline, in seconds."""

    e2e_s: float  # mean end-to-end latency, one request at a time
    batch: int = 1  # requests of the batch probe, sent together
    batch_e2e_s: float | None = None  # their mean end-to-end latency
    launch_s: float | None = None  # process start -> ready, when the dry run launched the server
    probes: int = 0  # requests that answered

    def e2e_at(self, concurrency: float) -> float:
        """E2E at a concurrency: linear between the two probes, flat beyond the batch (the server's batch is full)."""
        if concurrency <= 1:
            return self.e2e_s
        if self.batch_e2e_s is None or self.batch <= 1:
            return self.e2e_s * concurrency  # no batch measured: assume batching gains nothing
        c = min(concurrency, self.batch)
        e2e = self.e2e_s + (self.batch_e2e_s - self.e2e_s) * (c - 1) / (self.batch - 1)
        return e2e * concurrency / c  # past the probe's batch, requests wait their turn


def requests_per_arm(plan: RunPlan, items: Sequence[RequestSpec] | None = None) -> int:
    """Measured requests each arm sends at each load and repeat (the workload once; warmup not counted)."""
    return len(items if items is not None else plan.setup.items)


def launches(plan: RunPlan) -> int:
    """Server starts over the run: every arm in every repeat, one at a time (launch mode); none with two URLs."""
    return len(plan.arms) * _max_repeats(plan) if plan.launch_mode else 0


def _max_repeats(plan: RunPlan) -> int:
    seq = plan.setup.sequential
    return int(seq["max"]) if seq is not None else plan.setup.repeats


def size_lines(plan: RunPlan) -> list[str | ReportWarning]:
    """The run's size from its design alone, for the terminal before it starts (dry run and real run alike); a
    search's may end in a warning (a record the CLI words)."""
    if plan.setup.search is not None:
        return search_size_lines(plan)
    if any(lv.phases for lv in plan.setup.levels):
        return schedule_lines(plan)
    n, arms, loads, repeats = requests_per_arm(plan), len(plan.arms), len(plan.setup.levels), _max_repeats(plan)
    upto = "up to " if plan.setup.sequential is not None else ""
    total = n * arms * loads * repeats
    extra = [f"{plan.warmup_requests} warmup per launch"] if plan.launch_mode and plan.warmup_requests else []
    extra += [f"{u} unary per arm"] if (u := len(stream_unary_sample(plan.setup))) else []  # stream against unary
    lines: list[str | ReportWarning] = [
        f"requests: {n} per arm and load; {arms} arms x {loads} loads x {upto}{repeats} repeats = {upto}{total}"
        + (f" (+ {', '.join(extra)})" if extra else "")
    ]
    if plan.launch_mode:
        lines.append(f"launches: {launches(plan)} ({arms} arms x {upto}{repeats} repeats, one server at a time)")
    return lines


def schedule_lines(plan: RunPlan) -> list[str | ReportWarning]:
    """A phased load's size: its schedule, phase by phase, and its length (a schedule runs for its time, sending as
    many requests as each arm finishes)."""
    (lv,) = plan.setup.levels
    arms, repeats = len(plan.arms), _max_repeats(plan)
    total = sum(p.duration_s for p in lv.phases)
    lines: list[str | ReportWarning] = [
        f"schedule: {len(lv.phases)} phases, {total:g} s per arm and repeat; {arms} arms x {repeats} repeats = "
        f"{total * arms * repeats:g} s of load (+ {plan.warmup_requests} warmup per launch); each change's first "
        f"{lv.transition_s:g} s judged as its own window"
    ]
    for w in windows(lv.phases):
        when = f"{w.phase.duration_s:.4g} s ({w.start_s:.4g}–{w.end_s:.4g} s)"
        lines.append(f"  phase {w.number}: {w.phase.label} for {when}")
    if plan.launch_mode:
        lines.append(f"launches: {launches(plan)} ({arms} arms x {repeats} repeats, one server at a time)")
    return lines


def level_s(level: LevelSpec, n: int, timing: Timing, items: Sequence[RequestSpec]) -> float:
    """Seconds one arm spends at one load: N requests at its concurrency, rate or trace speed; a phased load's
    schedule length."""
    if level.phases:
        return sum(p.duration_s for p in level.phases) + timing.e2e_s
    if level.kind == "concurrency":
        # the last requests run with fewer in flight: half a request's time longer
        return n * timing.e2e_at(level.value) / level.value + timing.e2e_at(level.value) / 2
    if level.kind == "rate":
        return n / level.value + timing.e2e_s
    span = max((it.arrival_s or 0.0 for it in items), default=0.0)
    return span / level.value + timing.e2e_s


def estimate_s(plan: RunPlan, timing: Timing) -> float:
    """The whole run's seconds (pure): levels per arm and repeat, each arm's unary sample, warmup and the first-token
    probe per launch, start-up and stop per launch, and the report at the end."""
    items = plan.setup.items
    # a search: its costliest case, every probe a level, each round a launch of every arm (probing.budget)
    levels = worst_case_levels(plan.setup.search) if plan.setup.search is not None else plan.setup.levels
    per_repeat = sum(level_s(lv, len(lv.items_of(items)), timing, items) for lv in levels)
    runs = len(plan.arms) * _max_repeats(plan)
    total = runs * per_repeat + REPORT_S
    first_c = levels[0].value if levels[0].kind == "concurrency" else 1.0
    # the stream against unary sample: once per arm, as many at once as the first load has in flight
    total += len(plan.arms) * len(stream_unary_sample(plan.setup)) * timing.e2e_at(first_c) / first_c
    if plan.launch_mode:
        warmup = plan.warmup_requests * timing.e2e_at(first_c) / first_c
        rounds = worst_case_rounds(plan.setup.search) if plan.setup.search is not None else 1
        total += launches(plan) * rounds * ((timing.launch_s or 0.0) + warmup + timing.e2e_s + STOP_S)
    return total


def estimate_line(plan: RunPlan, timing: Timing | None, why: str | None = None) -> str:
    """The estimate as one line, with what it rests on."""
    if timing is None:
        return f"estimated duration: unknown ({why or 'no server answered'}); the size above is the design's"
    s = estimate_s(plan, timing)
    rest = f"{timing.probes} probe requests on the baseline"
    if timing.launch_s is not None:
        rest += f", its start-up ({timing.launch_s:.0f} s)"
    return f"estimated duration: {_duration(s)} (from {rest}; every arm assumed as fast as the baseline)"


def _duration(s: float) -> str:
    return f"~{s:.0f} s" if s < 90 else f"~{s / 60:.0f} min ({s:.0f} s)"


# --------------------------------------------------------------------------------------------------------------
# Probing


def _spread(items: Sequence[RequestSpec], k: int, offset: int = 0) -> list[RequestSpec]:
    """k items spread over the workload (single requests and first turns: a later turn needs its own history)."""
    firsts = [c[0] for c in conversations(items)]
    if not firsts:
        return []
    return [firsts[(offset + i * max(len(firsts) // k, 1)) % len(firsts)] for i in range(k)]


async def probe_timing(
    session: aiohttp.ClientSession,
    ep: EndpointConfig,
    plan: RunPlan,
    *,
    launch_s: float | None = None,
    clock: Clock = time.perf_counter,
) -> Timing | None:
    """Time a few of the run's own requests on the baseline: one at a time, then a batch sent together."""
    request = request_func(ep, plan.sampling, clock=clock)
    items = plan.setup.items
    seq: list[RequestRecord] = []
    for it in _spread(items, SEQUENTIAL_PROBES):
        seq.append(await request(session, dataclasses.replace(it, index=0), scheduled_s=clock(), warmup=True))
    ok = [r.end_s - r.sent_s for r in seq if r.error is None]
    if not ok:
        return None
    top = max((int(lv.value) for lv in plan.setup.levels if lv.kind == "concurrency"), default=1)
    batch, batch_e2e, answered = min(MAX_BATCH_PROBE, top), None, len(ok)
    if batch > 1:
        now = clock()
        sent = [request(session, dataclasses.replace(it, index=i), scheduled_s=now, warmup=True)
                for i, it in enumerate(_spread(items, batch, offset=1))]  # fmt: skip
        got = [r.end_s - r.sent_s for r in await asyncio.gather(*sent) if r.error is None]
        batch_e2e, answered = (statistics.fmean(got) if got else None), answered + len(got)
    return Timing(statistics.fmean(ok), batch, batch_e2e, launch_s, answered)


@dataclass(frozen=True, slots=True)
class DryRun:
    plan: RunPlan  # fitted, where the context is known
    fit: Fit
    timing: Timing | None
    why: str | None = None  # why there is no timing


async def dry_run(plan: RunPlan, *, clock: Clock = time.perf_counter) -> DryRun:
    """Fit the plan and time the baseline, sending only probe requests; launch mode with no server up starts the
    baseline for that and stops it."""
    base = plan.arms[0]
    ep = EndpointConfig(
        base_url=base.info.url,
        model=base.model or "",
        api=plan.api,  # type: ignore[arg-type]
        api_key=base.api_key,
        timeout_s=plan.request_timeout_s,
        extra_body=dict(plan.extra_body),
        keep_alive=adapter_for(base.info.engine).keep_alive,
        read=response_reader(base.info.engine),
    )
    async with make_session(clock=clock) as session:
        info = await _reachable(session, ep)
        if info is not None or base.launch is None:
            return await _probe(session, ep, info, plan, None, clock)
        with tempfile.TemporaryDirectory(prefix="speculab-dry-run-") as tmp:
            signs = adapter_for(base.info.engine).port_taken_signs
            log = Path(tmp) / "server.log"
            launched = await launch_server(base.launch, log, session, name="dry-run", clock=clock, signs=signs)
            try:
                ep = dataclasses.replace(ep, base_url=launched.server.cmd.url)  # moved, if its chosen port was taken
                info = await _reachable(session, ep)
                return await _probe(session, ep, info, plan, launched.ready_s, clock)
            finally:
                await asyncio.to_thread(launched.server.stop)


async def _reachable(session: aiohttp.ClientSession, ep: EndpointConfig) -> ServerInfo | None:
    try:
        return await probe_endpoint(session, ep, timeout_s=5.0)
    except EndpointError:
        return None


async def _probe(session: aiohttp.ClientSession, ep: EndpointConfig, info: ServerInfo | None, plan: RunPlan,
                 launch_s: float | None, clock: Clock) -> DryRun:  # fmt: skip
    context = planned_context(plan)
    if info is None:
        fitted, fit = fit_plan(plan, context)
        return DryRun(fitted, fit, None, f"nothing answers at {ep.base_url}")
    model = choose_model(ep.model or None, info, ep.base_url)
    fitted, fit = fit_plan(plan, context or context_from_cards(info.model_cards, model))
    timing = await probe_timing(session, dataclasses.replace(ep, model=model), fitted, launch_s=launch_s, clock=clock)
    return DryRun(fitted, fit, timing, None if timing is not None else "every probe request failed")


def dry_run_lines(d: DryRun) -> list[str | ReportWarning]:
    """What `speculab run --dry-run` prints: the plan, its size, what fitting left out (a record the CLI words), the
    estimate."""
    from speculab.commands.run.plan import describe_plan
    from speculab.harness.workload.fit import fit_warning

    note = fit_warning(d.fit)
    estimate = estimate_line(d.plan, d.timing, d.why)
    return [*describe_plan(d.plan), *size_lines(d.plan), *([note] if note else []), estimate]


def dry_run_interruptible(plan: RunPlan) -> DryRun:
    """`dry_run` on a fresh event loop; Ctrl-C stops it (a server it started is stopped)."""
    return run_interruptible(lambda stop: dry_run(plan))
