import math

import pytest

from speculab.config import SloTargets
from speculab.harness.analysis.metrics import StallConfig, aggregate, per_token_itl, request_metrics, stalls
from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, TokenCountSource
from speculab.harness.results.warnings import WarningKind


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


def test_itl_with_assumed_counts_only_when_usage_confirms_one_token_per_chunk():
    chunks = ((10.1, 1), (10.14, 1), (10.18, 1))
    # usage 3 or 4 (an end token without text): one token per chunk confirmed, ITL = chunk gap
    for usage in (3, 4):
        m = request_metrics(rec(chunks=chunks, usage=usage, src=TokenCountSource.ONE_PER_CHUNK))
        assert m.itl_s == pytest.approx((0.04, 0.04))
    # usage 12 over 3 chunks (speculation bunching, no per-chunk counts): per-token ITL is unknowable, not 40 ms
    m = request_metrics(rec(chunks=chunks, usage=12, src=TokenCountSource.ONE_PER_CHUNK))
    assert m.itl_s == () and m.chunk_gaps_s == pytest.approx((0.04, 0.04))
    assert m.tpot_s == pytest.approx(0.08 / 11)  # TPOT still uses the usage total
    assert request_metrics(rec(chunks=chunks, usage=None, src=TokenCountSource.ONE_PER_CHUNK)).itl_s == ()


def test_aggregate_counts_throughput_goodput():
    recs = [
        rec(index=0, sent=0.0, chunks=((0.1, 2), (0.12, 2), (0.14, 2)), usage=6),
        rec(index=1, sent=0.5, chunks=((0.9, 2), (0.92, 2), (0.94, 2)), usage=6),
        rec(index=2, sent=1.0, chunks=((1.05, 1),), usage=None, error=ErrorInfo(ErrorCategory.DROPPED, "cut"), end=1.9),
        rec(index=3, sent=1.0, chunks=(), error=ErrorInfo(ErrorCategory.HTTP, "503", 503), end=1.1),
        rec(index=9, sent=-5.0, warmup=True),
    ]
    a = aggregate(recs, slo=SloTargets(ttft_s=0.2))
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


def test_offered_load_is_judged_against_the_drawn_schedule():
    from speculab.commands.bench.summary import build_warnings
    from speculab.report.phrases import warning_text

    def run(sched, sent):
        recs = [
            rec(index=i, scheduled=a, sent=b, chunks=((b + 0.1, 2),), usage=2)
            for i, (a, b) in enumerate(zip(sched, sent, strict=True))
        ]
        a = aggregate(recs)
        return a, [warning_text(x) for x in build_warnings(a, requested_rate_rps=10.0, interrupted=False)]

    on_time = [i * 0.1 for i in range(11)]  # 10 req/s, as requested
    a, w = run(on_time, on_time)
    assert a.scheduled_rate_rps == pytest.approx(10.0) and not any("req/s" in x for x in w)
    # a Poisson draw that came out at 8 req/s, sent on schedule: sampling noise, said so, not "not achieved"
    slow_draw = [i * 0.125 for i in range(11)]
    a, w = run(slow_draw, slow_draw)
    assert not any("not achieved" in x for x in w) and any("came out at 8 req/s" in x for x in w)
    # the client fell behind its schedule (each send later than the last): not achieved, against the schedule
    late = [t * 1.2 for t in on_time]
    a, w = run(on_time, late)
    assert a.achieved_rate_rps == pytest.approx(10 / 1.2)
    assert any("offered load not achieved: 8.33 req/s sent vs 10 scheduled" in x for x in w)


def test_connect_errors_after_successes_warn_that_the_server_went_away():
    from speculab.commands.bench.summary import build_warnings
    from speculab.report.phrases import warning_text

    ok = rec(index=0)
    refused = rec(index=1, chunks=(), error=ErrorInfo(ErrorCategory.CONNECT, "cannot connect"), end=10.2)
    w = [
        warning_text(x)
        for x in build_warnings(aggregate([ok, refused, refused]), requested_rate_rps=None, interrupted=False)
    ]
    assert any(x.startswith("2 requests could not connect although 1 succeeded") for x in w)
    w = [warning_text(x) for x in build_warnings(aggregate([refused]), requested_rate_rps=None, interrupted=False)]
    assert not any("could not connect" in x for x in w)


def test_cancelled_requests_neither_fail_nor_count_against_the_error_gate():
    """Issue 17: a request cancelled by Ctrl-C counted as an endpoint error and blocked the verdict."""
    from speculab.harness.analysis.metrics import endpoint_error_rate, error_gate

    assert endpoint_error_rate(4, 40, {"cancelled": 4}) == 0.0
    assert endpoint_error_rate(6, 40, {"cancelled": 4, "http": 2}) == pytest.approx(2 / 36)
    assert math.isnan(endpoint_error_rate(4, 4, {"cancelled": 4}))
    assert error_gate(4, 40, {"cancelled": 4}, 0.02) is None
    why = error_gate(6, 40, {"cancelled": 4, "http": 2}, 0.02)  # its words: test_verdict_words
    assert why is not None and why.kind is WarningKind.ERROR_GATE
    assert why.fields == {
        "failed": 2,
        "counted": 36,
        "error_rate": 2 / 36,
        "by_category": {"http": 2},
        "max_error_rate": 0.02,
    }


def test_cancelled_requests_are_in_no_count_and_no_latency():
    """Issue 36: a request cut off by Ctrl-C is neither sent nor failed (docs/bench.md), and its times say nothing."""
    cut = rec(index=2, error=ErrorInfo(ErrorCategory.CANCELLED, "cancelled: the run was interrupted"), end=99.0)
    failed = rec(index=1, chunks=(), error=ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500))
    m = aggregate([rec(index=0), failed, cut])
    assert (m.sent, m.ok, m.error, m.cancelled) == (2, 1, 1, 1)
    assert m.errors_by_category == {"http": 1} and m.to_dict()["counts"]["cancelled"] == 1
    assert m.distributions["queue_s"].n == 2 and m.duration_s < 1.0  # the cut-off request's end is not the run's


def test_throughput_of_requests_whose_output_length_is_unknown_is_not_measured_not_zero():
    """A file that keeps neither usage nor per-chunk counts (GenAI-Perf's without usage): its tokens are unknown, so
    tok/s is not measured (NaN, and named among what the file does not hold), where it read 0.0 tok/s."""
    from speculab.harness.analysis.metrics import quantities_not_held

    unknown = [rec(index=i, usage=None, src=TokenCountSource.ONE_PER_CHUNK) for i in range(3)]
    m = aggregate(unknown)
    assert m.ok == 3 and m.output_tokens_unknown == 3
    assert math.isnan(m.output_tok_s) and math.isnan(m.total_tok_s)
    assert "output_tok_s" in quantities_not_held(unknown)
    # one known length among them: tok/s is measured over the known (the unknown count says how many are left out)
    mixed = aggregate([*unknown, rec(index=3)])
    assert mixed.output_tok_s > 0 and mixed.output_tokens_unknown == 3
    assert "output_tok_s" not in quantities_not_held([*unknown, rec(index=3)])
