"""What `speculab bench` holds in memory over a long run: nothing per request while the load runs (records go to
requests.jsonl only), and compact arrays, not records, while the summary is computed from that file.

Thousands of in-process fake requests (no sockets) through the real runner, the run's requests.jsonl writer and the
summary; memory is counted by tracemalloc in bytes, never timed.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from pathlib import Path

import pytest

from speculab.commands.bench.run import summarize_records
from speculab.config import SloTargets
from speculab.harness.analysis.metrics import StallConfig, aggregate
from speculab.harness.load.runner import LoadConfig, run_load
from speculab.harness.records import (
    ChunkEvent,
    ErrorCategory,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
    TokenCountSource,
)
from speculab.harness.results.requests_file import RequestsFile, read_records

# 1,500 requests: keeping the records would grow the trace by ~5 KB each, 5.6 MB between the two points measured,
# against 100 B a request allowed and 6.8 B measured (3,000 took 10.7 s of CPU a test under tracemalloc in the suite)
N = 1500
CHUNKS = 32
ITEMS = tuple(RequestSpec(index=i, prompt=f"prompt {i}") for i in range(50))


class FakeStream:
    """A streamed request as the client records it: 32 one-token chunks of text with continuous usage, on a scripted
    clock. One in ten fails, leaving its exception's cycle (traceback -> frame -> exception) behind as real failures
    do."""

    def __init__(self) -> None:
        self.t = 0.0

    async def __call__(self, session, spec, *, scheduled_s, warmup=False):
        sent = self.t
        await asyncio.sleep(0)  # other requests run meanwhile, as they do in a real run
        error = None
        if spec.index % 10 == 3:
            try:
                raise ConnectionResetError("connection lost mid-stream")
            except ConnectionResetError as e:
                kept = e  # the frame now holds the exception that holds the frame: a cycle
                error = ErrorInfo(ErrorCategory.DROPPED, f"connection lost: {kept}")
        chunks = tuple(ChunkEvent(sent + 0.05 + 0.01 * k, f"word{k} ", 1) for k in range(CHUNKS))
        self.t += 0.001
        return RequestRecord(
            index=spec.index,
            scheduled_s=scheduled_s,
            sent_s=sent,
            end_s=chunks[-1].t_s + 0.001,
            chunks=chunks,
            output_text="".join(c.text for c in chunks),
            prompt_tokens=12,
            completion_tokens=CHUNKS,
            token_count_source=TokenCountSource.CONTINUOUS_USAGE,
            finish_reason="length",
            error=error,
            warmup=warmup,
        )


def traced_bytes() -> int:
    gc.collect()  # what is garbage is not retained (the collector sees everything but what the runner froze)
    return tracemalloc.get_traced_memory()[0]


async def run(path: Path) -> dict[int, int]:
    """The bench's load phase: the runner, records to requests.jsonl and nowhere else. Bytes traced at two points."""
    out = RequestsFile(path)
    at: dict[int, int] = {}

    def progress(p):
        if p.finished in (N // 4, N) and p.finished not in at:
            at[p.finished] = traced_bytes()

    load = LoadConfig(concurrency=16, num_prompts=N, warmup=16)
    await run_load(ITEMS, FakeStream(), None, load, on_record=out.append, on_progress=progress, clock=lambda: 0.0)
    out.close()
    return at


@pytest.mark.slow
def test_nothing_per_request_is_retained_while_the_load_runs(tmp_path: Path):
    tracemalloc.start()
    try:
        at = asyncio.run(run(tmp_path / "requests.jsonl"))
    finally:
        tracemalloc.stop()
    per_request = (at[N] - at[N // 4]) / (N - N // 4)
    # a record of 32 chunks alone is ~5 KB of Python objects; keeping records (or freezing what failures leave in
    # cycles) grows by that much per request
    assert per_request < 100, f"{per_request:.0f} bytes retained per request"
    assert len(read_records(tmp_path / "requests.jsonl")) == N + 16  # nothing lost: every record is on disk


@pytest.mark.slow
def test_the_summary_holds_compact_values_not_records(tmp_path: Path):
    path = tmp_path / "requests.jsonl"
    asyncio.run(run(path))
    stall, slo = StallConfig(), SloTargets(ttft_s=0.1)
    tracemalloc.start()
    try:
        base = traced_bytes()
        records = read_records(path)
        held = traced_bytes() - base  # the records themselves, as the summary once held them
        expected = aggregate(records, stall=stall, slo=slo)
        del records
        base = traced_bytes()
        tracemalloc.reset_peak()
        m, hints = summarize_records(path, stall, slo)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert m == expected and hints == []
    assert m.sent == N and m.error == N // 10 and m.distributions["chunk_gap_s"].n == (N - N // 10) * (CHUNKS - 1)
    # per request, ~95 values of 8 bytes (gaps, ITL, tokens per chunk, latencies): a few times less than the records
    assert peak < held / 3, f"summary peak {peak / N:.0f} B/request vs {held / N:.0f} B/request of records"
