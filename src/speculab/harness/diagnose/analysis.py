"""Pure analysis for `speculab diagnose`: measured phases -> cold start, prefill fit, prefix caching, queueing and
decode share -> findings ranked by how much latency each explains. Seconds everywhere; no I/O, no clock.

Each cause is measured in the same currency, `explained_s`: the seconds it adds to a request it affects.
- decode: E2E - TTFT at the operating point (the part speculative decoding can shorten);
- prefill: fitted seconds per prompt token x the workload's mean prompt tokens (the part of TTFT due to length);
- queueing: TTFT at the operating point - TTFT at concurrency 1, plus client-side wait;
- cold start: process start -> first token when speculab launched the server, else the first request's (or the
  first after an idle period) TTFT above warm TTFT. It hits only those requests; `affects` says so.
A cause is a finding when it explains at least `min_effect_s` and `min_share` of the affected request's latency
(and, where it is estimated with an interval, the interval excludes zero). Findings are ranked by `explained_s`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.records import RequestRecord

CONFIDENCE = 0.95
SCHEMA = "speculab.diagnosis/1"

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


@dataclass(frozen=True, slots=True)
class LinearFit:
    """TTFT = overhead_s + s_per_token x prompt_tokens, ordinary least squares with Student-t intervals."""

    s_per_token: float
    s_per_token_ci: tuple[float, float]
    overhead_s: float
    overhead_s_ci: tuple[float, float]
    r2: float
    n: int
    residual_s: float  # residual standard deviation

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.s_per_token if self.s_per_token > 0 else math.nan

    @property
    def tokens_per_s_ci(self) -> tuple[float, float]:
        """Inverted slope interval; the upper bound is infinite when the slope's lower bound is not above zero."""
        lo, hi = self.s_per_token_ci
        return (1.0 / hi if hi > 0 else math.nan, 1.0 / lo if lo > 0 else math.inf)


def fit_line(x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE) -> LinearFit | None:
    """Least-squares line through (x, y) with t-based intervals on slope and intercept; None below 3 points or
    when x does not vary."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = xa.size
    if n < 3 or np.ptp(xa) == 0:
        return None
    xm, ym = xa.mean(), ya.mean()
    sxx = float(((xa - xm) ** 2).sum())
    slope = float(((xa - xm) * (ya - ym)).sum() / sxx)
    icpt = float(ym - slope * xm)
    resid = ya - (icpt + slope * xa)
    sse = float((resid**2).sum())
    sst = float(((ya - ym) ** 2).sum())
    s = math.sqrt(sse / (n - 2))
    t = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 2))
    se_slope = s / math.sqrt(sxx)
    se_icpt = s * math.sqrt(1.0 / n + xm * xm / sxx)
    return LinearFit(
        s_per_token=slope,
        s_per_token_ci=(slope - t * se_slope, slope + t * se_slope),
        overhead_s=icpt,
        overhead_s_ci=(icpt - t * se_icpt, icpt + t * se_icpt),
        r2=1.0 - sse / sst if sst > 0 else 1.0,
        n=n,
        residual_s=s,
    )


def welch_diff(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """mean(a) - mean(b) with a Welch t interval: (estimate, low, high); NaN bounds when either has < 2 values."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        return math.nan, math.nan, math.nan
    d = float(xa.mean() - xb.mean())
    if xa.size < 2 or xb.size < 2:
        return d, math.nan, math.nan
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    dof = (va + vb) ** 2 / ((va**2) / (xa.size - 1) + (vb**2) / (xb.size - 1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, dof)) * se
    return d, d - half, d + half


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if len(xs) else math.nan


def _median(xs: Sequence[float]) -> float:
    return float(np.median(xs)) if len(xs) else math.nan


def _ok(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and r.chunks]


