"""Per arm and load: the bench metrics pooled over repeats, achieved load, acceptance, memory, plot material.

See docs/results.md for how each number is made."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from speculab.config import ArmPrice, SloTargets
from speculab.harness import stats
from speculab.harness.analysis import cost as costlib
from speculab.harness.analysis.acceptance import acceptance_length, acceptance_rate
from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES
from speculab.harness.analysis.energy import energy_view
from speculab.harness.analysis.metrics import (
    RequestMetrics,
    RunMetrics,
    aggregate,
    endpoint_error_rate,
    quantities_not_held,
    request_metrics,
)
from speculab.harness.analysis.windows import (
    Window,
    achieved_concurrency,
    active_s,
    by_window,
    closed_loop_fraction,
    send_rate_rps,
    send_span_s,
)
from speculab.harness.design import UNKNOWN, ArmInfo, LevelSpec
from speculab.harness.records import FORCED, AcceptanceSummary, RequestRecord
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.verdict.model import AcceptanceView, ArmLevel, MemoryView, ReportOptions, Series
from speculab.harness.verdict.per_request import acceptance_positions, prefix_cache_view, request_acceptance_view

# ---------------------------------------------------------------------------------------------------------------
# Per arm and load.
# ---------------------------------------------------------------------------------------------------------------


def combine_acceptance(
    summaries: Sequence[AcceptanceSummary], launched_forced: Sequence[str] = ()
) -> AcceptanceView | None:
    """Counter-style summaries (drafts and accepted known) are summed over repeats; others averaged. Forced where
    any repeat's is (its numbers are in the sum, and they are no measurement) or the arm was started forcing it
    (`launched_forced`: ArmInfo.forced_acceptance, whatever the engine said while it ran)."""
    if not summaries:
        return None
    inactive = sum(1 for s in summaries if not s.active)
    active = [s for s in summaries if s.active]
    src = summaries[0].source
    said = tuple(dict.fromkeys([*launched_forced, *(b for s in summaries for b in s.forced_by)]))
    forced = launched_forced or any(s.forced for s in summaries)
    made: dict[str, Any] = {"provenance": FORCED, "forced_by": said} if forced else {}
    if not active:
        first = summaries[0]
        return AcceptanceView(src, False, first.drafts, first.draft_tokens, first.accepted_tokens,
                              repeats=len(summaries), inactive_repeats=inactive, **made)  # fmt: skip
    if all(s.drafts and s.accepted_tokens is not None for s in active):
        drafts = sum(float(s.drafts or 0) for s in active)
        accepted = sum(float(s.accepted_tokens or 0) for s in active)
        drafted_known = all(s.draft_tokens for s in active)
        drafted = sum(float(s.draft_tokens or 0) for s in active) if drafted_known else None
        per_pos: tuple[float, ...] = ()
        k = {len(s.per_position) for s in active}
        if len(k) == 1 and next(iter(k)) > 0:
            per_pos = tuple(
                sum(s.per_position[j] * float(s.drafts or 0) for s in active) / drafts for j in range(next(iter(k)))
            )
        return AcceptanceView(
            src,
            True,
            drafts,
            drafted,
            accepted,
            acceptance_rate(accepted, drafted),
            acceptance_length(accepted, drafts),
            per_pos,
            any(s.approximate for s in active),
            repeats=len(summaries),
            inactive_repeats=inactive,
            **made,
        )
    lengths = [s.acceptance_length for s in active if s.acceptance_length is not None]
    rates = [s.acceptance_rate for s in active if s.acceptance_rate is not None]
    return AcceptanceView(
        src,
        True,
        acceptance_rate=statistics.fmean(rates) if rates else None,
        acceptance_length=statistics.fmean(lengths) if lengths else None,
        approximate=True,
        repeats=len(summaries),
        inactive_repeats=inactive,
        **made,
    )


def send_fraction(records: Sequence[RequestRecord], windows: Sequence[Window] = ()) -> float | None:
    """Achieved send rate / scheduled rate over one repeat's blocks (1.0 = the client sent on schedule). None if no
    block has 2 sends."""
    sched = sent = 0.0
    for g in by_window(records, windows):
        s = max(r.scheduled_s for r in g) - min(r.scheduled_s for r in g)
        t = send_span_s(g)
        if len(g) < 2 or s <= 0 or t <= 0:
            continue
        sched, sent = sched + s, sent + t
    return sched / sent if sched > 0 and sent > 0 else None  # same n - 1 intervals: the spans' inverse ratio


def _not_in_file(records: Sequence[RequestRecord], runs: Sequence[RepeatRun]) -> tuple[str, ...]:
    """What the arm's files do not hold: their records' (`quantities_not_held`), and tok/s where a repeat has no
    window to divide by; each named once."""
    untimed = () if all(map(throughput_known, runs)) else ("output_tok_s",)
    return tuple(dict.fromkeys(quantities_not_held(records) + untimed))


def throughput_known(run: RepeatRun) -> bool:
    """Whether the repeat has a measured window to divide by: its records' own, or its tool's stated duration."""
    return run.duration_s is not None or not run.sends_rebuilt


def repeat_metrics(run: RepeatRun) -> RunMetrics:
    """One repeat's run-level numbers; throughput over the arm's own active time (its blocks' windows), or over the
    tool's own duration where the records' send times are rebuilt (a rebuilt gap-free closed loop is shorter than
    the run was: LLMPerf at 4 streams read up to 2x its own tok/s); NaN (no throughput) where neither exists."""
    if run.sends_rebuilt:
        duration: float | None = run.duration_s if run.duration_s is not None else math.nan
    else:
        duration = active_s(by_window(run.records, run.windows_s)) if len(run.windows_s) > 1 else None
    return aggregate(run.records, duration_s=duration)


def repeat_send_rate_rps(run: RepeatRun) -> float | None:
    """Sends per second while this arm was sending: over its own blocks."""
    return send_rate_rps(by_window(run.records, run.windows_s))


def _memory(runs: Sequence[RepeatRun]) -> MemoryView:
    def peak(vals: list[float | None]) -> float | None:
        v = [x for x in vals if x is not None]
        return max(v) if v else None

    gpu = [peak([m.gpu_bytes for m in r.memory]) for r in runs]
    rss = [peak([m.rss_bytes for m in r.memory]) for r in runs]
    kv = [m.kv_usage for r in runs for m in r.memory if m.kv_usage is not None]
    gpu_v = [g for g in gpu if g is not None]
    rss_v = [x for x in rss if x is not None]
    scope = next((r.gpu_scope for r in runs if r.gpu_scope), "")
    return MemoryView(
        gpu_peak_bytes=statistics.fmean(gpu_v) if gpu_v else None,
        gpu_scope=scope,
        rss_peak_bytes=statistics.fmean(rss_v) if rss_v else None,
        kv_usage_mean=statistics.fmean(kv) if kv else None,
        kv_usage_max=max(kv) if kv else None,
        samples=sum(len(r.memory) for r in runs),
    )


def _thin(values: Sequence[Any], n: int) -> list[Any]:
    if len(values) <= n:
        return list(values)
    idx = np.linspace(0, len(values) - 1, n).round().astype(int)
    return [values[i] for i in idx]


def _r6(x: float | None) -> float | None:
    """Plot material keeps 6 significant digits (microseconds at the scale of seconds): a smaller summary.json."""
    return None if x is None else float(f"{x:.6g}")


def _series(per: Sequence[RequestMetrics], runs: Sequence[RepeatRun], opts: ReportOptions) -> Series:
    ok = [m for m in per if m.ok and not m.warmup]
    tpc: dict[str, int] = defaultdict(int)
    for m in ok:
        for n in m.tokens_per_chunk:
            tpc[str(n)] += 1
    gaps = sorted(g for m in ok for g in m.chunk_gaps_s)
    mem = sorted(runs[0].memory, key=lambda s: s.t_s) if runs else []
    mem = _thin(mem, opts.max_series_points)
    return Series(
        ttft_s=tuple(float(f"{x:.6g}") for x in sorted(m.ttft_s for m in ok if m.ttft_s is not None)),
        tpot_s=tuple(float(f"{x:.6g}") for x in sorted(m.tpot_s for m in ok if m.tpot_s is not None)),
        e2e_s=tuple(float(f"{x:.6g}") for x in sorted(m.e2e_s for m in ok if m.e2e_s is not None)),
        chunk_gap_s=tuple(float(f"{x:.6g}") for x in _thin(gaps, opts.max_gap_points)),
        tokens_per_chunk=dict(sorted(tpc.items(), key=lambda kv: int(kv[0]))),
        memory_t_s=tuple(float(f"{s.t_s:.6g}") for s in mem),
        memory_gpu_bytes=tuple(_r6(s.gpu_bytes) for s in mem),
        memory_rss_bytes=tuple(_r6(s.rss_bytes) for s in mem),
        memory_kv_usage=tuple(_r6(s.kv_usage) for s in mem),
    )


def slo_targets(inputs: ABRun) -> SloTargets | None:
    s = inputs.setup
    if s.slo_ttft_s is None and s.slo_tpot_s is None and s.slo_e2e_s is None:
        return None
    return SloTargets(s.slo_ttft_s, s.slo_tpot_s, s.slo_e2e_s, s.slo_attainment)


def arm_price(arm: ArmInfo) -> ArmPrice | None:
    return ArmPrice(arm.usd_per_hour, arm.gpus) if arm.usd_per_hour is not None else None


def _load_runs(runs: Sequence[RepeatRun], level: LevelSpec) -> list[RepeatRun]:
    """The repeats the achieved load is measured over: those that finished; none where the file states no load (a
    `LevelSpec` kind UNKNOWN: its rebuilt sends stand for no load, so none was achieved either)."""
    return [run for run in runs if not run.interrupted] if level.kind != UNKNOWN else []


def arm_level(arm: ArmInfo, level: LevelSpec, runs: Sequence[RepeatRun], inputs: ABRun, opts: ReportOptions
              ) -> ArmLevel:  # fmt: skip
    """Pool an arm's repeats at one load: distributions over every request, throughput per repeat."""
    records = [r for run in runs for r in run.records if not r.warmup]
    per = [request_metrics(r) for r in records]
    pooled = aggregate(records)
    measured_runs = [run for run in runs if any(not r.warmup for r in run.records)]
    by_repeat = [repeat_metrics(run) for run in measured_runs]
    sent, ok = pooled.sent, pooled.ok
    # A repeat cut short (killed, Ctrl-C, a server that died) never recorded the requests it had in flight, so its
    # load looks short of the asked one: that says it was interrupted (reported as such), not that the client was
    # slow. Achieved load is measured over the repeats that finished.
    whole = _load_runs(runs, level)
    rates = (repeat_send_rate_rps(run) for run in _load_runs(measured_runs, level))
    achieved_rate = [x for x in rates if x is not None]
    conc = [c for c in (achieved_concurrency(run.records, run.windows_s) for run in whole) if c is not None]
    achieved_rate_rps = statistics.fmean(achieved_rate) if achieved_rate else None
    achieved_conc = statistics.fmean(conc) if conc else None
    if level.open_loop:
        # Against the schedule's own rate, not the nominal one: a seeded Poisson schedule of n requests is itself
        # ~1/sqrt(n) off the nominal rate, and that is the offered load, not a failure to deliver it.
        fracs = [f for f in (send_fraction(run.records, run.windows_s) for run in whole) if f is not None]
        frac = statistics.fmean(fracs) if fracs else None
    else:
        # against what the workload allowed: fewer prompts than streams keep only that many in flight
        closed = (closed_loop_fraction(run.records, level.value, run.windows_s) for run in whole)
        fracs = [f for f in closed if f is not None]
        frac = statistics.fmean(fracs) if fracs else None
    tok_s = [m.output_tok_s for m in by_repeat]
    # energy per output token over the window the throughput counts (analysis.energy)
    powered = [(run.memory, m.output_tok_s) for run, m in zip(measured_runs, by_repeat, strict=True)
               if throughput_known(run)]  # fmt: skip
    price = arm_price(arm)
    slo = slo_targets(inputs)
    attainment = None
    if slo is not None and per:
        attainment = costlib.slo_attainment(
            [(m.ttft_s, m.tpot_s, m.e2e_s) if m.ok else (None, None, None) for m in per], slo
        )
    counted = combine_acceptance([r.acceptance for r in runs if r.acceptance is not None], arm.forced_acceptance)
    return ArmLevel(
        arm=arm.name,
        repeats=len(by_repeat),
        interrupted_repeats=sum(1 for r in runs if r.interrupted),
        sent=sent,
        ok=ok,
        error=pooled.error,
        error_rate=endpoint_error_rate(pooled.error, sent, pooled.errors_by_category),
        errors_by_category=dict(pooled.errors_by_category),
        first_error=next((f"{r.error.category.value}: {r.error.message}" for r in records if r.error is not None), "")[
            :300
        ],
        requested_rate_rps=level.requested_rate_rps,
        achieved_rate_rps=achieved_rate_rps,
        achieved_concurrency=achieved_conc,
        load_fraction=frac,
        distributions=dict(pooled.distributions),
        client_cpu_share=_worst(run.client.get("cpu_share") for run in runs if run.client),
        client_loop_lag_p99_s=_worst(run.client.get("loop_lag_p99_s") for run in runs if run.client),
        requests_per_s=stats.t_interval([m.requests_per_s for m in by_repeat]),
        output_tok_s=stats.t_interval(tok_s),
        total_tok_s=stats.t_interval([m.total_tok_s for m in by_repeat]),
        usd_per_mtok=costlib.cost_interval(tok_s, price) if price is not None and tok_s else None,
        slo_attainment=attainment,
        stalled_requests=pooled.stalled_requests,
        not_in_file=_not_in_file(records, runs),
        repeat_tok_s=tuple(
            (run.repeat, run.order, m.output_tok_s) for run, m in zip(measured_runs, by_repeat, strict=True)
        ),
        token_count_sources=dict(pooled.token_count_sources),
        acceptance=counted,
        memory=_memory(runs),
        series=_series(per, runs, opts),
        request_acceptance=request_acceptance_view(runs, inputs.setup.items),
        prefix_cache=prefix_cache_view(runs, arm.engine),
        energy=energy_view(powered, inputs.setup.usd_per_kwh),
        cache_resets=dict(Counter(r.outcome for run in runs for r in run.cache_resets)),
        acceptance_positions=acceptance_positions(runs, counted),
    )


def over_repeats(iv: stats.Interval) -> stats.Interval:
    """A candidate/baseline ratio over repeats (throughput, cost), withheld below MIN_LAUNCHES repeats: the estimate
    kept, the bounds NaN, as with one repeat. From 2 repeats a t-interval has 1 degree of freedom, ×12.7 the standard
    error each side: a throughput change of +108 % [−91 %…+4,825 %] says nothing, so the report says why it has
    none."""
    if iv.n >= MIN_LAUNCHES:
        return iv
    # math.nan itself, as summary.json reads a null back (harness.results.codec): a re-read report equals the model
    return stats.Interval(iv.estimate, math.nan, math.nan, iv.confidence, iv.method, iv.n)


def _worst(values: Iterable[float | None]) -> float | None:
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return max(finite) if finite else None
