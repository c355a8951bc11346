"""The A/B report: every number computed once, from `ReportInputs`, by pure functions. to/from summary.json.

`build_report(inputs)` is the only entry point. Presentation (console, HTML) reads a `Report` and formats; it never
computes. How each number is made (docs/report.md has the long form):

* per arm and load: the bench metrics (`bench.metrics`) over the measured requests of every repeat, pooled;
  throughput per repeat with a t-interval over repeats.
* per load and candidate: paired per-prompt ratios of TPOT, E2E, TTFT and mean ITL (`bench.stats.compare_paired`).
  With several repeats each prompt's value is the median over its repeats in that arm (one pair per prompt, so the
  bootstrap resamples prompts, the independent unit).
* gates, in this order: runs missing; error rate above the gate; no drafts (-> "speculation not active", never
  "no difference"); offered load not achieved (achieved < 95% of requested). A gated load has no verdict.
* crossover over the loads of one axis; what-if from per-position acceptance; cost and capacity from `bench.cost`;
  correctness (checks, McNemar, output equivalence with divergence classification) in `report.correctness`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from speculab.bench import cost as costlib
from speculab.bench import stats
from speculab.bench import whatif as whatiflib
from speculab.bench.engines.acceptance import AcceptanceSummary
from speculab.bench.metrics import RequestMetrics, aggregate, request_metrics
from speculab.bench.records import RequestRecord
from speculab.bench.stats import Distribution, Interval
from speculab.report.codec import from_data, to_data
from speculab.report.correctness import CorrectnessComparison, CorrectnessOptions, compare_correctness
from speculab.report.inputs import ArmInfo, LevelSpec, RepeatRun, ReportInputs

REPORT_SCHEMA = "speculab.report.summary/1"

# Paired metrics, in the order the report shows them. ITL is each request's mean per-token gap after the first
# token; TPOT is the headline (speculation's promise is fewer seconds per output token).
PAIRED_METRICS = ("tpot_s", "e2e_s", "ttft_s")
METRIC_LABELS = {"tpot_s": "TPOT", "e2e_s": "E2E", "ttft_s": "TTFT", "itl_s": "ITL"}


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """Knobs of the analysis; defaults are what `speculab run` uses."""

    max_error_rate: float = 0.02  # above this in either arm: no verdict at that load
    min_load_fraction: float = 0.95  # achieved load below this fraction of the requested: no verdict
    seed: int = 0  # bootstrap RNG seed: a re-rendered report gives the same intervals
    n_resamples: int = stats.N_RESAMPLES
    correctness: CorrectnessOptions = field(default_factory=CorrectnessOptions)
    max_series_points: int = 400  # memory time series are thinned to this many points per repeat
    max_gap_points: int = 2000  # chunk gaps kept per arm and load for the histogram (evenly spaced quantiles)


# ---------------------------------------------------------------------------------------------------------------
# The report's parts. Plain frozen dataclasses of numbers and strings: summary.json is `to_data(report)`.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AcceptanceView:
    """Acceptance combined over repeats: counters summed (exact), gauges averaged (approximate)."""

    source: str
    active: bool
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = None
    acceptance_length: float | None = None  # tokens per verification step, bonus token included
    per_position: tuple[float, ...] = ()
    approximate: bool = False
    repeats: int = 0
    inactive_repeats: int = 0


@dataclass(frozen=True, slots=True)
class MemoryView:
    """Peaks per repeat, averaged over repeats. Bytes; kv_usage is a fraction."""

    gpu_peak_bytes: float | None = None
    gpu_scope: str = ""  # "process" or "device"
    rss_peak_bytes: float | None = None
    kv_usage_mean: float | None = None
    kv_usage_max: float | None = None
    samples: int = 0


@dataclass(frozen=True, slots=True)
class Series:
    """Plot material, kept in summary.json so `speculab report` and the HTML need nothing else."""

    ttft_s: tuple[float, ...] = ()  # one per successful request, pooled over repeats
    tpot_s: tuple[float, ...] = ()
    e2e_s: tuple[float, ...] = ()
    chunk_gap_s: tuple[float, ...] = ()  # thinned to at most 5000 values
    tokens_per_chunk: Mapping[str, int] = field(default_factory=dict)  # "3" -> number of chunks with 3 tokens
    memory_t_s: tuple[float, ...] = ()  # first repeat, thinned
    memory_gpu_bytes: tuple[float | None, ...] = ()
    memory_rss_bytes: tuple[float | None, ...] = ()
    memory_kv_usage: tuple[float | None, ...] = ()


@dataclass(frozen=True, slots=True)
class ArmLevel:
    """One arm at one load level, repeats pooled."""

    arm: str
    repeats: int  # repeats with records
    interrupted_repeats: int
    sent: int
    ok: int
    error: int
    error_rate: float
    errors_by_category: Mapping[str, int]
    requested_rate_rps: float | None
    achieved_rate_rps: float | None  # send rate actually achieved (rate loads), mean over repeats
    achieved_concurrency: float | None  # time-weighted in-flight requests while sending (closed loops)
    load_fraction: float | None  # achieved / requested (rate or concurrency)
    distributions: Mapping[str, Distribution]  # bench metric -> distribution, seconds (tokens for counts)
    requests_per_s: Interval
    output_tok_s: Interval
    total_tok_s: Interval
    usd_per_mtok: Interval | None  # $ per 1M output tokens, interval from repeats
    slo_attainment: float | None  # fraction of requests meeting every SLO limit; None without SLOs
    stalled_requests: int
    token_count_sources: Mapping[str, int]
    acceptance: AcceptanceView | None
    memory: MemoryView
    series: Series


@dataclass(frozen=True, slots=True)
class Ratio:
    """A paired candidate/baseline comparison of one metric (stats.MetricComparison, flattened)."""

    metric: str
    n_pairs: int
    n_dropped: int
    ratio: Interval  # geometric-mean ratio candidate/baseline, BCa interval
    median_ratio: Interval
    speedup: float  # baseline/candidate for time metrics (> 1 = faster)
    speedup_low: float
    speedup_high: float
    wilcoxon_p: float
    verdict: str  # faster | slower | no detectable difference | not enough paired data
    min_detectable_change: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class LevelComparison:
    """One candidate vs the baseline at one load."""

    candidate: str
    gate: str  # "ok" | "missing" | "errors" | "not active" | "load not achieved"
    gate_reason: str
    verdict: str  # the TPOT verdict, or the gate's: "speculation not active", "no verdict: ..."
    metrics: tuple[Ratio, ...]
    throughput_ratio: Interval | None  # output tok/s candidate/baseline, paired by repeat
    cost_ratio: Interval | None  # $ per 1M tokens candidate/baseline (0.62 = 38% cheaper)
    memory_delta_bytes: float | None  # candidate - baseline peak
    memory_kind: str  # "gpu" or "rss" or ""
    by_category: tuple[Ratio, ...] = ()  # TPOT per workload category; Ratio.metric holds the category name

    def metric(self, name: str) -> Ratio | None:
        return next((m for m in self.metrics if m.metric == name), None)


@dataclass(frozen=True, slots=True)
class LevelReport:
    key: str
    label: str
    kind: str
    value: float
    roles: tuple[str, ...]
    arms: tuple[ArmLevel, ...]
    comparisons: tuple[LevelComparison, ...]

    def arm(self, name: str) -> ArmLevel | None:
        return next((a for a in self.arms if a.arm == name), None)

    def comparison(self, candidate: str) -> LevelComparison | None:
        return next((c for c in self.comparisons if c.candidate == candidate), None)


@dataclass(frozen=True, slots=True)
class CrossoverView:
    axis: str  # "concurrency" or "rate"
    loads: tuple[float, ...]
    speedups: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    status: str
    load: float | None
    low: float | None
    high: float | None
    low_censored: bool
    high_censored: bool
    method: str
    scale: str
    excluded: tuple[str, ...] = ()  # loads left out (gated), with why


@dataclass(frozen=True, slots=True)
class KRow:
    k: int
    expected_tokens: float
    speedup: float
    model: str


@dataclass(frozen=True, slots=True)
class WhatIfView:
    level: str  # LevelSpec.key where acceptance and the observed speedup came from
    level_label: str
    per_position: tuple[float, ...]
    alpha: float
    profile_source: str
    step_cost: float
    step_cost_source: str
    rows: tuple[KRow, ...]
    recommended_k: int
    observed_k: int | None
    observed_speedup: float | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlanSide:
    goodput_rps_per_replica: float | None
    replicas: int | None
    gpus: int | None
    usd_per_month: float | None


@dataclass(frozen=True, slots=True)
class PlanView:
    target_rate_rps: float
    axis: str
    baseline: PlanSide
    candidate: PlanSide
    monthly_difference_usd: float | None
    gpu_difference: int | None
    hours_per_month: float = costlib.HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class CandidateReport:
    """Everything about one candidate arm against the baseline, across loads."""

    name: str
    label: str
    verdict_line: str  # hyperfine-style one-liner
    acceptance: AcceptanceView | None  # at the low load (batching changes nothing about acceptance in principle)
    crossover: CrossoverView | None
    what_if: tuple[WhatIfView, ...]
    plan: PlanView | None
    correctness: CorrectnessComparison | None
    single_change: bool | None
    diff_lines: tuple[str, ...]
    change_note: str


@dataclass(frozen=True, slots=True)
class ArmView:
    name: str
    label: str
    engine: str
    url: str
    command: tuple[str, ...] | None
    method: str | None
    num_speculative_tokens: int | None
    usd_per_hour: float | None
    gpus: int
    cold_start_ready_s: float | None
    cold_start_first_token_s: float | None
    server_info_json: str  # what the server reported about itself, as JSON text (two-URL mode)


@dataclass(frozen=True, slots=True)
class SetupView:
    name: str
    workload_name: str
    workload_source: str
    api: str
    prompts: int
    categories: Mapping[str, int]
    temperature: float
    top_p: float
    top_k: int | None
    seed: int
    max_tokens: int
    min_tokens: int | None
    ignore_eos: bool
    repeats: int
    levels: tuple[str, ...]  # labels, in run order, with roles
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_e2e_s: float | None
    slo_attainment: float
    target_rate_rps: float | None
    two_url_mode: bool
    started_utc: str
    finished_utc: str
    versions: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Report:
    schema: str
    title: str
    setup: SetupView
    arms: tuple[ArmView, ...]
    levels: tuple[LevelReport, ...]
    candidates: tuple[CandidateReport, ...]
    warnings: tuple[str, ...]  # actionable, most important first
    missing: tuple[str, ...]  # planned runs that are absent ("ngram-k4 at concurrency 16: no runs")
    interrupted: bool
    diagnosis: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def level(self, key: str) -> LevelReport | None:
        return next((lv for lv in self.levels if lv.key == key), None)

    def candidate(self, name: str) -> CandidateReport | None:
        return next((c for c in self.candidates if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return to_data(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Report:
        d = json.loads(text)
        if d.get("schema") != REPORT_SCHEMA:
            raise ValueError(f"not a speculab A/B summary (schema {d.get('schema')!r}, want {REPORT_SCHEMA})")
        return from_data(cls, d)


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


def achieved_concurrency(records: Sequence[RequestRecord]) -> float | None:
    """Time-weighted mean of requests in flight between the first and the last send (closed loop: the client
    refills a slot as soon as one frees, so this equals the requested concurrency unless the client fell behind).
    None when every request was sent at once (nothing to measure)."""
    recs = [r for r in records if not r.warmup]
    if len(recs) < 2:
        return None
    t0 = min(r.sent_s for r in recs)
    t1 = max(r.sent_s for r in recs)
    if t1 <= t0:
        return None
    busy = sum(max(0.0, min(r.end_s, t1) - max(r.sent_s, t0)) for r in recs)
    return busy / (t1 - t0)


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


def _slo(inputs: ReportInputs) -> costlib.SloTargets | None:
    s = inputs.setup
    if s.slo_ttft_s is None and s.slo_tpot_s is None and s.slo_e2e_s is None:
        return None
    return costlib.SloTargets(s.slo_ttft_s, s.slo_tpot_s, s.slo_e2e_s, s.slo_attainment)


def _price(arm: ArmInfo) -> costlib.ArmPrice | None:
    return costlib.ArmPrice(arm.usd_per_hour, arm.gpus) if arm.usd_per_hour is not None else None


def arm_level(arm: ArmInfo, level: LevelSpec, runs: Sequence[RepeatRun], inputs: ReportInputs, opts: ReportOptions
              ) -> ArmLevel:  # fmt: skip
    """Pool an arm's repeats at one load: distributions over every request, throughput per repeat."""
    records = [r for run in runs for r in run.records if not r.warmup]
    per = [request_metrics(r) for r in records]
    pooled = aggregate(records)
    by_repeat = [aggregate(run.records) for run in runs if any(not r.warmup for r in run.records)]
    sent, ok = pooled.sent, pooled.ok
    achieved_rate = [m.achieved_rate_rps for m in by_repeat if m.achieved_rate_rps is not None]
    conc = [c for c in (achieved_concurrency(run.records) for run in runs) if c is not None]
    achieved_rate_rps = statistics.fmean(achieved_rate) if achieved_rate else None
    achieved_conc = statistics.fmean(conc) if conc else None
    if level.kind == "rate":
        frac = achieved_rate_rps / level.value if achieved_rate_rps is not None else None
    else:
        frac = achieved_conc / level.value if achieved_conc is not None else None
    tok_s = [m.output_tok_s for m in by_repeat]
    price = _price(arm)
    slo = _slo(inputs)
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
        error_rate=pooled.error / sent if sent else math.nan,
        errors_by_category=dict(pooled.errors_by_category),
        requested_rate_rps=level.requested_rate_rps,
        achieved_rate_rps=achieved_rate_rps,
        achieved_concurrency=achieved_conc,
        load_fraction=frac,
        distributions=dict(pooled.distributions),
        requests_per_s=stats.t_interval([m.requests_per_s for m in by_repeat]),
        output_tok_s=stats.t_interval(tok_s),
        total_tok_s=stats.t_interval([m.total_tok_s for m in by_repeat]),
        usd_per_mtok=costlib.cost_interval(tok_s, price) if price is not None and tok_s else None,
        slo_attainment=attainment,
        stalled_requests=pooled.stalled_requests,
        token_count_sources=dict(pooled.token_count_sources),
        acceptance=combine_acceptance([r.acceptance for r in runs if r.acceptance is not None]),
        memory=_memory(runs),
        series=_series(per, runs, opts),
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


