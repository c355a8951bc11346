"""Per arm and load: pooled bench metrics, acceptance, memory; per load and candidate: paired comparisons and gates.

See docs/results.md for how each number is made."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from speculab.config import ArmPrice, SloTargets
from speculab.harness.analysis import cost as costlib
from speculab.harness.analysis import stats
from speculab.harness.analysis.metrics import (
    RequestMetrics,
    RunMetrics,
    aggregate,
    endpoint_error_rate,
    exceeds_error_rate,
    request_metrics,
)
from speculab.harness.analysis.paired import MetricComparison, compare_paired, concurrent_groups, diverged_indices
from speculab.harness.analysis.windows import (
    Window,
    achieved_concurrency,
    active_s,
    by_window,
    send_rate_rps,
    send_span_s,
)
from speculab.harness.load.client_health import client_fell_behind
from speculab.harness.records import RequestRecord
from speculab.harness.results.ab_inputs import ArmInfo, LevelSpec, RepeatRun, ReportInputs
from speculab.harness.servers.acceptance import AcceptanceSummary
from speculab.report.per_request import (
    acceptance_vs_speedup,
    hit_rate_change,
    prefix_cache_view,
    request_acceptance_view,
)
from speculab.report.schema import (
    PAIRED_METRICS,
    AcceptanceView,
    ArmLevel,
    LevelComparison,
    MemoryView,
    Ratio,
    ReportOptions,
    Series,
)

# ---------------------------------------------------------------------------------------------------------------
# Per arm and load.
# ---------------------------------------------------------------------------------------------------------------


def combine_acceptance(summaries: Sequence[AcceptanceSummary]) -> AcceptanceView | None:
    """Counter-style summaries (drafts and accepted known) are summed over repeats; others averaged."""
    if not summaries:
        return None
    inactive = sum(1 for s in summaries if not s.active)
    active = [s for s in summaries if s.active]
    src = summaries[0].source
    if not active:
        first = summaries[0]
        return AcceptanceView(src, False, first.drafts, first.draft_tokens, first.accepted_tokens,
                              repeats=len(summaries), inactive_repeats=inactive)  # fmt: skip
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
            accepted / drafted if drafted else None,
            1.0 + accepted / drafts,
            per_pos,
            any(s.approximate for s in active),
            len(summaries),
            inactive,
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


def repeat_metrics(run: RepeatRun) -> RunMetrics:
    """One repeat's run-level numbers; throughput over the arm's own active time (its blocks' windows)."""
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


def slo_targets(inputs: ReportInputs) -> SloTargets | None:
    s = inputs.setup
    if s.slo_ttft_s is None and s.slo_tpot_s is None and s.slo_e2e_s is None:
        return None
    return SloTargets(s.slo_ttft_s, s.slo_tpot_s, s.slo_e2e_s, s.slo_attainment)


def arm_price(arm: ArmInfo) -> ArmPrice | None:
    return ArmPrice(arm.usd_per_hour, arm.gpus) if arm.usd_per_hour is not None else None


def arm_level(arm: ArmInfo, level: LevelSpec, runs: Sequence[RepeatRun], inputs: ReportInputs, opts: ReportOptions
              ) -> ArmLevel:  # fmt: skip
    """Pool an arm's repeats at one load: distributions over every request, throughput per repeat."""
    records = [r for run in runs for r in run.records if not r.warmup]
    per = [request_metrics(r) for r in records]
    pooled = aggregate(records)
    measured_runs = [run for run in runs if any(not r.warmup for r in run.records)]
    by_repeat = [repeat_metrics(run) for run in measured_runs]
    sent, ok = pooled.sent, pooled.ok
    achieved_rate = [x for x in (repeat_send_rate_rps(run) for run in measured_runs) if x is not None]
    conc = [c for c in (achieved_concurrency(run.records, run.windows_s) for run in runs) if c is not None]
    achieved_rate_rps = statistics.fmean(achieved_rate) if achieved_rate else None
    achieved_conc = statistics.fmean(conc) if conc else None
    if level.open_loop:
        # Against the schedule's own rate, not the nominal one: a seeded Poisson schedule of n requests is itself
        # ~1/sqrt(n) off the nominal rate, and that is the offered load, not a failure to deliver it.
        fracs = [f for f in (send_fraction(run.records, run.windows_s) for run in runs) if f is not None]
        frac = statistics.fmean(fracs) if fracs else None
    else:
        frac = achieved_conc / level.value if achieved_conc is not None else None
    tok_s = [m.output_tok_s for m in by_repeat]
    price = arm_price(arm)
    slo = slo_targets(inputs)
    attainment = None
    if slo is not None and per:
        attainment = costlib.slo_attainment(
            [(m.ttft_s, m.tpot_s, m.e2e_s) if m.ok else (None, None, None) for m in per], slo
        )
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
        repeat_tok_s=tuple(
            (run.repeat, run.order, m.output_tok_s) for run, m in zip(measured_runs, by_repeat, strict=True)
        ),
        token_count_sources=dict(pooled.token_count_sources),
        acceptance=combine_acceptance([r.acceptance for r in runs if r.acceptance is not None]),
        memory=_memory(runs),
        series=_series(per, runs, opts),
        request_acceptance=request_acceptance_view(runs, inputs.setup.items),
        prefix_cache=prefix_cache_view(runs, arm.engine),
    )


