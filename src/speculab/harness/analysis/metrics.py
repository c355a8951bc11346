"""Pure functions: request records -> per-request metrics -> run aggregates. Seconds everywhere.

Definitions (docs/metrics.md is the long form):
- TTFT = first text-carrying chunk - sent; E2E = last text-carrying chunk - sent (a trailing usage-only chunk
  does not count); non-streamed requests have E2E = end - sent and no TTFT.
- TPOT = (E2E - TTFT) / (output_tokens - 1), output_tokens from server usage when given.
- chunk gap = time between consecutive text chunks; per-token ITL spreads each gap over the tokens of the chunk
  that ended it (a gap g ending in a chunk of n tokens gives n ITL values of g/n).
- stall = a chunk gap above an absolute threshold *and* above k x the request's median gap.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from speculab.config import SloTargets
from speculab.harness.analysis.cost import request_meets_slo
from speculab.harness.analysis.stats import Distribution, describe
from speculab.harness.records import ErrorCategory, RequestRecord, TokenCountSource

# Per-chunk counts from these sources are measured; ONE_PER_CHUNK is an assumption and is not used for
# tokens-per-chunk distributions.
MEASURED_SOURCES = frozenset({TokenCountSource.CONTINUOUS_USAGE, TokenCountSource.LOGPROBS, TokenCountSource.TOKENIZER})


@dataclass(frozen=True, slots=True)
class StallConfig:
    """A gap is a stall when gap > threshold_s and gap > k x the request's median gap."""

    threshold_s: float = 0.2
    k: float = 3.0


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    index: int
    ok: bool
    warmup: bool
    queue_s: float
    ttft_s: float | None
    e2e_s: float | None
    tpot_s: float | None
    output_tokens: int | None
    output_tokens_source: str  # "usage" | "chunks" | "none"
    prompt_tokens: int | None
    n_chunks: int
    chunk_gaps_s: tuple[float, ...]
    tokens_per_chunk: tuple[int, ...]  # empty unless per-chunk counts were measured
    itl_s: tuple[float, ...]  # per-token inter-token latency after the first chunk; () when counts are unknown
    stall_count: int
    stalled_s: float  # total length of the stalled gaps
    token_count_source: TokenCountSource


def output_tokens(r: RequestRecord) -> tuple[int | None, str]:
    """Output token count and where it came from: server usage first, then measured per-chunk counts."""
    if r.completion_tokens is not None:
        return r.completion_tokens, "usage"
    if r.chunks and r.token_count_source in MEASURED_SOURCES and all(c.n_tokens is not None for c in r.chunks):
        return sum(c.n_tokens or 0 for c in r.chunks), "chunks"
    return None, "none"


def chunk_gaps(r: RequestRecord) -> tuple[float, ...]:
    """Gaps between consecutive text-carrying chunks, seconds."""
    ts = [c.t_s for c in r.chunks]
    return tuple(b - a for a, b in pairwise(ts))


def itl_counts_known(r: RequestRecord, n_out: int | None) -> bool:
    """Whether per-token ITL can be computed: per-chunk counts were measured, or one token per chunk is assumed
    and the server's usage confirms it (output tokens = chunks, or chunks + 1 for an end token that carries no
    text). Otherwise a speculative chunk of 4 tokens would count as one 40 ms ITL: the conflation we avoid."""
    if r.token_count_source in MEASURED_SOURCES and all(c.n_tokens is not None for c in r.chunks):
        return True
    return (
        r.token_count_source is TokenCountSource.ONE_PER_CHUNK and n_out is not None and 0 <= n_out - len(r.chunks) <= 1
    )


def per_token_itl(r: RequestRecord) -> tuple[float, ...]:
    """Each gap g ending in a chunk of n tokens contributes n values g/n; tokens of the first chunk contribute
    none (their latency is TTFT). Chunks of unknown size count as one token."""
    out: list[float] = []
    for prev, cur in pairwise(r.chunks):
        n = cur.n_tokens if cur.n_tokens is not None and cur.n_tokens > 0 else 1
        out.extend([(cur.t_s - prev.t_s) / n] * n)
    return tuple(out)


def stalls(gaps: Sequence[float], cfg: StallConfig) -> tuple[int, float]:
    """(count, total seconds) of gaps above both the absolute threshold and k x the median gap."""
    if not gaps:
        return 0, 0.0
    med = statistics.median(gaps)
    stalled = [g for g in gaps if g > cfg.threshold_s and g > cfg.k * med]
    return len(stalled), float(sum(stalled))