def _ratio(c: stats.MetricComparison) -> Ratio:
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
    )


def _gate(level: LevelSpec, base: ArmLevel | None, cand: ArmLevel | None, cand_label: str, opts: ReportOptions
          ) -> tuple[str, str]:  # fmt: skip
    """(gate, reason). "ok" when a verdict may be given."""
    if base is None or base.repeats == 0 or cand is None or cand.repeats == 0:
        which = "baseline" if base is None or base.repeats == 0 else cand_label
        return "missing", f"no {which} runs at {level.label}"
    for side, a in (("baseline", base), (cand_label, cand)):
        if a.error_rate > opts.max_error_rate:
            return "errors", (
                f"{side} error rate {a.error_rate:.1%} ({a.error} of {a.sent}) is above the {opts.max_error_rate:.0%} "
                "gate"
            )
    acc = cand.acceptance
    if acc is not None and not acc.active:
        drafts = f"{acc.drafts:g} drafts" if acc.drafts is not None else "no drafts"
        return "not active", f"{drafts} reported by {acc.source}: the candidate did not speculate"
    for side, a in (("baseline", base), (cand_label, cand)):
        if a.load_fraction is not None and a.load_fraction < opts.min_load_fraction:
            if level.kind == "rate":
                got = f"{a.achieved_rate_rps:.3g} req/s sent of {level.value:g} requested"
            else:
                got = f"{a.achieved_concurrency:.3g} requests in flight of {level.value:g} requested"
            return "load not achieved", (
                f"{side}: {got} ({a.load_fraction:.0%}; gate {opts.min_load_fraction:.0%}); "
                "raise max_concurrency or use a faster client machine"
            )
    return "ok", ""


