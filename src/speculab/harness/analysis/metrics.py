"""Pure functions: request records -> per-request metrics -> run aggregates. Seconds everywhere.

Definitions (docs/metrics.md is the long form):
- TTFT = first text-carrying chunk - sent; E2E = last text-carrying chunk - sent (a trailing usage-only chunk
  does not count); non-streamed requests have E2E = end - sent and no TTFT.
- TPOT = (E2E - TTFT) / (output_tokens - 1), output_tokens from server usage when given.
- chunk gap = time between consecutive text chunks; per-token ITL spreads each gap over the tokens of the chunk
  that ended it (a gap g ending in a chunk of n tokens gives n ITL values of g/n).
- stall = a chunk gap above an absolute threshold *and* above k x the request's median gap.
- a record that holds only its first and last token's times (`RequestRecord.all_chunks` False: another tool's file
  keeps no more) has none of these: no gap, tokens per chunk, ITL or stall is made up from the span between them.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from speculab.config import SloTargets
from speculab.harness.analysis.cost import request_meets_slo
from speculab.harness.analysis.figures import COMPARED_METRICS, E2E, ITL, TPOT, TTFT
from speculab.harness.records import ErrorCategory, RequestRecord, TokenCountSource
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import Distribution, describe

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
    stall_count: int | None  # None: the record does not hold its chunks (`RequestRecord.all_chunks`)
    stalled_s: float | None  # total length of the stalled gaps; None as stall_count
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
    gaps = chunk_gaps(r) if r.all_chunks else ()
    measured = r.token_count_source in MEASURED_SOURCES and all(c.n_tokens is not None for c in r.chunks)
    tpc = tuple(int(c.n_tokens or 0) for c in r.chunks) if measured and r.all_chunks else ()
    itl = per_token_itl(r) if r.all_chunks and itl_counts_known(r, n_out) else ()
    n_stall, stalled = stalls(gaps, stall) if r.all_chunks else (None, None)
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


# What `request_values` gives of each request: every compared metric, and its prompt and output tokens (the
# comparison's breakdown by prompt length and its count of one-token answers).
REQUEST_VALUES = (*(c.name for c in COMPARED_METRICS), "prompt_tokens", "output_tokens")


def request_values(m: RequestMetrics) -> dict[str, float | None]:
    """One request's per-prompt values (`REQUEST_VALUES`), None where not defined for it."""
    values: dict[str, float | None] = {c.name: c.extract(m) for c in COMPARED_METRICS}
    values["prompt_tokens"], values["output_tokens"] = m.prompt_tokens, m.output_tokens
    return values


DEFAULT_MAX_ERROR_RATE = 0.02  # --max-error-rate: above it, no verdict at that load and a non-zero exit (code 4)


def endpoint_error_rate(error: int, sent: int, errors_by_category: Mapping[str, int]) -> float:
    """Share of requests the endpoint failed. Requests the user cancelled (Ctrl-C) count as neither failed nor sent:
    an interrupted run is partial, not broken. NaN when no request counts. (`aggregate` counts them in neither
    already; summaries saved before it did carry them in `errors_by_category`, so they are taken out here.)"""
    cancelled = errors_by_category.get(ErrorCategory.CANCELLED.value, 0)
    n = sent - cancelled
    return (error - cancelled) / n if n > 0 else math.nan


def exceeds_error_rate(rate: float, max_error_rate: float) -> bool:
    """The one error gate: verdicts are withheld and commands exit with code 4 above it."""
    return math.isfinite(rate) and rate > max_error_rate


