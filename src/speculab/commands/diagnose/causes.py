"""Pure analysis for `speculab diagnose`, cause by cause: measured phases -> cold start, prefill fit, prefix
caching, queueing and decode share, each in seconds it adds to a request it affects. No I/O, no clock.

`analysis.analyze` weighs these into ranked findings. Phase names are the `extra["phase"]` tags records carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.records import RequestRecord
from speculab.harness.stats import CONFIDENCE, LinearFit, fit_line, welch_diff

# /2: findings, warnings, the queueing and prefix checks hold kinds and numbers, no sentences (the report words them);
# a /1 file's sentences still render (findings as written, warnings as notes)
SCHEMA = "speculab.diagnosis/2"

# Phase names: records carry them in `extra["phase"]` (requests.jsonl) and `analyze` takes them by these keys.
PHASE_STARTUP = "startup"  # launch mode: the first-token probe right after the server became ready
PHASE_COLD = "cold"  # the first request of the diagnosis (the server may have been idle before it)
PHASE_WARM = "warm"  # same-size short requests right after it
PHASE_IDLE = "idle"  # one request after waiting `idle_s` with nothing in flight
PHASE_PREFILL = "prefill"  # the prompt-length sweep at concurrency 1, max_tokens 1
PHASE_PREFIX_PRIMER = "prefix-primer"  # the first request with the shared prefix (fills a cache)
PHASE_PREFIX_SHARED = "prefix-shared"  # later requests with the same prefix and new suffixes
PHASE_PREFIX_CONTROL = "prefix-control"  # fresh prompts of the same total length, no shared prefix
PHASE_BASELINE = "workload-c1"  # the user's workload at concurrency 1
PHASE_LOAD = "workload-load"  # the user's workload at the operating concurrency


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a cause counts as a finding, and what counts as interference under load."""

    min_effect_s: float = 0.02  # below this a cause explains nothing a user would notice
    min_share: float = 0.05  # ...or less than this fraction of the affected request's latency
    cold_extra_floor_s: float = 0.02  # a cold request must exceed warm TTFT by this and...
    cold_extra_rel: float = 0.25  # ...by this fraction of warm TTFT, to count as a cold start
    interference_ttft_ratio: float = 2.0  # TTFT at load >= this x TTFT alone...
    steady_tpot_ratio: float = 1.25  # ...while TPOT at load <= this x TPOT alone: prefill/decode interference
    prefix_cache_min_saving: float = 0.5  # measured saving >= this x the saving a full cache hit would give


@dataclass(frozen=True, slots=True)
class Startup:
    """Launch mode: process start -> health 200 -> first token, seconds from process start."""

    ready_s: float | None
    first_token_s: float | None


@dataclass(frozen=True, slots=True)
class ServerPhase:
    """What the server's own Prometheus metrics say about one phase (before/after deltas); None when absent."""

    ttft_mean_s: float | None = None  # time-to-first-token histogram: Δsum / Δcount
    ttft_count: float | None = None
    queue_mean_s: float | None = None  # request queue time histogram (vLLM): Δsum / Δcount
    itl_mean_s: float | None = None  # inter-token latency (time per output token) histogram: Δsum / Δcount
    prefill_mean_s: float | None = None  # request prefill time histogram (vLLM, speculab): slot -> first token
    prompt_tokens: float | None = None  # prompt token counter delta
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    source: str | None = None  # metric prefix the numbers came from, e.g. "vllm:" or "speculab:"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything `analyze` needs: the records of each phase and the context they were measured in."""

    phases: Mapping[str, Sequence[RequestRecord]]
    concurrency: int = 1  # the operating point (closed loop); 1: queueing not measured
    # a trace replayed as the operating point (open loop): its label ("trace ×1, 3.2 in flight on average") and the
    # measured mean requests in flight; "" / None for a closed loop
    operating_label: str = ""
    in_flight: float | None = None
    idle_s: float | None = None  # the idle wait before the PHASE_IDLE request
    prefix_tokens: int = 0  # shared prefix length of the prefix phase (approximate tokens as generated)
    prefix_prompt_tokens: int = 0  # whole prompt length of the prefix phase (approximate tokens as generated)
    startup: Startup | None = None
    server: Mapping[str, ServerPhase] = field(default_factory=dict)
    workload_prompt_tokens: float | None = None  # approximate mean, used when the server reports no usage
    thresholds: Thresholds = field(default_factory=Thresholds)
    confidence: float = CONFIDENCE