def _repeat_tok_s(runs: Sequence[RepeatRun]) -> dict[int, float]:
    return {run.repeat: aggregate(run.records).output_tok_s for run in runs if any(not r.warmup for r in run.records)}


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
    for metric in (*PAIRED_METRICS, "itl_s"):
        values[metric] = (per_prompt(c_runs, metric), per_prompt(b_runs, metric))
        c = stats.compare_paired(metric, *values[metric], rng, n_resamples=opts.n_resamples)
        ratios.append(_ratio(c))
    by_category = _by_category(values["tpot_s"], inputs, rng, opts)
    b_tok, c_tok = _repeat_tok_s(b_runs), _repeat_tok_s(c_runs)
    common = sorted(set(b_tok) & set(c_tok))
    tput = cost_ratio = None
    if common:
        tput = stats.repeat_ratio_interval([c_tok[j] for j in common], [b_tok[j] for j in common])
        bp, cp = _price(base_arm), _price(cand_arm)
        if bp is not None and cp is not None and bp.replica_usd_per_hour > 0:
            cost_ratio = costlib.cost_ratio_interval([c_tok[j] for j in common], [b_tok[j] for j in common], cp, bp)
    mem, kind = _memory_delta(base, cand)
    if gate == "not active":
        verdict = "speculation not active"
    elif gate != "ok":
        verdict = f"no verdict: {reason}"
    else:
        verdict = ratios[0].verdict
    return LevelComparison(
        cand_arm.name, gate, reason, verdict, tuple(ratios), tput, cost_ratio, mem, kind, by_category
    )