def _ttfts(records: Sequence[RequestRecord]) -> list[float]:
    return [r.chunks[0].t_s - r.sent_s for r in _ok(records)]


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
    first = (_ttfts(inp.phases.get(PHASE_COLD, ())) or [None])[0]
    warm = _ttfts(inp.phases.get(PHASE_WARM, ()))
    idle = (_ttfts(inp.phases.get(PHASE_IDLE, ())) or [None])[0]
    warm_med = _median(warm) if warm else None

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
    for r in _ok(inp.phases.get(PHASE_PREFILL, ())):
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
        {"prompt_tokens": n, "n": len(v), "ttft_mean_s": _mean(v), "ttft_min_s": min(v), "ttft_max_s": max(v)}
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
    note: str


def prefix_caching(inp: Inputs, fit: LinearFit | None) -> PrefixCaching:
    th = inp.thresholds
    shared = _ttfts(inp.phases.get(PHASE_PREFIX_SHARED, ()))
    control = _ttfts(inp.phases.get(PHASE_PREFIX_CONTROL, ()))
    prompt_tokens = [
        r.prompt_tokens for r in _ok(inp.phases.get(PHASE_PREFIX_SHARED, ())) if r.prompt_tokens is not None
    ]
    srv = [inp.server.get(p) for p in (PHASE_PREFIX_PRIMER, PHASE_PREFIX_SHARED, PHASE_PREFIX_CONTROL)]
    hits = [s.prefix_cache_hits for s in srv if s is not None and s.prefix_cache_hits is not None]
    hit_tokens = sum(hits) if hits else None
    # the prefix in the server's tokens: our approximate count scaled by the server's count of the whole prompt
    scale = _mean(prompt_tokens) / inp.prefix_prompt_tokens if prompt_tokens and inp.prefix_prompt_tokens else 1.0
    prefix_server = inp.prefix_tokens * scale
    expected = fit.s_per_token * prefix_server if fit is not None else None
    base: dict[str, Any] = {
        "prefix_tokens": round(prefix_server),
        "prompt_tokens": _mean(prompt_tokens) if prompt_tokens else None,
        "server_cache_hit_tokens": hit_tokens,
        "expected_saving_s": expected,
    }
    if not shared or not control:
        return PrefixCaching(enabled=None, shared_ttft_s=None, control_ttft_s=None, saving_s=None, saving_s_ci=None,
                             note="the prefix probes did not run or did not succeed", **base)  # fmt: skip
    d, lo, hi = welch_diff(control, shared, inp.confidence)
    ci = (lo, hi) if math.isfinite(lo) else None
    if expected is None or expected < th.cold_extra_floor_s:
        enabled: bool | None = None
        note = "prefill of the prefix costs too little here to tell whether it is cached"
        if hit_tokens is not None:
            enabled = hit_tokens > 0
            note += f"; the server's counters report {hit_tokens:.0f} cached prompt tokens"
    else:
        enabled = d >= th.prefix_cache_min_saving * expected and (ci is None or ci[0] > 0)
        share = d / expected if expected > 0 else math.nan
        note = f"a {prefix_server:.0f}-token prefix seen before saves {d:.3f} s ({share:.0%} of its prefill time)"
    return PrefixCaching(enabled, shared_ttft_s=_mean(shared), control_ttft_s=_mean(control), saving_s=d,
                         saving_s_ci=ci, note=note, **base)  # fmt: skip


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
        ttft_s=_mean([m.ttft_s for m in good]),  # type: ignore[misc]
        ttft_p50_s=_median([m.ttft_s for m in good]),  # type: ignore[misc]
        e2e_s=_mean([m.e2e_s for m in good]),  # type: ignore[misc]
        decode_s=_mean([m.e2e_s - m.ttft_s for m in good]),  # type: ignore[operator]
        tpot_s=_mean(tpots),
        tpot_p50_s=_median(tpots),
        client_queue_s=_mean([m.queue_s for m in ms]),
        prompt_tokens=_mean(pts) if pts else None,
        output_tokens=_mean(outs) if outs else None,
        errors=len(recs) - len(good),
    )


@dataclass(frozen=True, slots=True)
class Queueing:
    measured: bool
    concurrency: int
    ttft_c1_s: float | None
    ttft_load_s: float | None
    wait_s: float | None  # TTFT(load) - TTFT(c1) + client queue at load: what load adds before the first token
    wait_s_ci: tuple[float, float] | None
    client_queue_s: float | None
    server_queue_s: float | None  # the server's own queue-time histogram at load, when exposed
    tpot_c1_s: float | None
    tpot_load_s: float | None
    interference: bool  # TTFT at load far above TTFT alone while decode stays steady, not explained by slot waits
    note: str