# ---------------------------------------------------------------------------------------------------------------
# Per load: paired comparisons and gates.
# ---------------------------------------------------------------------------------------------------------------


def per_prompt(runs: Sequence[RepeatRun], metric: str) -> dict[int, float]:
    """Prompt index -> the median over repeats of one per-request metric (successful requests only)."""
    values: dict[int, list[float]] = defaultdict(list)
    for run in runs:
        for r in run.records:
            if r.warmup or not r.ok:
                continue
            m = request_metrics(r)
            v = getattr(m, metric) if metric != "itl_s" else (statistics.fmean(m.itl_s) if m.itl_s else None)
            if v is not None:
                values[r.index].append(float(v))
    return {i: statistics.median(v) for i, v in values.items()}


def ratio_of(c: MetricComparison) -> Ratio:
    lo, hi = c.speedup_interval
    return Ratio(
        c.metric,
        c.n_pairs,
        c.n_dropped,
        c.geomean_ratio,
        c.median_ratio,
        c.speedup,
        lo,
        hi,
        c.wilcoxon_p,
        c.verdict.value,
        c.min_detectable_change,
        c.note,
        c.n_units,
        c.group_size,
    )


def _worst(values: Iterable[float | None]) -> float | None:
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return max(finite) if finite else None


def group_size(level: LevelSpec, base: ArmLevel | None = None, cand: ArmLevel | None = None) -> int:
    """How many prompts ran at the same time at this load: the concurrency of a closed loop; for a rate, the
    larger of the two arms' measured requests in flight (Little's law at work), rounded; at least 1."""
    if level.kind == "concurrency":
        return max(1, round(level.value))
    conc = [a.achieved_concurrency for a in (base, cand) if a is not None and a.achieved_concurrency is not None]
    return max(1, round(max(conc))) if conc else 1


def prompt_groups(inputs: ReportInputs, size: int) -> dict[int, int] | None:
    """Prompt index -> group of `size` prompts sent one after another (every arm sends the workload in its order;
    a conversation's turns are one unit); None at size 1. See analysis.paired.concurrent_groups."""
    if size <= 1:
        return None
    items = inputs.setup.items
    units = {it.index: it.conversation_id for it in items if it.conversation_id is not None}
    return concurrent_groups([it.index for it in items], size, units)


def paired_per_prompt(cand_runs: Sequence[RepeatRun], base_runs: Sequence[RepeatRun], metric: str
                      ) -> tuple[dict[int, float], dict[int, float], frozenset[int]]:  # fmt: skip
    """(candidate, baseline) per-prompt values of one metric, without the conversation turns whose context
    differed between the arms (or repeats), and those left-out indices. Every paired comparison reads this."""
    diverged = diverged_indices(r for run in (*cand_runs, *base_runs) for r in run.records)
    cand, base = per_prompt(cand_runs, metric), per_prompt(base_runs, metric)
    if diverged:
        cand = {i: v for i, v in cand.items() if i not in diverged}
        base = {i: v for i, v in base.items() if i not in diverged}
    return cand, base, diverged