def _by_category(tpot: tuple[dict[int, float], dict[int, float]], inputs: ReportInputs, rng: np.random.Generator,
                 opts: ReportOptions) -> tuple[Ratio, ...]:  # fmt: skip
    """TPOT speedup per workload category (input-grounded prompts are where n-gram drafts hit). metric = category."""
    cats: dict[str, set[int]] = defaultdict(set)
    for it in inputs.setup.items:
        if it.category:
            cats[it.category].add(it.index)
    if len(cats) < 2:
        return ()
    cand, base = tpot
    out = []
    for cat, idx in sorted(cats.items()):
        c = stats.compare_paired(
            cat,
            {i: v for i, v in cand.items() if i in idx},
            {i: v for i, v in base.items() if i in idx},
            rng,
            n_resamples=opts.n_resamples,
        )
        out.append(_ratio(c))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------
# Across loads: crossover, what-if, capacity.
# ---------------------------------------------------------------------------------------------------------------


def _axis_levels(inputs: ReportInputs) -> tuple[str, list[LevelSpec]]:
    """The loads of one axis for curves: the sweep's axis if there is a sweep, else the operating point's."""
    levels = list(inputs.setup.levels)
    sweep = [lv for lv in levels if "sweep" in lv.roles]
    op = next((lv for lv in levels if "operating" in lv.roles), levels[0] if levels else None)
    axis = sweep[0].kind if sweep else (op.kind if op else "concurrency")
    same = sorted({lv.value: lv for lv in levels if lv.kind == axis}.values(), key=lambda lv: lv.value)
    return axis, same


