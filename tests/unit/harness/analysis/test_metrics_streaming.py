"""`aggregate` reads its records once, one at a time (`RunAccumulator`), and gives exactly the numbers it gave when it
held them all: pinned against that earlier definition, kept below verbatim, on seeded random runs and edge cases."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from speculab.config import SloTargets
from speculab.harness.analysis.cost import request_meets_slo
from speculab.harness.analysis.metrics import RunAccumulator, RunMetrics, StallConfig, aggregate, request_metrics
from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, TokenCountSource
from speculab.harness.results.requests_file import iter_records, write_records
from speculab.harness.stats import describe


def reference_aggregate(
    records: Iterable[RequestRecord],
    *,
    stall: StallConfig = StallConfig(),
    slo: SloTargets = SloTargets(),
    duration_s: float | None = None,
) -> RunMetrics:
    """`aggregate` as it was when it kept every record (speculab 25c5da4): the definition the fold must keep, with
    issue 36's one change: cancelled requests (Ctrl-C) are counted apart, in no other count or distribution."""

    def rate_rps(times_s: Sequence[float]) -> float | None:
        if len(times_s) < 2 or max(times_s) <= min(times_s):
            return None
        return (len(times_s) - 1) / (max(times_s) - min(times_s))

    measured = [r for r in records if not r.warmup]
    recs = [r for r in measured if not r.cancelled]
    per = [request_metrics(r, stall) for r in recs]
    good = [m for m in per if m.ok]
    window = max(r.end_s for r in recs) - min(r.scheduled_s for r in recs) if recs else 0.0
    dur = window if duration_s is None else duration_s
    out_total = sum(m.output_tokens or 0 for m in good)
    prompt_total = sum(m.prompt_tokens or 0 for m in good)

    def rate(x: float) -> float:
        return x / dur if dur > 0 else float("nan")

    n_good_slo = sum(1 for m in good if request_meets_slo(m.ttft_s, m.tpot_s, m.e2e_s, slo)) if slo.any else None
    tpc_values: list[float] = [n for m in good for n in m.tokens_per_chunk]
    if not tpc_values:
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
        # every successful request's output length unknown: tok/s not measured (NaN), not 0
        output_tok_s=rate(out_total) if not good or any(m.output_tokens is not None for m in good) else float("nan"),
        total_tok_s=(
            rate(out_total + prompt_total)
            if not good or any(m.output_tokens is not None for m in good)
            else float("nan")
        ),
        goodput_rps=rate(n_good_slo) if n_good_slo is not None else None,
        goodput_fraction=(n_good_slo / len(recs) if recs else float("nan")) if n_good_slo is not None else None,
        achieved_rate_rps=rate_rps([r.sent_s for r in recs]),
        scheduled_rate_rps=rate_rps([r.scheduled_s for r in recs]),
        distributions=dists,
        token_count_sources=dict(sorted(Counter(m.token_count_source.value for m in good).items())),
        output_tokens_total=out_total,
        prompt_tokens_total=prompt_total,
        output_tokens_unknown=sum(1 for m in good if m.output_tokens is None),
        stalled_requests=sum(1 for m in good if m.stall_count > 0),
        slo=slo,
        cancelled=len(measured) - len(recs),
    )


def exact(m: RunMetrics) -> str:
    """Every number to the last bit (repr of floats; NaN as NaN), in a form two runs can be compared by."""
    return json.dumps(m.to_dict(), sort_keys=True)


ERRORS = (
    ErrorInfo(ErrorCategory.HTTP, "HTTP 503: overloaded", 503),
    ErrorInfo(ErrorCategory.HTTP, "HTTP 400: unknown field continuous_usage_stats", 400),
    ErrorInfo(ErrorCategory.DROPPED, "stream ended before [DONE] after 3 events"),
    ErrorInfo(ErrorCategory.TIMEOUT, "no complete response within 1 s"),
    ErrorInfo(ErrorCategory.CANCELLED, "cancelled: the run was interrupted"),
    ErrorInfo(ErrorCategory.ERROR_EVENT, "x" * 500),  # examples are cut to 300 characters
)
SOURCES = tuple(TokenCountSource)