def request_metrics(r: RequestRecord, stall: StallConfig = StallConfig()) -> RequestMetrics:
    n_out, n_src = output_tokens(r)
    if r.chunks:
        ttft: float | None = r.chunks[0].t_s - r.sent_s
        e2e: float | None = r.chunks[-1].t_s - r.sent_s
    elif r.stream:
        ttft, e2e = None, (r.end_s - r.sent_s if r.ok else None)
    else:
        ttft, e2e = None, r.end_s - r.sent_s
    tpot = None
    if ttft is not None and e2e is not None and n_out is not None and n_out > 1:
        tpot = (e2e - ttft) / (n_out - 1)
    gaps = chunk_gaps(r)
    measured = r.token_count_source in MEASURED_SOURCES and all(c.n_tokens is not None for c in r.chunks)
    tpc = tuple(int(c.n_tokens or 0) for c in r.chunks) if measured else ()
    itl = per_token_itl(r) if itl_counts_known(r, n_out) else ()
    n_stall, stalled = stalls(gaps, stall)
    return RequestMetrics(
        index=r.index,
        ok=r.ok,
        warmup=r.warmup,
        queue_s=r.queue_s,
        ttft_s=ttft,
        e2e_s=e2e,
        tpot_s=tpot,
        output_tokens=n_out,
        output_tokens_source=n_src,
        prompt_tokens=r.prompt_tokens,
        n_chunks=len(r.chunks),
        chunk_gaps_s=gaps,
        tokens_per_chunk=tpc,
        itl_s=itl,
        stall_count=n_stall,
        stalled_s=stalled,
        token_count_source=r.token_count_source,
    )


DEFAULT_MAX_ERROR_RATE = 0.02  # --max-error-rate: above it, no verdict at that load and a non-zero exit (code 4)


def endpoint_error_rate(error: int, sent: int, errors_by_category: Mapping[str, int]) -> float:
    """Share of requests the endpoint failed. Requests the user cancelled (Ctrl-C) count as neither failed nor sent:
    an interrupted run is partial, not broken. NaN when no request counts."""
    cancelled = errors_by_category.get(ErrorCategory.CANCELLED.value, 0)
    n = sent - cancelled
    return (error - cancelled) / n if n > 0 else math.nan


def exceeds_error_rate(rate: float, max_error_rate: float) -> bool:
    """The one error gate: verdicts are withheld and commands exit with code 4 above it."""
    return math.isfinite(rate) and rate > max_error_rate