def _crossover(cand: ArmInfo, levels: Sequence[LevelReport], inputs: ReportInputs, opts: ReportOptions
               ) -> CrossoverView | None:  # fmt: skip
    axis, axis_levels = _axis_levels(inputs)
    keys = {lv.key for lv in axis_levels}
    points: list[stats.LoadSpeedup] = []
    excluded = []
    for lv in levels:
        if lv.key not in keys:
            continue
        comp = lv.comparison(cand.name)
        if comp is None or comp.gate != "ok":
            if comp is not None and comp.gate != "missing":
                excluded.append(f"{lv.label}: {comp.gate_reason}")
            continue
        tp = comp.metric("tpot_s")
        if tp is None or tp.n_pairs < stats.MIN_PAIRS:
            excluded.append(f"{lv.label}: not enough paired TPOT data")
            continue
        points.append(stats.LoadSpeedup(lv.value, tp.speedup, tp.speedup_low, tp.speedup_high, ()))
    if len(points) < 2:
        return None
    # Replicates are not kept in the Report (thousands of numbers), so recompute them here for the interval.
    points = _with_replicates(points, cand, axis, inputs, opts)
    c = stats.crossover(points, log_load=axis == "concurrency")
    return CrossoverView(
        axis,
        tuple(p.load for p in points),
        tuple(p.speedup for p in points),
        tuple(p.low for p in points),
        tuple(p.high for p in points),
        c.status.value,
        c.load,
        c.low,
        c.high,
        c.low_censored,
        c.high_censored,
        c.method,
        c.scale,
        tuple(excluded),
    )


def _with_replicates(points: list[stats.LoadSpeedup], cand: ArmInfo, axis: str, inputs: ReportInputs,
                     opts: ReportOptions) -> list[stats.LoadSpeedup]:  # fmt: skip
    """Bootstrap replicates of the TPOT speedup at each load (same seed scheme as the report: reproducible)."""
    out = []
    by_value = {lv.value: lv for lv in inputs.setup.levels if lv.kind == axis}
    for p in points:
        lv = by_value[p.load]
        rng = np.random.default_rng([opts.seed, 7, int(p.load * 1000)])
        c = stats.compare_paired(
            "tpot_s",
            per_prompt(inputs.runs_for(cand.name, lv.key), "tpot_s"),
            per_prompt(inputs.runs_for("baseline", lv.key), "tpot_s"),
            rng,
            n_resamples=opts.n_resamples,
        )
        out.append(stats.LoadSpeedup.from_comparison(p.load, c))
    return out


def _profile(acc: AcceptanceView, k: int | None) -> whatiflib.AcceptanceProfile | None:
    if acc.per_position:
        return whatiflib.profile_from_per_position(list(acc.per_position))
    if acc.drafts and acc.accepted_tokens is not None and k:
        return whatiflib.profile_from_totals(acc.drafts, acc.accepted_tokens, k)
    if acc.acceptance_length is not None and k and 1.0 <= acc.acceptance_length <= k + 1:
        return whatiflib.profile_from_totals(1.0, acc.acceptance_length - 1.0, k)
    return None


def _what_if(cand: ArmInfo, levels: Sequence[LevelReport], warnings: list[str]) -> tuple[WhatIfView, ...]:
    """At the low load and at the operating point: predicted speedup for k = 1..8 from measured acceptance."""
    out = []
    seen = set()
    for role in ("low", "operating"):
        lv = next((x for x in levels if role in x.roles), None)
        if lv is None or lv.key in seen:
            continue
        seen.add(lv.key)
        a, comp = lv.arm(cand.name), lv.comparison(cand.name)
        if a is None or a.acceptance is None or not a.acceptance.active or comp is None or comp.gate != "ok":
            continue
        tp = comp.metric("tpot_s")
        if tp is None or not math.isfinite(tp.speedup):
            continue
        try:
            prof = _profile(a.acceptance, cand.num_speculative_tokens)
            if prof is None:
                continue
            w = whatiflib.what_if_from_observation(prof, tp.speedup)
        except ValueError as e:
            warnings.append(f"{cand.label} what-if at {lv.label} skipped: {e}")
            continue
        out.append(
            WhatIfView(
                lv.key,
                lv.label,
                prof.per_position,
                prof.alpha,
                prof.source,
                w.step_cost,
                w.step_cost_source,
                tuple(KRow(p.k, p.expected_tokens, p.speedup, p.model) for p in w.predictions),
                w.recommended_k,
                w.observed_k,
                w.observed_speedup,
                w.notes,
            )
        )
    return tuple(out)