# --------------------------------------------------------------------------------------------------------------
# Results of each check


def mean_of(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if len(xs) else math.nan


def median_of(xs: Sequence[float]) -> float:
    return float(np.median(xs)) if len(xs) else math.nan


def ok_records(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and r.chunks]


def ttfts_of(records: Sequence[RequestRecord]) -> list[float]:
    return [r.chunks[0].t_s - r.sent_s for r in ok_records(records)]


@dataclass(frozen=True, slots=True)
class ColdStart:
    mode: str  # "launch" (speculab started the server) or "running"
    cold_start_s: float | None  # the headline: launch: process start -> first token; running: the larger extra
    process_ready_s: float | None
    process_first_token_s: float | None
    first_request_ttft_s: float | None
    warm_ttft_s: float | None  # median of the warm probes
    first_request_extra_s: float | None
    idle_s: float | None
    after_idle_ttft_s: float | None
    after_idle_extra_s: float | None
    detected: bool


def cold_start(inp: Inputs) -> ColdStart:
    th = inp.thresholds
    first = (ttfts_of(inp.phases.get(PHASE_COLD, ())) or [None])[0]
    warm = ttfts_of(inp.phases.get(PHASE_WARM, ()))
    idle = (ttfts_of(inp.phases.get(PHASE_IDLE, ())) or [None])[0]
    warm_med = median_of(warm) if warm else None

    def extra(t: float | None) -> float | None:
        return None if t is None or warm_med is None else t - warm_med

    def significant(x: float | None) -> bool:
        return x is not None and warm_med is not None and x > max(th.cold_extra_floor_s, th.cold_extra_rel * warm_med)

    first_extra, idle_extra = extra(first), extra(idle)
    st = inp.startup
    if st is not None:
        head = st.first_token_s
        detected = head is not None
    else:
        extras = [x for x in (first_extra, idle_extra) if significant(x)]
        measured = [x for x in (first_extra, idle_extra) if x is not None]
        # not significant: the largest measured extra, floored at 0 (a first request faster than warm ones is noise)
        head = max(extras) if extras else (max(0.0, *measured) if measured else None)
        detected = bool(extras)
    return ColdStart(
        mode="launch" if st is not None else "running",
        cold_start_s=head,
        process_ready_s=st.ready_s if st else None,
        process_first_token_s=st.first_token_s if st else None,
        first_request_ttft_s=first,
        warm_ttft_s=warm_med,
        first_request_extra_s=first_extra,
        idle_s=inp.idle_s,
        after_idle_ttft_s=idle,
        after_idle_extra_s=idle_extra,
        detected=detected,
    )


@dataclass(frozen=True, slots=True)
class Prefill:
    fit: LinearFit | None
    points: tuple[tuple[int, float], ...]  # (prompt tokens, TTFT seconds), one per successful probe
    token_source: str  # "usage" (the server's prompt_tokens) or "approximate" (speculab's own count)
    by_length: tuple[dict[str, float], ...]  # per distinct length: tokens, n, ttft mean/min/max


def prefill(inp: Inputs, approx_tokens: Mapping[int, int] | None = None) -> Prefill:
    """Fit TTFT against prompt tokens over the sweep. `approx_tokens` maps record index -> the length we generated,
    used for records without server usage."""
    pts: list[tuple[int, float]] = []
    sources = set()
    for r in ok_records(inp.phases.get(PHASE_PREFILL, ())):
        n = r.prompt_tokens
        if n is None and approx_tokens is not None:
            n = approx_tokens.get(r.index)
            sources.add("approximate")
        elif n is not None:
            sources.add("usage")
        if n is not None:
            pts.append((int(n), r.chunks[0].t_s - r.sent_s))
    fit = fit_line([p[0] for p in pts], [p[1] for p in pts], inp.confidence) if pts else None
    groups: dict[int, list[float]] = {}
    for n, t in pts:
        groups.setdefault(n, []).append(t)
    by_len = tuple(
        {"prompt_tokens": n, "n": len(v), "ttft_mean_s": mean_of(v), "ttft_min_s": min(v), "ttft_max_s": max(v)}
        for n, v in sorted(groups.items())
    )
    src = "usage" if sources == {"usage"} else ("approximate" if sources == {"approximate"} else "mixed")
    return Prefill(fit, tuple(pts), src if pts else "none", by_len)


@dataclass(frozen=True, slots=True)
class PrefixCaching:
    enabled: bool | None  # None: not measured (no prefill cost to save, or probes failed)
    prefix_tokens: int
    prompt_tokens: float | None
    shared_ttft_s: float | None  # mean TTFT of prompts whose prefix was sent before
    control_ttft_s: float | None  # mean TTFT of fresh prompts of the same length
    saving_s: float | None  # control - shared
    saving_s_ci: tuple[float, float] | None
    expected_saving_s: float | None  # what a full cache hit on the prefix would save: slope x prefix tokens
    server_cache_hit_tokens: float | None  # prefix-cache hit counter delta over the phase, when exposed
    # why the saving was not timed against a full hit: "not_run" (the probes did not run or succeed), "too_cheap" (the
    # prefix's prefill costs too little to tell); None: it was. The report says it (report/words/findings).
    undetermined: str | None


def prefix_caching(inp: Inputs, fit: LinearFit | None) -> PrefixCaching:
    th = inp.thresholds
    shared = ttfts_of(inp.phases.get(PHASE_PREFIX_SHARED, ()))
    control = ttfts_of(inp.phases.get(PHASE_PREFIX_CONTROL, ()))
    prompt_tokens = [
        r.prompt_tokens for r in ok_records(inp.phases.get(PHASE_PREFIX_SHARED, ())) if r.prompt_tokens is not None
    ]
    srv = [inp.server.get(p) for p in (PHASE_PREFIX_PRIMER, PHASE_PREFIX_SHARED, PHASE_PREFIX_CONTROL)]
    hits = [s.prefix_cache_hits for s in srv if s is not None and s.prefix_cache_hits is not None]
    hit_tokens = sum(hits) if hits else None
    # the prefix in the server's tokens: our approximate count scaled by the server's count of the whole prompt
    scale = mean_of(prompt_tokens) / inp.prefix_prompt_tokens if prompt_tokens and inp.prefix_prompt_tokens else 1.0
    prefix_server = inp.prefix_tokens * scale
    expected = fit.s_per_token * prefix_server if fit is not None else None
    base: dict[str, Any] = {
        "prefix_tokens": round(prefix_server),
        "prompt_tokens": mean_of(prompt_tokens) if prompt_tokens else None,
        "server_cache_hit_tokens": hit_tokens,
        "expected_saving_s": expected,
    }
    if not shared or not control:
        return PrefixCaching(
            enabled=None,
            shared_ttft_s=None,
            control_ttft_s=None,
            saving_s=None,
            saving_s_ci=None,
            undetermined="not_run",
            **base,
        )
    d, lo, hi = welch_diff(control, shared, inp.confidence)
    ci = (lo, hi) if math.isfinite(lo) else None
    undetermined: str | None = None
    if expected is None or expected < th.cold_extra_floor_s:
        undetermined = "too_cheap"
        enabled = hit_tokens > 0 if hit_tokens is not None else None  # the server's counters, when it has them
    else:
        enabled = d >= th.prefix_cache_min_saving * expected and (ci is None or ci[0] > 0)
    return PrefixCaching(
        enabled,
        shared_ttft_s=mean_of(shared),
        control_ttft_s=mean_of(control),
        saving_s=d,
        saving_s_ci=ci,
        undetermined=undetermined,
        **base,
    )


def operating_point(inp: Inputs) -> str:
    """How the operating point is named in findings: "concurrency 8", or the trace's label."""
    return inp.operating_label or f"concurrency {inp.concurrency}"


def measures_load(inp: Inputs) -> bool:
    """Was a load phase run (a closed loop above 1, or a trace replay)?"""
    return inp.concurrency > 1 or bool(inp.operating_label)


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """The user's workload at one concurrency: means over successful requests."""

    concurrency: int
    n: int
    ttft_s: float
    ttft_p50_s: float
    e2e_s: float
    decode_s: float  # E2E - TTFT
    tpot_s: float
    tpot_p50_s: float
    client_queue_s: float  # scheduled -> sent
    prompt_tokens: float | None
    output_tokens: float | None
    errors: int


def load_point(records: Sequence[RequestRecord], concurrency: int) -> LoadPoint | None:
    recs = [r for r in records if not r.warmup]
    ms = [request_metrics(r) for r in recs]
    good = [m for m in ms if m.ok and m.ttft_s is not None and m.e2e_s is not None]
    if not good:
        return None
    tpots = [m.tpot_s for m in good if m.tpot_s is not None]
    pts = [m.prompt_tokens for m in good if m.prompt_tokens is not None]
    outs = [m.output_tokens for m in good if m.output_tokens is not None]
    return LoadPoint(
        concurrency=concurrency,
        n=len(good),
        ttft_s=mean_of([m.ttft_s for m in good]),  # type: ignore[misc]
        ttft_p50_s=median_of([m.ttft_s for m in good]),  # type: ignore[misc]
        e2e_s=mean_of([m.e2e_s for m in good]),  # type: ignore[misc]
        decode_s=mean_of([m.e2e_s - m.ttft_s for m in good]),  # type: ignore[operator]
        tpot_s=mean_of(tpots),
        tpot_p50_s=median_of(tpots),
        client_queue_s=mean_of([m.queue_s for m in ms]),
        prompt_tokens=mean_of(pts) if pts else None,
        output_tokens=mean_of(outs) if outs else None,
        errors=len(recs) - len(good),
    )


@dataclass(frozen=True, slots=True)
class Queueing:
    measured: bool
    concurrency: int
    at: str  # the operating point, named: "concurrency 8", "trace ×1, 3.2 in flight on average"
    ttft_c1_s: float | None
    ttft_load_s: float | None
    wait_s: float | None  # TTFT(load) - TTFT(c1) + client queue at load: what load adds before the first token
    wait_s_ci: tuple[float, float] | None
    client_queue_s: float | None
    server_queue_s: float | None  # the server's own queue-time histogram at load, when exposed
    tpot_c1_s: float | None
    tpot_load_s: float | None
    interference: bool  # TTFT at load far above TTFT alone while decode stays steady, not explained by slot waits
    ttft_ratio: float | None = None  # TTFT at load / alone
    tpot_ratio: float | None = None  # TPOT at load / alone
    # what the extra TTFT was weighed against: the other requests in flight and their prefill work (None: no prefill
    # fit), and whether the extra TTFT is within 1.5x that work
    others_in_flight: float | None = None
    prefill_bound_s: float | None = None
    within_prefill: bool | None = None
    # why queueing was not measured: "no_load" (no --concurrency N) or "incomplete" (the workload did not complete at
    # both points); None: it was. The report words it (report/words/findings.queueing_note).
    unmeasured: str | None = None


def queueing(
    inp: Inputs, c1: LoadPoint | None, load: LoadPoint | None, prefill_per_request_s: float | None
) -> Queueing:
    th = inp.thresholds
    at = operating_point(inp)
    if not measures_load(inp) or c1 is None or load is None:
        return Queueing(
            measured=False,
            concurrency=inp.concurrency,
            at=at,
            ttft_c1_s=c1.ttft_s if c1 else None,
            ttft_load_s=None,
            wait_s=None,
            wait_s_ci=None,
            client_queue_s=None,
            server_queue_s=None,
            tpot_c1_s=c1.tpot_s if c1 else None,
            tpot_load_s=None,
            interference=False,
            unmeasured="no_load" if not measures_load(inp) else "incomplete",
        )
    load_recs = [r for r in inp.phases.get(PHASE_LOAD, ()) if not r.warmup]
    ttft_load = [t + r.queue_s for r, t in zip(ok_records(load_recs), ttfts_of(load_recs), strict=True)]
    d, lo, hi = welch_diff(ttft_load, ttfts_of(inp.phases.get(PHASE_BASELINE, ())), inp.confidence)
    srv = inp.server.get(PHASE_LOAD)
    server_q = srv.queue_mean_s if srv is not None else None
    ttft_ratio = load.ttft_s / c1.ttft_s if c1.ttft_s > 0 else math.inf
    tpot_ratio = load.tpot_s / c1.tpot_s if c1.tpot_s > 0 else math.nan
    steady = math.isfinite(tpot_ratio) and tpot_ratio <= th.steady_tpot_ratio
    far = ttft_ratio >= th.interference_ttft_ratio and d >= th.min_effect_s
    # Interference means the extra TTFT is other requests' prefill work: it can be at most the prefill of the other
    # N-1 requests in flight (with some slack). Waiting for a free slot also raises TTFT with decode steady, but that
    # is capacity, not interference: the server's queue-time histogram, when it has one, shows it. Anything beyond
    # both (scheduling, CPU overhead) is queueing of another kind; disaggregation would not remove it.
    slot_explains = server_q is not None and server_q >= 0.5 * d
    others: float | None = None
    bound: float | None = None
    prefill_explains: bool | None = None
    if prefill_per_request_s is not None:
        others = max(0.0, inp.in_flight - 1) if inp.in_flight is not None else float(inp.concurrency - 1)
        bound = others * prefill_per_request_s
        prefill_explains = d <= 1.5 * bound
    interference = far and steady and bool(prefill_explains) and not slot_explains
    return Queueing(
        measured=True,
        concurrency=inp.concurrency,
        at=at,
        ttft_c1_s=c1.ttft_s,
        ttft_load_s=load.ttft_s,
        wait_s=d,
        wait_s_ci=(lo, hi) if math.isfinite(lo) else None,
        client_queue_s=load.client_queue_s,
        server_queue_s=server_q,
        tpot_c1_s=c1.tpot_s,
        tpot_load_s=load.tpot_s,
        interference=interference,
        ttft_ratio=ttft_ratio,
        tpot_ratio=tpot_ratio,
        others_in_flight=others,
        prefill_bound_s=bound,
        within_prefill=prefill_explains,
    )


@dataclass(frozen=True, slots=True)
class DecodeShare:
    at_concurrency: int
    at: str  # the load it was measured at, named (operating_point)
    decode_share: float  # mean(E2E - TTFT) / mean(E2E)
    decode_s: float
    e2e_s: float
    ttft_s: float
    tpot_s: float
    tpot_p50_s: float
    output_tokens: float | None


def decode_share(point: LoadPoint, at: str = "") -> DecodeShare:
    return DecodeShare(
        at_concurrency=point.concurrency,
        at=at or f"concurrency {point.concurrency}",
        decode_share=point.decode_s / point.e2e_s if point.e2e_s > 0 else math.nan,
        decode_s=point.decode_s,
        e2e_s=point.e2e_s,
        ttft_s=point.ttft_s,
        tpot_s=point.tpot_s,
        tpot_p50_s=point.tpot_p50_s,
        output_tokens=point.output_tokens,
    )