def error_gate(error: int, sent: int, errors_by_category: Mapping[str, int], max_error_rate: float) -> str | None:
    """Why these requests fail the error gate ("372 of 400 requests failed (93.0%: connect 372), more than ..."),
    or None when they pass it."""
    rate = endpoint_error_rate(error, sent, errors_by_category)
    if not exceeds_error_rate(rate, max_error_rate):
        return None
    cancelled = errors_by_category.get(ErrorCategory.CANCELLED.value, 0)
    cats = ", ".join(f"{k} {v}" for k, v in sorted(errors_by_category.items()) if k != ErrorCategory.CANCELLED.value)
    return (
        f"{error - cancelled} of {sent - cancelled} requests failed ({rate:.1%}: {cats}), more than "
        f"--max-error-rate {max_error_rate:.0%} allows"
    )


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Aggregates over the measured (non-warmup) requests of one run."""

    sent: int
    ok: int
    error: int
    errors_by_category: dict[str, int]
    error_examples: dict[str, str]  # the first message seen per category, for diagnosis
    duration_s: float
    requests_per_s: float
    output_tok_s: float
    total_tok_s: float
    goodput_rps: float | None  # None when no SLO was set
    goodput_fraction: float | None  # good / sent
    achieved_rate_rps: float | None  # send rate actually achieved, (n-1)/(last send - first send)
    scheduled_rate_rps: float | None  # rate of the drawn schedule, (n-1)/(last scheduled - first scheduled)
    distributions: dict[str, Distribution]
    token_count_sources: dict[str, int]
    output_tokens_total: int
    prompt_tokens_total: int
    output_tokens_unknown: int  # successful requests whose output length is unknown (excluded from tok/s)
    stalled_requests: int
    slo: SloTargets = field(default_factory=SloTargets)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": {
                "sent": self.sent,
                "ok": self.ok,
                "error": self.error,
                "errors_by_category": dict(self.errors_by_category),
                "error_examples": dict(self.error_examples),
            },
            "metrics": {k: v.to_dict() for k, v in self.distributions.items()},
            "throughput": {
                "duration_s": self.duration_s,
                "requests_per_s": self.requests_per_s,
                "output_tok_s": self.output_tok_s,
                "total_tok_s": self.total_tok_s,
                "goodput_rps": self.goodput_rps,
                "goodput_fraction": self.goodput_fraction,
            },
            "tokens": {
                "output_total": self.output_tokens_total,
                "prompt_total": self.prompt_tokens_total,
                "output_unknown_requests": self.output_tokens_unknown,
                "count_sources": dict(self.token_count_sources),
            },
            "stalls": {"requests_with_stalls": self.stalled_requests},
            "achieved_rate_rps": self.achieved_rate_rps,
            "scheduled_rate_rps": self.scheduled_rate_rps,
            "slo": {"ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s, "e2e_s": self.slo.e2e_s},
        }


def _rate_rps(times_s: Sequence[float]) -> float | None:
    """(n - 1) / (last - first): events per second between the first and the last; None under two events."""
    if len(times_s) < 2 or max(times_s) <= min(times_s):
        return None
    return (len(times_s) - 1) / (max(times_s) - min(times_s))


def run_window_s(records: Sequence[RequestRecord]) -> float:
    """Measured wall time: first scheduled send -> last completion, over the given records."""
    if not records:
        return 0.0
    return max(r.end_s for r in records) - min(r.scheduled_s for r in records)


def aggregate(
    records: Iterable[RequestRecord],
    *,
    stall: StallConfig = StallConfig(),
    slo: SloTargets = SloTargets(),
    duration_s: float | None = None,
) -> RunMetrics:
    """Run-level numbers over non-warmup records. Latency distributions use successful requests only;
    chunk gaps, tokens per chunk and ITL pool every chunk of every successful request."""
    recs = [r for r in records if not r.warmup]
    per = [request_metrics(r, stall) for r in recs]
    good = [m for m in per if m.ok]
    dur = run_window_s(recs) if duration_s is None else duration_s
    out_total = sum(m.output_tokens or 0 for m in good)
    prompt_total = sum(m.prompt_tokens or 0 for m in good)

    def rate(x: float) -> float:
        return x / dur if dur > 0 else float("nan")

    # one rule for every goodput number: the same function decides SLO attainment in A/B reports
    n_good_slo = sum(1 for m in good if request_meets_slo(m.ttft_s, m.tpot_s, m.e2e_s, slo)) if slo.any else None
    achieved = _rate_rps([r.sent_s for r in recs])
    scheduled = _rate_rps([r.scheduled_s for r in recs])

    tpc_values: list[float] = [n for m in good for n in m.tokens_per_chunk]
    if not tpc_values:
        # no measured per-chunk counts: fall back to each request's mean (usage tokens / chunks)
        tpc_values = [m.output_tokens / m.n_chunks for m in good if m.output_tokens is not None and m.n_chunks > 0]
    dists = {
        "ttft_s": describe(m.ttft_s for m in good if m.ttft_s is not None),
        "tpot_s": describe(m.tpot_s for m in good if m.tpot_s is not None),
        "e2e_s": describe(m.e2e_s for m in good if m.e2e_s is not None),
        "chunk_gap_s": describe(g for m in good for g in m.chunk_gaps_s),
        "itl_s": describe(x for m in good for x in m.itl_s),
        "tokens_per_chunk": describe(tpc_values),
        "output_tokens": describe(m.output_tokens for m in good if m.output_tokens is not None),
        "prompt_tokens": describe(m.prompt_tokens for m in good if m.prompt_tokens is not None),
        "queue_s": describe(m.queue_s for m in per),
        "stall_count": describe(m.stall_count for m in good),
        "stalled_s": describe(m.stalled_s for m in good),
    }
    cats = Counter(r.error.category.value for r in recs if r.error is not None)
    examples: dict[str, str] = {}
    for r in recs:
        if r.error is not None:
            examples.setdefault(r.error.category.value, r.error.message[:300])
    return RunMetrics(
        sent=len(recs),
        ok=len(good),
        error=len(recs) - len(good),
        errors_by_category=dict(sorted(cats.items())),
        error_examples=dict(sorted(examples.items())),
        duration_s=dur,
        requests_per_s=rate(len(good)),
        output_tok_s=rate(out_total),
        total_tok_s=rate(out_total + prompt_total),
        goodput_rps=rate(n_good_slo) if n_good_slo is not None else None,
        goodput_fraction=(n_good_slo / len(recs) if recs else float("nan")) if n_good_slo is not None else None,
        achieved_rate_rps=achieved,
        scheduled_rate_rps=scheduled,
        distributions=dists,
        token_count_sources=dict(sorted(Counter(m.token_count_source.value for m in good).items())),
        output_tokens_total=out_total,
        prompt_tokens_total=prompt_total,
        output_tokens_unknown=sum(1 for m in good if m.output_tokens is None),
        stalled_requests=sum(1 for m in good if m.stall_count > 0),
        slo=slo,
    )