def _plan(cand: ArmInfo, base: ArmInfo, levels: Sequence[LevelReport], inputs: ReportInputs) -> PlanView | None:
    slo, target = _slo(inputs), inputs.setup.target_rate_rps
    bp, cp = _price(base), _price(cand)
    if slo is None or target is None or bp is None or cp is None:
        return None
    axis = "rate" if any(lv.kind == "rate" for lv in levels) else "concurrency"

    def results(arm: str) -> list[costlib.LoadResult]:
        out = []
        for lv in levels:
            a = lv.arm(arm)
            if lv.kind != axis or a is None or a.repeats == 0 or a.slo_attainment is None:
                continue
            rate = a.achieved_rate_rps if axis == "rate" else a.requests_per_s.estimate
            if rate is None or not math.isfinite(rate):
                continue
            out.append(costlib.LoadResult(lv.value, rate, a.slo_attainment))
        return out

    p = costlib.compare_plans(target, results(base.name), results(cand.name), slo, bp, cp)

    def side(c: costlib.CapacityPlan) -> PlanSide:
        return PlanSide(c.goodput_rps_per_replica, c.replicas, c.gpus, c.usd_per_month)

    return PlanView(target, axis, side(p.baseline), side(p.candidate), p.monthly_difference_usd, p.gpu_difference)


# ---------------------------------------------------------------------------------------------------------------
# The verdict line.
# ---------------------------------------------------------------------------------------------------------------


def fmt_x(v: float) -> str:
    return f"{v:.2f}×" if math.isfinite(v) else "-"


def fmt_range(lo: float, hi: float) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "[no interval]"
    return f"[{lo:.2f}–{hi:.2f}]"


def fmt_bytes(b: float) -> str:
    sign = "+" if b > 0 else ("−" if b < 0 else "±")
    a = abs(b)
    if a >= 1e9:
        return f"{sign}{a / 1e9:.2f} GB"
    if a >= 1e6:
        return f"{sign}{a / 1e6:.0f} MB"
    return f"{sign}{a / 1e3:.0f} kB"