def queueing(
    inp: Inputs, c1: LoadPoint | None, load: LoadPoint | None, prefill_per_request_s: float | None
) -> Queueing:
    th = inp.thresholds
    if inp.concurrency <= 1 or c1 is None or load is None:
        why = "pass --concurrency N (your operating point) to measure queueing" if inp.concurrency <= 1 else (
            "the workload did not complete at both concurrency 1 and the operating point")  # fmt: skip
        return Queueing(False, inp.concurrency, c1.ttft_s if c1 else None, None, None, None, None, None,
                        c1.tpot_s if c1 else None, None, False, why)  # fmt: skip
    load_recs = [r for r in inp.phases.get(PHASE_LOAD, ()) if not r.warmup]
    ttft_load = [t + r.queue_s for r, t in zip(_ok(load_recs), _ttfts(load_recs), strict=True)]
    d, lo, hi = welch_diff(ttft_load, _ttfts(inp.phases.get(PHASE_BASELINE, ())), inp.confidence)
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
    parts = []
    slot_explains = server_q is not None and server_q >= 0.5 * d
    if server_q is not None:
        parts.append(f"the server reports {server_q:.3f} s of queue time per request")
    if prefill_per_request_s is not None:
        bound = (inp.concurrency - 1) * prefill_per_request_s
        prefill_explains = d <= 1.5 * bound
        within = "within" if prefill_explains else "more than"
        parts.append(f"{within} the prefill work of the other {inp.concurrency - 1} requests in flight ({bound:.3f} s)")
    else:
        prefill_explains = False
        parts.append("no prefill fit to compare the extra TTFT with")
    how = "; ".join(parts)
    interference = far and steady and prefill_explains and not slot_explains
    note = (
        f"TTFT {c1.ttft_s:.3f} s alone -> {load.ttft_s:.3f} s at concurrency {inp.concurrency} "
        f"({ttft_ratio:.1f}x); TPOT {c1.tpot_s * 1e3:.1f} -> {load.tpot_s * 1e3:.1f} ms ({tpot_ratio:.2f}x); {how}"
    )
    return Queueing(
        measured=True,
        concurrency=inp.concurrency,
        ttft_c1_s=c1.ttft_s,
        ttft_load_s=load.ttft_s,
        wait_s=d,
        wait_s_ci=(lo, hi) if math.isfinite(lo) else None,
        client_queue_s=load.client_queue_s,
        server_queue_s=server_q,
        tpot_c1_s=c1.tpot_s,
        tpot_load_s=load.tpot_s,
        interference=interference,
        note=note,
    )


@dataclass(frozen=True, slots=True)
class DecodeShare:
    at_concurrency: int
    decode_share: float  # mean(E2E - TTFT) / mean(E2E)
    decode_s: float
    e2e_s: float
    ttft_s: float
    tpot_s: float
    tpot_p50_s: float
    output_tokens: float | None


def decode_share(point: LoadPoint) -> DecodeShare:
    return DecodeShare(
        at_concurrency=point.concurrency,
        decode_share=point.decode_s / point.e2e_s if point.e2e_s > 0 else math.nan,
        decode_s=point.decode_s,
        e2e_s=point.e2e_s,
        ttft_s=point.ttft_s,
        tpot_s=point.tpot_s,
        tpot_p50_s=point.tpot_p50_s,
        output_tokens=point.output_tokens,
    )


# --------------------------------------------------------------------------------------------------------------
# Findings