def error_gate(
    error: int, sent: int, errors_by_category: Mapping[str, int], max_error_rate: float
) -> ReportWarning | None:
    """Why these requests fail the error gate, as a record (the report words it: "372 of 400 requests failed (93.0%:
    connect 372), more than ..."), or None when they pass it."""
    rate = endpoint_error_rate(error, sent, errors_by_category)
    if not exceeds_error_rate(rate, max_error_rate):
        return None
    cancelled = errors_by_category.get(ErrorCategory.CANCELLED.value, 0)
    by_category = {k: v for k, v in sorted(errors_by_category.items()) if k != ErrorCategory.CANCELLED.value}
    fields = {
        "failed": error - cancelled,
        "counted": sent - cancelled,
        "error_rate": rate,
        "by_category": by_category,
        "max_error_rate": max_error_rate,
    }
    return ReportWarning(WarningKind.ERROR_GATE, fields=fields)


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Aggregates over the measured (non-warmup) requests of one run."""

    sent: int  # cancelled requests (Ctrl-C) excluded: they count as neither sent nor failed
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
    stalled_requests: int | None  # None: no successful request holds its chunks (a first/last-token file)
    slo: SloTargets = field(default_factory=SloTargets)
    cancelled: int = 0  # in flight when the run was interrupted: in no count above

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": {
                "sent": self.sent,
                "ok": self.ok,
                "error": self.error,
                "errors_by_category": dict(self.errors_by_category),
                "error_examples": dict(self.error_examples),
                "cancelled": self.cancelled,
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
            "slo": self.slo.limits,
        }


def _rate_rps(n: int, first_s: float, last_s: float) -> float | None:
    """(n - 1) / (last - first): events per second between the first and the last; None under two events."""
    if n < 2 or last_s <= first_s:
        return None
    return (n - 1) / (last_s - first_s)


# The distributions of a run, in summary.json's order; each pools one value per request, or per chunk or token.
DISTRIBUTIONS = (
    TTFT.name,
    TPOT.name,
    E2E.name,
    "chunk_gap_s",
    ITL.name,
    "tokens_per_chunk",
    "output_tokens",
    "prompt_tokens",
    "queue_s",
    "stall_count",
    "stalled_s",
)


# What a record holding only its first and last token's times (`RequestRecord.all_chunks` False) leaves unknown:
# these distributions stay empty for it, and a run of only such records has none of them.
CHUNK_QUANTITIES = ("chunk_gap_s", "itl_s", "tokens_per_chunk", "stall_count", "stalled_s")


def quantities_not_held(records: Iterable[RequestRecord]) -> tuple[str, ...]:
    """What the records' result file does not hold: `CHUNK_QUANTITIES` when no successful measured record holds its
    chunks (every one is first/last-only); per-token ITL alone where every one is read from a file, which keeps no
    per-chunk token counts (vLLM's and AIPerf's chunk gaps are there, the tokens of each chunk are not); and output
    tok/s where no successful record's output length is known (no usage, no text: GenAI-Perf's files without usage);
    else () (a run with none successful says nothing of what its file holds)."""
    ok = [r for r in records if r.ok and not r.warmup]
    if not ok:
        return ()
    # every successful request's output length unknown: no token count to divide (tok/s, per-token ITL)
    untokened = ("output_tok_s",) if all(output_tokens(r)[0] is None for r in ok) else ()
    if not any(r.all_chunks for r in ok):
        return CHUNK_QUANTITIES + untokened
    return (("itl_s",) if all(r.token_count_source is TokenCountSource.RESULT_FILE for r in ok) else ()) + untokened


class RunAccumulator:
    """`aggregate`, one record at a time: what the run's numbers need, and never the records themselves.

    Each distribution's values sit in an `array('d')` (8 bytes a value, in the order records are added, so every
    percentile, mean and sum is the one `aggregate` computes over the same records in the same order); counts,
    sums and the send/schedule extremes are running scalars. A record's chunks and text are dropped once read.
    """

    def __init__(self, *, stall: StallConfig = StallConfig(), slo: SloTargets = SloTargets()):
        self.stall, self.slo = stall, slo
        self.sent = self.ok = self.cancelled = 0
        self._values = {name: array("d") for name in DISTRIBUTIONS}
        self._tpc_means = array("d")  # usage tokens / chunks per request: tokens per chunk when none were measured
        self._first_scheduled_s = self._first_sent_s = math.inf
        self._last_sent_s = self._last_scheduled_s = self._last_end_s = -math.inf
        self._errors: Counter[str] = Counter()
        self._error_examples: dict[str, str] = {}
        self._sources: Counter[str] = Counter()
        self._output_total = self._prompt_total = self._output_unknown = self._stalled = self._good_slo = 0
        self._stalls_known = 0  # successful requests whose chunks are all held (their stalls are known)

    def add(self, r: RequestRecord) -> None:
        """One finished request; warmup records are skipped, cancelled ones only counted as such."""
        if r.warmup:
            return
        if r.cancelled:  # cut off by the user's Ctrl-C: says nothing of the endpoint, so in no count or latency
            self.cancelled += 1
            return
        m = request_metrics(r, self.stall)
        self.sent += 1
        self._first_scheduled_s = min(self._first_scheduled_s, r.scheduled_s)
        self._last_scheduled_s = max(self._last_scheduled_s, r.scheduled_s)
        self._first_sent_s = min(self._first_sent_s, r.sent_s)
        self._last_sent_s = max(self._last_sent_s, r.sent_s)
        self._last_end_s = max(self._last_end_s, r.end_s)
        v = self._values
        v["queue_s"].append(m.queue_s)
        if r.error is not None:
            self._errors[r.error.category.value] += 1
            self._error_examples.setdefault(r.error.category.value, r.error.message[:300])
        if not m.ok:
            return
        # Latency distributions, token totals and goodput use successful requests only.
        self.ok += 1
        for name, x in ((TTFT.name, m.ttft_s), (TPOT.name, m.tpot_s), (E2E.name, m.e2e_s)):
            if x is not None:
                v[name].append(x)
        v["chunk_gap_s"].extend(m.chunk_gaps_s)
        v["itl_s"].extend(m.itl_s)
        v["tokens_per_chunk"].extend(m.tokens_per_chunk)
        if m.output_tokens is not None:
            v["output_tokens"].append(m.output_tokens)
            if m.n_chunks > 0 and r.all_chunks:  # of a first/last-only record: its tokens over 2, not its chunks
                self._tpc_means.append(m.output_tokens / m.n_chunks)
        else:
            self._output_unknown += 1
        if m.prompt_tokens is not None:
            v["prompt_tokens"].append(m.prompt_tokens)
        if m.stall_count is not None and m.stalled_s is not None:
            v["stall_count"].append(m.stall_count)
            v["stalled_s"].append(m.stalled_s)
            self._stalled += m.stall_count > 0
            self._stalls_known += 1
        self._output_total += m.output_tokens or 0
        self._prompt_total += m.prompt_tokens or 0
        self._sources[m.token_count_source.value] += 1
        if self.slo.any:  # one rule for every goodput number: the same function decides SLO attainment in A/B reports
            self._good_slo += request_meets_slo(m.ttft_s, m.tpot_s, m.e2e_s, self.slo)

    def result(self, duration_s: float | None = None) -> RunMetrics:
        """The run's numbers so far. `duration_s` overrides the measured window (first scheduled -> last end)."""
        window_s = self._last_end_s - self._first_scheduled_s if self.sent else 0.0
        dur = window_s if duration_s is None else duration_s

        def rate(x: float) -> float:
            return x / dur if dur > 0 else float("nan")

        # no successful request's output length known (a file that keeps neither usage nor text: GenAI-Perf's without
        # usage): the tokens are not measured, not 0, so neither is tok/s
        tokens_known = not self.ok or self._output_unknown < self.ok
        n_good_slo = self._good_slo if self.slo.any else None
        good_fraction = (n_good_slo / self.sent if self.sent else float("nan")) if n_good_slo is not None else None
        values = {name: np.frombuffer(a, dtype=np.float64) for name, a in self._values.items()}
        if values["tokens_per_chunk"].size == 0:
            # no measured per-chunk counts: fall back to each request's mean (usage tokens / chunks)
            values["tokens_per_chunk"] = np.frombuffer(self._tpc_means, dtype=np.float64)
        return RunMetrics(
            sent=self.sent,
            ok=self.ok,
            error=self.sent - self.ok,
            errors_by_category=dict(sorted(self._errors.items())),
            error_examples=dict(sorted(self._error_examples.items())),
            duration_s=dur,
            requests_per_s=rate(self.ok),
            output_tok_s=rate(self._output_total) if tokens_known else float("nan"),
            total_tok_s=rate(self._output_total + self._prompt_total) if tokens_known else float("nan"),
            goodput_rps=rate(n_good_slo) if n_good_slo is not None else None,
            goodput_fraction=good_fraction,
            achieved_rate_rps=_rate_rps(self.sent, self._first_sent_s, self._last_sent_s),
            scheduled_rate_rps=_rate_rps(self.sent, self._first_scheduled_s, self._last_scheduled_s),
            distributions={name: describe(values[name]) for name in DISTRIBUTIONS},
            token_count_sources=dict(sorted(self._sources.items())),
            output_tokens_total=self._output_total,
            prompt_tokens_total=self._prompt_total,
            output_tokens_unknown=self._output_unknown,
            stalled_requests=self._stalled if self._stalls_known or not self.ok else None,
            slo=self.slo,
            cancelled=self.cancelled,
        )


def aggregate(
    records: Iterable[RequestRecord],
    *,
    stall: StallConfig = StallConfig(),
    slo: SloTargets = SloTargets(),
    duration_s: float | None = None,
) -> RunMetrics:
    """Run-level numbers over non-warmup records. Latency distributions use successful requests only;
    chunk gaps, tokens per chunk and ITL pool every chunk of every successful request. `records` is read once:
    a generator over requests.jsonl keeps one record in memory at a time (see `RunAccumulator`)."""
    acc = RunAccumulator(stall=stall, slo=slo)
    for r in records:
        acc.add(r)
    return acc.result(duration_s)