def _gate(level: LevelSpec, base: ArmLevel | None, cand: ArmLevel | None, cand_label: str, opts: ReportOptions
          ) -> tuple[str, str]:  # fmt: skip
    """(gate, reason). "ok" when a verdict may be given."""
    if base is None or base.repeats == 0 or cand is None or cand.repeats == 0:
        which = "baseline" if base is None or base.repeats == 0 else cand_label
        return "missing", f"no {which} runs at {level.label}"
    for side, a in (("baseline", base), (cand_label, cand)):
        if exceeds_error_rate(a.error_rate, opts.max_error_rate):
            first = f"; first: {a.first_error}" if a.first_error else ""
            failed = a.error - a.errors_by_category.get("cancelled", 0)
            counted = a.sent - a.errors_by_category.get("cancelled", 0)
            return "errors", (
                f"{side} error rate {a.error_rate:.1%} ({failed} of {counted}) is above the {opts.max_error_rate:.0%} "
                f"gate{first}"
            )
    acc = cand.acceptance
    if acc is not None and not acc.active:
        drafts = f"{acc.drafts:g} drafts" if acc.drafts is not None else "no drafts"
        return "not active", f"{drafts} reported by {acc.source}: the candidate did not speculate"
    for side, a in (("baseline", base), (cand_label, cand)):
        if a.load_fraction is not None and a.load_fraction < opts.min_load_fraction:
            if level.open_loop:
                asked = (
                    f"of {level.value:g} requested"
                    if level.kind == "rate"
                    else f"replaying the trace at ×{level.value:g}"
                )
                got = f"{a.achieved_rate_rps:.3g} req/s sent {asked}, {a.load_fraction:.0%} of the schedule's rate"
            else:
                got = (
                    f"{a.achieved_concurrency:.3g} requests in flight of {level.value:g} requested "
                    f"({a.load_fraction:.0%})"
                )
            return "load not achieved", (
                f"{side}: {got} (gate {opts.min_load_fraction:.0%}); "
                "raise max_concurrency or use a faster client machine"
            )
    for side, a in (("baseline", base), (cand_label, cand)):
        if client_fell_behind(a.client_cpu_share, a.client_loop_lag_p99_s):
            return "load not achieved", (
                f"{side}: the client fell behind (CPU {a.client_cpu_share:.0%} of a core, event-loop lag p99 "
                f"{(a.client_loop_lag_p99_s or 0) * 1e3:.1f} ms): its timings carry that delay; run the client on a "
                "bigger or less loaded machine, or lower the load per client process"
            )
    return "ok", ""


def _repeat_tok_s(runs: Sequence[RepeatRun]) -> dict[int, float]:
    return {run.repeat: repeat_metrics(run).output_tok_s for run in runs if any(not r.warmup for r in run.records)}


def _memory_delta(base: ArmLevel, cand: ArmLevel) -> tuple[float | None, str]:
    if base.memory.gpu_peak_bytes is not None and cand.memory.gpu_peak_bytes is not None:
        return cand.memory.gpu_peak_bytes - base.memory.gpu_peak_bytes, "gpu"
    if base.memory.rss_peak_bytes is not None and cand.memory.rss_peak_bytes is not None:
        return cand.memory.rss_peak_bytes - base.memory.rss_peak_bytes, "rss"
    return None, ""


def compare_level(
    level: LevelSpec,
    cand_arm: ArmInfo,
    base_arm: ArmInfo,
    arms: Mapping[str, ArmLevel],
    inputs: ReportInputs,
    rng: np.random.Generator,
    opts: ReportOptions,
) -> LevelComparison:
    base, cand = arms.get(base_arm.name), arms.get(cand_arm.name)
    gate, reason = _gate(level, base, cand, cand_arm.label, opts)
    if gate == "missing" or base is None or cand is None:
        return LevelComparison(cand_arm.name, gate, reason, f"no verdict: {reason}", (), None, None, None, "")
    b_runs, c_runs = inputs.runs_for(base_arm.name, level.key), inputs.runs_for(cand_arm.name, level.key)
    ratios = []
    values: dict[str, tuple[dict[int, float], dict[int, float]]] = {}
    size = group_size(level, base, cand)
    groups = prompt_groups(inputs, size)
    diverged: frozenset[int] = frozenset()
    for metric in (*PAIRED_METRICS, "itl_s"):
        cand_values, base_values, diverged = paired_per_prompt(c_runs, b_runs, metric)
        values[metric] = (cand_values, base_values)
        c = compare_paired(metric, *values[metric], rng, n_resamples=opts.n_resamples, groups=groups, group_size=size,
                           confidence=opts.confidence)  # fmt: skip
        ratios.append(ratio_of(c))
    breakdown = _Breakdown(values["tpot_s"], rng, opts, groups, size)
    by_category = breakdown(_categories(inputs))
    by_turn = breakdown(_turns(inputs))
    by_length = breakdown(_prompt_lengths(per_prompt(b_runs, "prompt_tokens")))
    b_tok, c_tok = _repeat_tok_s(b_runs), _repeat_tok_s(c_runs)
    common = sorted(set(b_tok) & set(c_tok))
    tput = cost_ratio = None
    if common:
        tput = stats.repeat_ratio_interval([c_tok[j] for j in common], [b_tok[j] for j in common])
        bp, cp = arm_price(base_arm), arm_price(cand_arm)
        if bp is not None and cp is not None and bp.replica_usd_per_hour > 0:
            cost_ratio = costlib.cost_ratio_interval([c_tok[j] for j in common], [b_tok[j] for j in common], cp, bp)
    mem, kind = _memory_delta(base, cand)
    if gate == "not active":
        verdict = "speculation not active"
    elif gate != "ok":
        verdict = f"no verdict: {reason}"
    else:
        verdict = ratios[0].verdict
    cand_tpot, base_tpot = values["tpot_s"]
    return LevelComparison(
        cand_arm.name, gate, reason, verdict, tuple(ratios), tput, cost_ratio, mem, kind, by_category,
        acceptance_speedup=acceptance_vs_speedup(c_runs, base_tpot, cand_tpot, inputs.setup.items),
        prefix_cache=hit_rate_change(base, cand),
        by_turn=by_turn, by_prompt_length=by_length, diverged=len(diverged),
    )  # fmt: skip