def random_record(rng: random.Random, index: int) -> RequestRecord:
    """A request of any kind the client records: streamed or not, any token-count source, usage or none, chunks of
    unknown size, stalls, queueing, failures before and after chunks, warmup."""
    scheduled = rng.uniform(0, 100)
    sent = scheduled + (rng.expovariate(50) if rng.random() < 0.3 else 0.0)
    stream = rng.random() < 0.9
    source = rng.choice(SOURCES) if stream else TokenCountSource.NONE
    chunks: list[ChunkEvent] = []
    t = sent + rng.uniform(0.01, 0.3)
    for _ in range(rng.choice((0, 1, 1, 2, 5, 17, 40)) if stream else 0):
        n = rng.choice((1, 1, 2, 3, 4)) if source is not TokenCountSource.ONE_PER_CHUNK else 1
        chunks.append(ChunkEvent(t, "tok " * n, None if rng.random() < 0.05 else n))
        t += rng.uniform(0.5, 1.5) if rng.random() < 0.02 else rng.expovariate(50)  # the odd stall
    n_tokens = sum(c.n_tokens or 1 for c in chunks)
    error = rng.choice(ERRORS) if rng.random() < 0.15 else None
    return RequestRecord(
        index=index,
        scheduled_s=scheduled,
        sent_s=sent,
        end_s=t + rng.uniform(0, 0.01),
        chunks=tuple(chunks),
        output_text="".join(c.text for c in chunks),
        prompt_tokens=rng.randint(1, 900) if rng.random() < 0.9 else None,
        completion_tokens=(n_tokens + rng.choice((0, 0, 1))) if rng.random() < 0.8 else None,
        token_count_source=source,
        error=error,
        warmup=rng.random() < 0.1,
        stream=stream,
    )


CONFIGS = [
    dict(),
    dict(slo=SloTargets(ttft_s=0.1, tpot_s=0.03)),
    dict(slo=SloTargets(e2e_s=0.5), stall=StallConfig(threshold_s=0.05, k=2.0)),
    dict(duration_s=12.5),
    dict(duration_s=0.0, slo=SloTargets(ttft_s=0.2)),
]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_streamed_aggregate_is_the_held_one_to_the_last_bit(seed, cfg):
    rng = random.Random(seed)
    recs = [random_record(rng, i) for i in range(rng.choice((1, 3, 40, 400)))]
    assert exact(aggregate(iter(recs), **cfg)) == exact(reference_aggregate(recs, **cfg))


def one(**kw) -> RequestRecord:
    base = dict(
        index=0, scheduled_s=1.0, sent_s=1.0, end_s=1.5, chunks=(ChunkEvent(1.1, "a", 1), ChunkEvent(1.4, "b", 1))
    )
    return RequestRecord(**(base | kw))


EDGE_CASES = {
    "zero requests": [],
    "only warmup": [one(warmup=True), one(index=1, warmup=True)],
    "one request": [one()],
    "one failed request": [one(error=ERRORS[0], chunks=())],
    "no usage, counts assumed": [one(token_count_source=TokenCountSource.ONE_PER_CHUNK)],
    "no usage, counts measured": [one(token_count_source=TokenCountSource.CONTINUOUS_USAGE)],
    "usage, no measured counts": [one(completion_tokens=7, token_count_source=TokenCountSource.ONE_PER_CHUNK)],
    "not streamed": [one(chunks=(), stream=False, completion_tokens=5, prompt_tokens=3)],
    "every request failed": [one(index=i, error=ERRORS[i % len(ERRORS)], chunks=()) for i in range(7)],
    "warmup, errors, no usage": [one(warmup=True), one(index=1, error=ERRORS[2]), one(index=2, prompt_tokens=4)],
    "same send time": [one(index=i) for i in range(3)],
}


@pytest.mark.parametrize("name", EDGE_CASES)
@pytest.mark.parametrize("slo", [SloTargets(), SloTargets(ttft_s=0.2)], ids=["no-slo", "slo"])
def test_edge_cases_are_the_held_ones(name, slo):
    recs = EDGE_CASES[name]
    assert exact(aggregate(iter(recs), slo=slo)) == exact(reference_aggregate(recs, slo=slo))


def test_the_accumulator_gives_the_numbers_so_far_and_keeps_going():
    rng = random.Random(7)
    recs = [random_record(rng, i) for i in range(60)]
    acc = RunAccumulator()
    for r in recs[:30]:
        acc.add(r)
    assert exact(acc.result()) == exact(reference_aggregate(recs[:30]))
    for r in recs[30:]:
        acc.add(r)  # the arrays the first result() read from can still grow
    assert exact(acc.result()) == exact(reference_aggregate(recs))


def test_summary_read_back_from_requests_jsonl_is_the_in_memory_one(tmp_path: Path):
    rng = random.Random(3)
    recs = [random_record(rng, i) for i in range(300)]
    path = tmp_path / "requests.jsonl"
    write_records(path, recs)
    slo = SloTargets(ttft_s=0.15)
    assert exact(aggregate(iter_records(path), slo=slo)) == exact(reference_aggregate(recs, slo=slo))
    assert math.isfinite(aggregate(iter_records(path)).distributions["chunk_gap_s"].p99)