def fmt_load(kind: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if kind == "concurrency" else f"{value:.3g} req/s"


def level_phrase(comp: LevelComparison, label: str) -> str:
    """'TPOT 1.84× faster [1.71–1.97] at concurrency 1' or the gate's reason."""
    if comp.gate == "not active":
        return f"speculation not active at {label}"
    if comp.gate != "ok":
        return f"no verdict at {label} ({comp.gate})"
    tp = comp.metric("tpot_s")
    if tp is None:
        return f"no TPOT at {label}"
    rng = fmt_range(tp.speedup_low, tp.speedup_high)
    if tp.verdict == stats.Verdict.FASTER.value:
        return f"{fmt_x(tp.speedup)} faster {rng} at {label}"
    if tp.verdict == stats.Verdict.SLOWER.value:
        return f"{fmt_x(tp.speedup)} (slower) {rng} at {label}"
    if tp.verdict == stats.Verdict.INSUFFICIENT.value:
        return f"not enough paired data at {label}"
    mdc = tp.min_detectable_change
    could = f", could have detected ±{mdc:.0%}" if math.isfinite(mdc) else ""
    return f"no detectable difference at {label} ({fmt_x(tp.speedup)} {rng}{could})"


def verdict_line(cand: ArmInfo, levels: Sequence[LevelReport], crossover: CrossoverView | None,
                 acc: AcceptanceView | None, correctness: CorrectnessComparison | None) -> str:  # fmt: skip
    """The hyperfine-style one-liner; every part names its load, interval or source."""
    shown = [lv for lv in levels if {"low", "operating"} & set(lv.roles)] or list(levels[:2])
    phrases = []
    for lv in shown:
        comp = lv.comparison(cand.name)
        if comp is not None:
            phrases.append(level_phrase(comp, lv.label))
    head = "; ".join(phrases) if phrases else "no load level ran"
    numeric = bool(phrases) and (phrases[0][:1].isdigit() or phrases[0].startswith("no detectable"))
    parts = [("TPOT " if numeric else "") + head]
    any_faster = any(
        (c := lv.comparison(cand.name)) is not None and c.gate == "ok" and c.verdict == stats.Verdict.FASTER.value
        for lv in levels
    )
    if crossover is not None and any_faster:
        unit = "" if crossover.axis == "concurrency" else " req/s"
        if crossover.status == stats.CrossoverStatus.CROSSES.value and crossover.load is not None:
            lo = ("≤" if crossover.low_censored else "") + f"{crossover.low:.3g}"
            hi = ("≥" if crossover.high_censored else "") + f"{crossover.high:.3g}"
            parts.append(f"crossover ≈ {crossover.load:.3g}{unit} [{lo}–{hi}]")
        else:
            parts.append(f"crossover: {crossover.status}")
    if acc is not None:
        if acc.active and acc.acceptance_length is not None:
            parts.append(f"acceptance length {acc.acceptance_length:.2f} ({acc.source})")
        elif not acc.active:
            parts.append(f"no drafts ({acc.source})")
    else:
        parts.append("acceptance unknown (engine reports none)")
    op = next((lv for lv in levels if "operating" in lv.roles), None)
    comp = op.comparison(cand.name) if op is not None else None
    if comp is not None and comp.memory_delta_bytes is not None:
        parts.append(f"memory {fmt_bytes(comp.memory_delta_bytes)} ({comp.memory_kind})")
    if comp is not None and comp.cost_ratio is not None and math.isfinite(comp.cost_ratio.estimate):
        parts.append(f"$/1M tokens {ratio_phrase(comp.cost_ratio)} at the operating point")
    elif comp is not None and comp.throughput_ratio is not None and math.isfinite(comp.throughput_ratio.estimate):
        parts.append(f"output tok/s {ratio_phrase(comp.throughput_ratio)} at the operating point")
    if correctness is not None:
        parts.append(f"correctness: {correctness.verdict}")
    return f"{cand.label}: " + "; ".join(parts)


def pct(ratio: float) -> str:
    """0.62 -> '−38%', 1.05 -> '+5%'."""
    d = (ratio - 1.0) * 100
    return f"{'+' if d >= 0 else '−'}{abs(d):.0f}%"


def ratio_phrase(iv: Interval) -> str:
    """A repeat-based ratio as a change with its interval: '−38% [−45%…−30%]', or why there is no verdict."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{pct(iv.estimate)} ({iv.n} paired repeat{'s' if iv.n != 1 else ''}, no interval)"
    rng = f"[{pct(iv.low)}…{pct(iv.high)}]"
    if iv.low <= 1.0 <= iv.high:
        return f"no detectable change ({pct(iv.estimate)} {rng})"
    return f"{pct(iv.estimate)} {rng}"


# ---------------------------------------------------------------------------------------------------------------
# build_report
# ---------------------------------------------------------------------------------------------------------------


def _setup_view(inputs: ReportInputs) -> SetupView:
    s = inputs.setup
    cats: dict[str, int] = defaultdict(int)
    for it in s.items:
        cats[it.category or "uncategorised"] += 1
    return SetupView(
        name=s.name,
        workload_name=s.workload_name,
        workload_source=s.workload_source,
        api=s.api,
        prompts=len(s.items),
        categories=dict(sorted(cats.items())),
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
        max_tokens=s.max_tokens,
        min_tokens=s.min_tokens,
        ignore_eos=s.ignore_eos,
        repeats=s.repeats,
        levels=tuple(f"{lv.label} ({', '.join(lv.roles)})" if lv.roles else lv.label for lv in s.levels),
        slo_ttft_s=s.slo_ttft_s,
        slo_tpot_s=s.slo_tpot_s,
        slo_e2e_s=s.slo_e2e_s,
        slo_attainment=s.slo_attainment,
        target_rate_rps=s.target_rate_rps,
        two_url_mode=s.two_url_mode,
        started_utc=s.started_utc,
        finished_utc=s.finished_utc,
        versions={k: str(v) for k, v in s.versions.items()},
    )


def _arm_view(a: ArmInfo) -> ArmView:
    cs = a.cold_start
    return ArmView(
        a.name,
        a.label,
        a.engine,
        a.url,
        a.command,
        a.method,
        a.num_speculative_tokens,
        a.usd_per_hour,
        a.gpus,
        cs.ready_s if cs else None,
        cs.first_token_s if cs else None,
        json.dumps(dict(a.server_info), indent=1, sort_keys=True, default=str) if a.server_info else "",
    )


def _warnings(inputs: ReportInputs, levels: Sequence[LevelReport], cands: Sequence[CandidateReport]) -> list[str]:
    w: list[str] = []
    labels = {a.name: a.label for a in inputs.arms}
    if inputs.interrupted:
        w.append("the run was interrupted: the report covers only what finished (see 'missing')")
    for c in cands:
        if c.single_change is False:
            w.append(
                f"{c.label}: the commands differ in more than speculation ({'; '.join(c.diff_lines)}): "
                "a difference may not be speculation's doing"
            )
        elif c.single_change is None:
            w.append(f"{c.label}: the single change could not be verified ({c.change_note or 'commands unknown'})")
    for lv in levels:
        for comp in lv.comparisons:
            if comp.gate not in ("ok", "missing"):
                w.append(f"{labels.get(comp.candidate, comp.candidate)} at {lv.label}: no verdict — {comp.gate_reason}")
        for a in lv.arms:
            if a.token_count_sources.get("one_per_chunk"):
                w.append(
                    f"{labels.get(a.arm, a.arm)} at {lv.label}: per-chunk token counts unknown (one per chunk "
                    "assumed); tokens per chunk is unreliable — enable continuous usage stats or logprobs"
                )
            if a.repeats and a.acceptance is None and a.arm != "baseline":
                hint = ""
                base = lv.arm("baseline")
                tpc, btpc = (
                    a.distributions["tokens_per_chunk"].mean,
                    base.distributions["tokens_per_chunk"].mean if base else math.nan,
                )
                if measured_tpc(a) and math.isfinite(btpc) and abs(tpc - btpc) < 0.05:
                    hint = (
                        f" (and it streamed {tpc:.2f} tokens per chunk, like the baseline: it may not have speculated)"
                    )
                w.append(
                    f"{labels.get(a.arm, a.arm)} at {lv.label}: the engine reported no acceptance, so speculation "
                    f"could not be confirmed active{hint}"
                )
            if a.acceptance is not None and a.acceptance.active and a.acceptance.inactive_repeats:
                w.append(
                    f"{labels.get(a.arm, a.arm)} at {lv.label}: {a.acceptance.inactive_repeats} of "
                    f"{a.acceptance.repeats} repeats made no drafts"
                )
    if inputs.setup.repeats < 2:
        w.append("one repeat: throughput and cost have no interval; set `repeats: 3` for intervals")
    for c in cands:
        if c.correctness is not None:
            w.extend(f"{c.label}: {x}" for x in c.correctness.warnings)
    w.extend(inputs.notes)
    return list(dict.fromkeys(w))


def measured_tpc(a: ArmLevel) -> bool:
    """Tokens per chunk was measured (not assumed one per chunk) for every successful request of this arm."""
    return bool(a.token_count_sources) and "one_per_chunk" not in a.token_count_sources


def _missing(inputs: ReportInputs) -> list[str]:
    out = []
    for lv in inputs.setup.levels:
        for arm in inputs.arms:
            runs = inputs.runs_for(arm.name, lv.key)
            have = {r.repeat for r in runs if r.records}
            want = set(range(1, inputs.setup.repeats + 1))
            if not have:
                out.append(f"{arm.label} at {lv.label}: no runs")
            elif want - have:
                out.append(f"{arm.label} at {lv.label}: repeats {sorted(want - have)} missing")
            part = [r.repeat for r in runs if r.interrupted and r.records]
            if part:
                out.append(f"{arm.label} at {lv.label}: repeat(s) {part} interrupted (partial records, no counters)")
    return out


def build_report(inputs: ReportInputs, options: ReportOptions | None = None) -> Report:
    """Every number of the A/B report from the raw inputs. Pure: same inputs and options, same report."""
    opts = options or ReportOptions()
    base = inputs.baseline
    levels: list[LevelReport] = []
    for i, lv in enumerate(inputs.setup.levels):
        arms = {}
        for arm in inputs.arms:
            runs = inputs.runs_for(arm.name, lv.key)
            if runs:
                arms[arm.name] = arm_level(arm, lv, runs, inputs, opts)
        comps = []
        for j, cand in enumerate(inputs.candidates):
            rng = np.random.default_rng([opts.seed, i, j])
            comps.append(compare_level(lv, cand, base, arms, inputs, rng, opts))
        levels.append(LevelReport(lv.key, lv.label, lv.kind, lv.value, lv.roles, tuple(arms.values()), tuple(comps)))

    warnings: list[str] = []
    cands = []
    changes = {c.candidate: c for c in inputs.changes}
    for cand in inputs.candidates:
        low = next((lv for lv in levels if "low" in lv.roles and lv.arm(cand.name)), None)
        low = low or next((lv for lv in levels if lv.arm(cand.name)), None)
        acc = low.arm(cand.name).acceptance if low is not None else None  # type: ignore[union-attr]
        cross = _crossover(cand, levels, inputs, opts)
        corr = compare_correctness(inputs, cand.name, opts.correctness)
        ch = changes.get(cand.name)
        cands.append(
            CandidateReport(
                name=cand.name,
                label=cand.label,
                verdict_line=verdict_line(cand, levels, cross, acc, corr),
                acceptance=acc,
                crossover=cross,
                what_if=_what_if(cand, levels, warnings),
                plan=_plan(cand, base, levels, inputs),
                correctness=corr,
                single_change=ch.verified if ch else None,
                diff_lines=ch.diff_lines if ch else (),
                change_note=ch.note if ch else "no command comparison recorded",
            )
        )
    missing = _missing(inputs)
    title = inputs.setup.name or f"{', '.join(c.label for c in inputs.candidates)} vs {base.label}"
    return Report(
        schema=REPORT_SCHEMA,
        title=title,
        setup=_setup_view(inputs),
        arms=tuple(_arm_view(a) for a in inputs.arms),
        levels=tuple(levels),
        candidates=tuple(cands),
        warnings=tuple(_warnings(inputs, levels, cands) + warnings),
        missing=tuple(missing),
        interrupted=inputs.interrupted or any(r.interrupted for r in inputs.runs),
        diagnosis=dict(inputs.diagnosis) if inputs.diagnosis is not None else None,
        options={
            "max_error_rate": opts.max_error_rate,
            "min_load_fraction": opts.min_load_fraction,
            "seed": opts.seed,
            "n_resamples": opts.n_resamples,
            "confidence": stats.CONFIDENCE,
            "near_tie_logprob_gap": opts.correctness.near_tie_logprob_gap,
        },
    )