class _Breakdown:
    """TPOT speedup per subset of prompts (category, turn, prompt-length bucket), each subset paired and judged like
    the whole load; a subset's prompts keep the level's groups (those sent together are one unit)."""

    def __init__(self, tpot: tuple[dict[int, float], dict[int, float]], rng: np.random.Generator,
                 opts: ReportOptions, groups: dict[int, int] | None, size: int):  # fmt: skip
        self.tpot, self.rng, self.opts, self.groups, self.size = tpot, rng, opts, groups, size

    def __call__(self, subsets: Sequence[tuple[str, set[int]]]) -> tuple[Ratio, ...]:
        """`subsets`: (label, indices) in display order; nothing when fewer than two subsets (the whole load)."""
        if len(subsets) < 2:
            return ()
        cand, base = self.tpot
        out = []
        for label, idx in subsets:
            c = compare_paired(
                label,
                {i: v for i, v in cand.items() if i in idx},
                {i: v for i, v in base.items() if i in idx},
                self.rng,
                n_resamples=self.opts.n_resamples,
                groups=self.groups,
                group_size=self.size,
                confidence=self.opts.confidence,
            )
            out.append(ratio_of(c))
        return tuple(out)


def _categories(inputs: ReportInputs) -> list[tuple[str, set[int]]]:
    """Workload categories (input-grounded prompts are where n-gram drafts hit), by name."""
    cats: dict[str, set[int]] = defaultdict(set)
    for it in inputs.setup.items:
        if it.category:
            cats[it.category].add(it.index)
    return sorted(cats.items())


def _turns(inputs: ReportInputs) -> list[tuple[str, set[int]]]:
    """Conversation turns ("turn 1", "turn 2", ...; single-turn items count as turn 1), when there are turns > 1."""
    turns: dict[int, set[int]] = defaultdict(set)
    for it in inputs.setup.items:
        turns[it.turn or 1].add(it.index)
    return [(f"turn {t}", idx) for t, idx in sorted(turns.items())] if len(turns) > 1 else []


# Prompt-length buckets, tokens (the server's prompt_tokens, baseline median over repeats): fixed edges, so two runs'
# buckets compare; acceptance decays with long context, and users gate speculation by length.
PROMPT_LENGTH_EDGES = (128, 512, 2048, 8192, 32768)


def prompt_length_bucket(tokens: float) -> int:
    """The bucket of a prompt of `tokens` tokens: 0 for < 128, 1 for 128-511, ..., 5 for >= 32768."""
    return sum(tokens >= e for e in PROMPT_LENGTH_EDGES)


def prompt_length_label(bucket: int) -> str:
    edges = (0, *PROMPT_LENGTH_EDGES)
    if bucket == len(PROMPT_LENGTH_EDGES):
        return f">= {edges[-1]:,} prompt tokens"
    return f"{edges[bucket]:,}-{edges[bucket + 1] - 1:,} prompt tokens"


def _prompt_lengths(prompt_tokens: Mapping[int, float]) -> list[tuple[str, set[int]]]:
    buckets: dict[int, set[int]] = defaultdict(set)
    for i, n in prompt_tokens.items():
        buckets[prompt_length_bucket(n)].add(i)
    return [(prompt_length_label(b), idx) for b, idx in sorted(buckets.items())]