@dataclass(frozen=True, slots=True)
class Finding:
    cause: str  # decode | prefill | queueing | cold_start
    title: str
    explained_s: float  # seconds this cause adds to a request it affects
    share: float  # explained_s / latency of such a request
    affects: str  # which requests
    evidence: str
    next_step: str
    rank: int = 0  # 1 = explains the most latency; 0 = not a finding (below the thresholds)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    findings: tuple[Finding, ...]  # ranked, most latency first
    checked: tuple[Finding, ...]  # causes measured and found below the thresholds (rank 0)
    cold_start: ColdStart
    prefill: Prefill
    prefix_caching: PrefixCaching
    queueing: Queueing
    decode: DecodeShare | None
    baseline: LoadPoint | None  # the workload at concurrency 1
    operating: LoadPoint | None  # the workload at the operating point (None: not measured)
    disaggregation: str | None  # the suggestion and its cost, only when interference was measured
    warnings: tuple[str, ...]
    server: Mapping[str, ServerPhase] = field(default_factory=dict)
    phases: Mapping[str, Sequence[RequestRecord]] = field(default_factory=dict, repr=False)

    def server_vs_client(self, phases: Mapping[str, Sequence[RequestRecord]]) -> dict[str, dict[str, Any]]:
        """Per phase with server metrics: what the server says beside what the client measured. The client's TTFT
        includes the network and HTTP handling the server does not see; prompt token counts should match exactly."""
        out = {}
        for name, srv in self.server.items():
            ok = _ok(phases.get(name, ()))
            ms = [request_metrics(r) for r in ok]
            tpots = [m.tpot_s for m in ms if m.tpot_s is not None]
            prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
            out[name] = {
                "server": srv.to_dict(),
                "client_requests_ok": len(ok),
                "client_ttft_mean_s": _mean(_ttfts(ok)) if ok else None,
                "client_tpot_mean_s": _mean(tpots) if tpots else None,
                "client_prompt_tokens": sum(prompts) if len(prompts) == len(ok) else None,
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """diagnosis.json's measured part (the orchestrator adds run metadata)."""
        fit = self.prefill.fit
        pre: dict[str, Any] = {
            "s_per_token": fit.s_per_token if fit else None,
            "s_per_token_ci": list(fit.s_per_token_ci) if fit else None,
            "tokens_per_s": fit.tokens_per_s if fit else None,
            "tokens_per_s_ci": list(fit.tokens_per_s_ci) if fit else None,
            "overhead_s": fit.overhead_s if fit else None,
            "overhead_s_ci": list(fit.overhead_s_ci) if fit else None,
            "r2": fit.r2 if fit else None,
            "residual_s": fit.residual_s if fit else None,
            "n": len(self.prefill.points),
            "token_source": self.prefill.token_source,
            "by_length": list(self.prefill.by_length),
            "points": [list(p) for p in self.prefill.points],
            "confidence": CONFIDENCE,
        }
        q = asdict(self.queueing)
        return {
            "findings": [asdict(f) for f in self.findings],
            "checked": [asdict(f) for f in self.checked],
            "cold_start": asdict(self.cold_start),
            "prefill": pre,
            "prefix_caching": asdict(self.prefix_caching),
            "queueing": q,
            "decode": asdict(self.decode) if self.decode else None,
            "workload": {
                "concurrency_1": asdict(self.baseline) if self.baseline else None,
                "operating_point": asdict(self.operating) if self.operating else None,
            },
            "disaggregation": self.disaggregation,
            "server_metrics": self.server_vs_client(self.phases),
            "warnings": list(self.warnings),
        }


NEXT_DECODE = (
    "evaluate speculative decoding on this workload: write an experiment with `speculab init --url URL` and run "
    "`speculab run experiment.yaml` (it shortens exactly this part)"
)
NEXT_COLD = (
    "keep the server warm (at least one replica always up; a keep-alive request more often than the idle timeout) "
    "or make it load faster (weights on local disk, cached compilation / CUDA graphs, a smaller image)"
)
NEXT_QUEUE = (
    "add capacity (more replicas, or a larger batch / --max-num-seqs if memory allows) or change scheduling "
    "(admission limits, priorities) so requests do not wait for a slot"
)


def _prefill_next(pc: PrefixCaching) -> str:
    if pc.enabled is True:
        cache = "prefix caching is already on (measured), so reuse shared prompt prefixes more (same system prompt"
        cache += " and documents first, in the same order)"
    elif pc.enabled is False:
        cache = "turn on prefix caching if your prompts share prefixes (it is off here: a repeated prefix was not"
        cache += " faster)"
    else:
        cache = "turn on prefix caching if your prompts share prefixes"
    return f"{cache}; use chunked prefill / prefill scheduling so long prompts do not stall others; shorten prompts"


def _finding_ok(explained: float, total: float, th: Thresholds) -> bool:
    return math.isfinite(explained) and explained >= th.min_effect_s and total > 0 and explained / total >= th.min_share


def analyze(inp: Inputs, approx_tokens: Mapping[int, int] | None = None) -> Diagnosis:
    """Every check, then the findings ranked by explained latency."""
    th = inp.thresholds
    warnings: list[str] = []
    cs = cold_start(inp)
    pf = prefill(inp, approx_tokens)
    pc = prefix_caching(inp, pf.fit)
    c1 = load_point(inp.phases.get(PHASE_BASELINE, ()), 1)
    load = load_point(inp.phases.get(PHASE_LOAD, ()), inp.concurrency) if inp.concurrency > 1 else None
    op = load or c1
    prompt_mean = c1.prompt_tokens if c1 and c1.prompt_tokens is not None else inp.workload_prompt_tokens
    fit = pf.fit
    prefill_req_s = fit.s_per_token * prompt_mean if fit is not None and prompt_mean is not None else None
    qu = queueing(inp, c1, load, prefill_req_s)
    dec = decode_share(op) if op is not None else None

    for name, recs in inp.phases.items():
        bad = [r for r in recs if not r.ok and not r.warmup]
        if bad:
            first = bad[0].error
            msg = first.message[:160] if first is not None else ""
            warnings.append(f"{len(bad)} of {len(recs)} requests failed in phase {name} (first: {msg})")
    if fit is not None and fit.r2 < 0.8:
        warnings.append(
            f"TTFT is not linear in prompt length here (R² {fit.r2:.2f}): the prefill rate is an average over the "
            "sweep; see prefill.by_length"
        )
    if pf.token_source == "approximate":
        warnings.append("the server reported no prompt token counts: prefill per token uses approximate lengths")

    candidates: list[Finding] = []
    noise: set[str] = set()  # causes measured but not distinguishable from noise: never findings
    e2e = op.e2e_s if op is not None else math.nan
    if dec is not None:
        candidates.append(
            Finding(
                cause="decode",
                title="generation after the first token",
                explained_s=dec.decode_s,
                share=dec.decode_share,
                affects=f"every request (at concurrency {dec.at_concurrency})",
                evidence=(
                    f"E2E {dec.e2e_s:.3f} s of which {dec.decode_s:.3f} s ({dec.decode_share:.0%}) after the first "
                    f"token; TPOT {dec.tpot_s * 1e3:.1f} ms"
                    + (f" over {dec.output_tokens:.0f} output tokens" if dec.output_tokens else "")
                ),
                next_step=NEXT_DECODE,
            )
        )
    if fit is not None and prefill_req_s is not None:
        lo = fit.s_per_token_ci[0]
        if not (math.isfinite(lo) and lo > 0):
            noise.add("prefill")  # the prompt-length cost is not distinguishable from zero
        candidates.append(
            Finding(
                cause="prefill",
                title="long prompts (prefill)",
                explained_s=prefill_req_s,
                share=prefill_req_s / e2e if e2e > 0 else math.nan,
                affects="every request, in proportion to its prompt length",
                evidence=(
                    f"TTFT = {fit.overhead_s:.3f} s + {fit.s_per_token * 1e3:.3f} ms x prompt tokens "
                    f"(prefill {fit.tokens_per_s:,.0f} tokens/s, R² {fit.r2:.2f}); the workload's "
                    f"{prompt_mean:.0f}-token prompts cost {prefill_req_s:.3f} s of prefill"
                ),
                next_step=_prefill_next(pc),
            )
        )
    if qu.measured and qu.wait_s is not None:
        if qu.wait_s_ci is not None and not qu.wait_s_ci[0] > 0:
            noise.add("queueing")  # the extra TTFT at load is not distinguishable from zero
        client = f"; client-side wait {qu.client_queue_s:.3f} s" if qu.client_queue_s else ""
        candidates.append(
            Finding(
                cause="queueing",
                title=f"queueing at concurrency {qu.concurrency}",
                explained_s=max(0.0, qu.wait_s),
                share=max(0.0, qu.wait_s) / e2e if e2e > 0 else math.nan,
                affects=f"requests at the operating point (concurrency {qu.concurrency})",
                evidence=qu.note + client,
                next_step=NEXT_QUEUE,
            )
        )
    if cs.cold_start_s is not None:
        warm_e2e = c1.e2e_s if c1 is not None else (cs.warm_ttft_s or 0.0)
        explained = max(0.0, cs.cold_start_s)
        if not (cs.detected or cs.mode == "launch"):
            noise.add("cold_start")  # within the warm requests' spread
        if cs.mode == "launch":
            affects = "the first request after the server (re)starts: scale-from-zero, restarts, deploys"
            evidence = (
                f"process start -> ready (/health) {cs.process_ready_s or math.nan:.2f} s -> first token "
                f"{cs.process_first_token_s or math.nan:.2f} s"
            )
        else:
            affects = "the first request after start" + (
                f" or after {cs.idle_s:g} s idle" if cs.idle_s else ""
            )  # fmt: skip
            parts = [f"warm TTFT {cs.warm_ttft_s:.3f} s" if cs.warm_ttft_s is not None else "no warm TTFT"]
            if cs.first_request_ttft_s is not None:
                parts.append(f"first request {cs.first_request_ttft_s:.3f} s")
            if cs.after_idle_ttft_s is not None:
                parts.append(f"after {cs.idle_s:g} s idle {cs.after_idle_ttft_s:.3f} s")
            evidence = "; ".join(parts)
        candidates.append(
            Finding(
                cause="cold_start",
                title="cold start",
                explained_s=explained,
                share=explained / (explained + warm_e2e) if explained + warm_e2e > 0 else math.nan,
                affects=affects,
                evidence=evidence,
                next_step=NEXT_COLD,
            )
        )

    def is_finding(f: Finding) -> bool:
        total = f.explained_s / f.share if f.share and f.share > 0 else math.nan
        return f.cause not in noise and _finding_ok(f.explained_s, total, th)

    found = sorted((f for f in candidates if is_finding(f)), key=lambda f: -f.explained_s)
    ranked = tuple(_with_rank(f, i + 1) for i, f in enumerate(found))
    checked = tuple(f for f in candidates if not is_finding(f))
    disagg = None
    if qu.interference:
        disagg = (
            f"prefill and decode interfere under load ({qu.note}): prefill/decode disaggregation (separate prefill "
            "and decode servers) would keep long prefills from delaying first tokens. Its cost: the KV cache of every "
            "prompt is transferred from the prefill to the decode server (network bandwidth and latency per request) "
            "and a router must pair them; try chunked prefill first, which needs neither"
        )
    return Diagnosis(
        findings=ranked,
        checked=checked,
        cold_start=cs,
        prefill=pf,
        prefix_caching=pc,
        queueing=qu,
        decode=dec,
        baseline=c1,
        operating=load,
        disaggregation=disagg,
        warnings=tuple(warnings),
        server=dict(inp.server),
        phases=inp.phases,
    )


def _with_rank(f: Finding, rank: int) -> Finding:
    return Finding(f.cause, f.title, f.explained_s, f.share, f.affects, f.evidence, f.next_step, rank)


def sweep_lengths(max_prompt_tokens: int, points: int, min_tokens: int = 16) -> tuple[int, ...]:
    """Prompt lengths for the prefill sweep: `points` lengths from min_tokens to max_prompt_tokens, spaced
    geometrically (short prompts show the fixed overhead, long ones the slope), deduplicated."""
    hi = max(min_tokens, max_prompt_tokens)
    if points <= 1:
        return (hi,)
    xs = np.geomspace(min_tokens, hi, points)
    return tuple(sorted({round(float(x)) for x in xs}))
