import math

import pytest

from speculab.bench.metrics import SLO, StallConfig, aggregate, per_token_itl, request_metrics, stalls
from speculab.bench.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, TokenCountSource


def rec(
    index=0,
    sent=10.0,
    chunks=((10.1, 2), (10.12, 2), (10.14, 2)),
    usage=6,
    src=TokenCountSource.CONTINUOUS_USAGE,
    error=None,
    end=None,
    warmup=False,
    stream=True,
    scheduled=None,
    prompt=4,
):
    ch = tuple(ChunkEvent(t, "x" * n, n) for t, n in chunks)
    return RequestRecord(
        index=index,
        scheduled_s=sent if scheduled is None else scheduled,
        sent_s=sent,
        end_s=end if end is not None else (ch[-1].t_s + 0.001 if ch else sent + 0.5),
        chunks=ch,
        completion_tokens=usage,
        prompt_tokens=prompt,
        token_count_source=src,
        error=error,
        warmup=warmup,
        stream=stream,
    )


def test_core_rules():
    m = request_metrics(rec())
    assert m.ttft_s == pytest.approx(0.1)
    assert m.e2e_s == pytest.approx(0.14)
    assert m.e2e_s - m.ttft_s == pytest.approx(sum(m.chunk_gaps_s))
    assert m.tpot_s == pytest.approx(0.04 / 5)
    assert m.tokens_per_chunk == (2, 2, 2)
    # per-token ITL: each 20 ms gap ending in a 2-token chunk gives two 10 ms values
    assert m.itl_s == pytest.approx((0.01, 0.01, 0.01, 0.01))


def test_e2e_ignores_trailing_usage_chunk_time():
    m = request_metrics(rec(end=12.0))  # usage chunk at 12.0 s, long after the last text chunk
    assert m.e2e_s == pytest.approx(0.14)


def test_output_tokens_prefer_usage_then_measured_chunks():
    assert request_metrics(rec(usage=7)).output_tokens == 7
    m = request_metrics(rec(usage=None))
    assert (m.output_tokens, m.output_tokens_source) == (6, "chunks")
    m = request_metrics(rec(usage=None, src=TokenCountSource.ONE_PER_CHUNK))
    assert (m.output_tokens, m.output_tokens_source, m.tokens_per_chunk) == (None, "none", ())


def test_non_stream():
    m = request_metrics(rec(chunks=(), stream=False, end=11.5, src=TokenCountSource.NONE))
    assert m.ttft_s is None and m.e2e_s == pytest.approx(1.5) and m.tpot_s is None


def test_stalls_need_both_thresholds():
    cfg = StallConfig(threshold_s=0.2, k=3.0)
    assert stalls([0.02] * 10 + [0.5], cfg) == (1, 0.5)
    assert stalls([0.02] * 10 + [0.1], cfg) == (0, 0.0)  # 5x median but under the absolute threshold
    assert stalls([0.3] * 10 + [0.5], cfg) == (0, 0.0)  # over the threshold but not k x median
    assert stalls([], cfg) == (0, 0.0)


def test_itl_unknown_chunk_counts_as_one():
    r = rec(chunks=((1.0, 1), (1.5, 1)), src=TokenCountSource.ONE_PER_CHUNK)
    assert per_token_itl(r) == pytest.approx((0.5,))


def test_aggregate_counts_throughput_goodput():
    recs = [
        rec(index=0, sent=0.0, chunks=((0.1, 2), (0.12, 2), (0.14, 2)), usage=6),
        rec(index=1, sent=0.5, chunks=((0.9, 2), (0.92, 2), (0.94, 2)), usage=6),
        rec(index=2, sent=1.0, chunks=((1.05, 1),), usage=None, error=ErrorInfo(ErrorCategory.DROPPED, "cut"), end=1.9),
        rec(index=3, sent=1.0, chunks=(), error=ErrorInfo(ErrorCategory.HTTP, "503", 503), end=1.1),
        rec(index=9, sent=-5.0, warmup=True),
    ]
    a = aggregate(recs, slo=SLO(ttft_s=0.2))
    assert (a.sent, a.ok, a.error) == (4, 2, 2)
    assert a.sent == a.ok + a.error
    assert a.errors_by_category == {"dropped": 1, "http": 1}
    assert a.error_examples == {"dropped": "cut", "http": "503"}
    assert a.duration_s == pytest.approx(1.9)  # first scheduled 0.0 -> last end 1.9
    assert a.output_tok_s == pytest.approx(12 / 1.9)
    assert a.total_tok_s == pytest.approx(20 / 1.9)
    assert a.requests_per_s == pytest.approx(2 / 1.9)
    assert a.goodput_rps == pytest.approx(1 / 1.9)  # request 1 has TTFT 0.4 > 0.2
    assert a.goodput_fraction == pytest.approx(0.25)
    assert a.distributions["ttft_s"].n == 2
    assert a.distributions["tokens_per_chunk"].mean == pytest.approx(2.0)
    assert a.distributions["chunk_gap_s"].n == 4
    assert a.achieved_rate_rps == pytest.approx(3 / 1.0)
    d = a.to_dict()
    assert d["counts"]["sent"] == 4 and "p99" in d["metrics"]["itl_s"]


def test_tokens_per_chunk_falls_back_to_request_means():
    recs = [rec(chunks=((0.1, 1), (0.2, 1)), usage=6, src=TokenCountSource.ONE_PER_CHUNK)]
    a = aggregate(recs)
    assert a.distributions["tokens_per_chunk"].mean == pytest.approx(3.0)
    assert a.goodput_rps is None


def test_empty_run():
    a = aggregate([])
    assert (a.sent, a.ok, a.error) == (0, 0, 0) and math.isnan(a.distributions["ttft_s"].mean)
