"""Scripted-clock tests pinning the timing and counting rules of a streamed response (no server, no sleeps)."""

import json

import pytest

from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.client.stream import StreamState
from speculab.harness.records import ErrorCategory, RequestSpec, TokenCountSource
from speculab.harness.servers.adapters import response_reader

SPEC = RequestSpec(index=0, prompt="p")


def chunk(text, cum=None, finish=None, **extra):
    c = {"choices": [{"index": 0, "text": text, "finish_reason": finish, **extra}]}
    if cum is not None:
        c["usage"] = {"prompt_tokens": 4, "completion_tokens": cum}
    return f"data: {json.dumps(c)}\n\n".encode()


USAGE_ONLY = b'data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 6}}\n\n'
DONE = b"data: [DONE]\n\n"


def play(script, *, sent_s=100.0, **kw):
    """script: [(t_s, bytes)] fed in order; returns (state, record)."""
    st = StreamState("completions", **kw)
    for t, data in script:
        if st.feed(data, t):
            break
    else:
        st.eof()
    end = script[-1][0]
    return st, st.record(spec=SPEC, scheduled_s=sent_s - 0.5, sent_s=sent_s, end_s=end)


def test_e2e_minus_ttft_is_sum_of_gaps_and_usage_chunk_does_not_extend_e2e():
    script = [
        (100.25, b": keep-alive\n\n"),
        (100.30, chunk("ab", cum=2)),
        (100.32, chunk("cd", cum=4)),
        (100.37, chunk("ef", cum=6, finish="length")),
        (109.00, USAGE_ONLY),  # arrives much later: must not move E2E
        (109.01, DONE),
    ]
    st, r = play(script)
    assert r.ok and st.done
    m = request_metrics(r)
    assert m.ttft_s == pytest.approx(0.30)
    assert m.e2e_s == pytest.approx(0.37)
    assert m.e2e_s - m.ttft_s == pytest.approx(sum(m.chunk_gaps_s))
    assert len(r.chunks) == 3  # the usage-only chunk is not a chunk
    assert r.extra["usage_chunk_s"] == 109.00
    assert r.end_s == 109.01 and r.queue_s == pytest.approx(0.5)
    assert (r.completion_tokens, r.prompt_tokens) == (6, 4)
    assert r.output_text == "abcdef" and r.finish_reason == "length"


def test_chunk_of_three_tokens_counts_three():
    script = [(1.0, chunk("abc", cum=3)), (1.1, chunk("d", cum=4)), (1.2, USAGE_ONLY), (1.3, DONE)]
    _, r = play(script, sent_s=0.9)
    assert r.token_count_source is TokenCountSource.CONTINUOUS_USAGE
    assert [c.n_tokens for c in r.chunks] == [3, 1]
    m = request_metrics(r)
    assert m.tokens_per_chunk == (3, 1)
    assert m.itl_s == pytest.approx((0.1,))


def test_chunk_counts_from_logprobs_then_tokenizer_then_one_per_chunk():
    lp = {"tokens": ["a", "b", "c"], "token_logprobs": [-1, -1, -1]}
    script = [
        (1.0, chunk("abc", logprobs=lp)),
        (1.1, chunk("d", finish="stop", logprobs={"tokens": ["d"]})),
        (1.2, DONE),
    ]
    _, r = play(script, logprobs_requested=True)
    assert r.token_count_source is TokenCountSource.LOGPROBS and [c.n_tokens for c in r.chunks] == [3, 1]
    assert len(r.logprobs) == 4
    # a token with no text of its own (held-back UTF-8 bytes) is counted with the next text chunk, not lost
    script = [
        (1.0, chunk("a", logprobs={"tokens": ["a"]})),
        (1.1, chunk("", logprobs={"tokens": ["\\xe2"]})),
        (1.2, chunk("\u20ac", finish="stop", logprobs={"tokens": ["\\x82\\xac"]})),
        (1.3, DONE),
    ]
    _, r = play(script, logprobs_requested=True)
    assert r.token_count_source is TokenCountSource.LOGPROBS and [c.n_tokens for c in r.chunks] == [1, 2]
    script = [(1.0, chunk("abc")), (1.1, chunk("d", finish="stop")), (1.2, DONE)]
    _, r = play(script, count_tokens=len)
    assert r.token_count_source is TokenCountSource.TOKENIZER and [c.n_tokens for c in r.chunks] == [3, 1]
    _, r = play(script)
    assert r.token_count_source is TokenCountSource.ONE_PER_CHUNK and [c.n_tokens for c in r.chunks] == [1, 1]


def test_error_event_mid_stream_is_a_failure():
    err = b'data: {"error": {"message": "CUDA out of memory", "type": "server_error", "code": 500}}\n\n'
    script = [(1.0, chunk("ab", cum=2)), (1.1, err), (1.2, DONE)]
    _, r = play(script)
    assert not r.ok and r.error.category is ErrorCategory.ERROR_EVENT
    assert "out of memory" in r.error.message
    assert len(r.chunks) == 1  # what arrived before the error is kept


def test_sse_error_event_type():
    script = [(1.0, chunk("ab")), (1.1, b"event: error\ndata: overloaded\n\n")]
    _, r = play(script)
    assert r.error.category is ErrorCategory.ERROR_EVENT and r.error.message == "overloaded"


def test_malformed_chunk_is_a_failure():
    _, r = play([(1.0, chunk("ab")), (1.1, b"data: {oops\n\n"), (1.2, DONE)])
    assert r.error.category is ErrorCategory.MALFORMED


def test_stream_cut_before_done_is_dropped():
    _, r = play([(1.0, chunk("ab")), (1.1, chunk("cd"))])
    assert r.error.category is ErrorCategory.DROPPED and len(r.chunks) == 2
    _, r = play([(1.0, chunk("ab")), (1.1, b'data: {"choi')])
    assert r.error.category is ErrorCategory.DROPPED and "middle of an event" in r.error.message
    # a finish_reason and a clean end without [DONE] is accepted (some servers omit [DONE])
    _, r = play([(1.0, chunk("ab", finish="stop"))])
    assert r.ok


def test_chunk_split_across_reads_is_stamped_when_complete():
    data = chunk("ab", cum=2)
    _, r = play([(1.0, data[:10]), (1.5, data[10:]), (1.6, DONE)])
    assert r.chunks[0].t_s == 1.5


def test_empty_text_chunks_do_not_count_but_their_tokens_carry_over():
    script = [(1.0, chunk("ab", cum=2)), (1.1, chunk("", cum=3)), (1.2, chunk("c", cum=4)), (1.3, DONE)]
    _, r = play(script)
    assert [c.t_s for c in r.chunks] == [1.0, 1.2] and [c.n_tokens for c in r.chunks] == [2, 2]


def test_llamacpp_timings_are_kept():
    body = {"choices": [{"text": "b", "finish_reason": "stop"}], "timings": {"draft_n": 8, "draft_n_accepted": 5}}
    last = f"data: {json.dumps(body)}\n\n".encode()
    _, r = play([(1.0, chunk("a")), (1.1, last), (1.2, DONE)], read=response_reader("llamacpp"))
    assert r.speculation == {"drafts": None, "draft_tokens": 8, "accepted_tokens": 5, "source": "llama.cpp timings"}
    assert r.extra["timings"]["draft_n"] == 8
    # the client itself knows no engine: told of none, it reads none of a response's engine fields
    _, r = play([(1.0, chunk("a")), (1.1, last), (1.2, DONE)])
    assert r.ok and r.speculation is None and "timings" not in r.extra


def test_finish_reason_abort_is_a_failure_even_with_done():
    # vLLM ends engine-side aborts (shutdown, pause) with finish_reason "abort", HTTP 200 and [DONE]
    script = [(1.0, chunk("ab", cum=2)), (1.1, chunk("c", cum=3, finish="abort")), (1.2, DONE)]
    _, r = play(script)
    assert not r.ok and r.error.category is ErrorCategory.ERROR_EVENT and "'abort'" in r.error.message
    assert len(r.chunks) == 2  # what arrived stays in the record
    _, r = play([(1.0, chunk("ab", cum=2)), (1.1, chunk("c", cum=3, finish="stop")), (1.2, DONE)])
    assert r.ok


def test_speculab_per_response_spec_stats_are_kept():
    # speculab serve puts each request's speculation counters in a usage extension field
    usage = {
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "speculab_spec_decode": {"drafts": 1, "draft_tokens": 4, "accepted_tokens": 2},
    }
    last = f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
    _, r = play([(1.0, chunk("abc", finish="stop")), (1.1, last), (1.2, DONE)], read=response_reader("speculab"))
    assert r.speculation == {
        "drafts": 1,
        "draft_tokens": 4,
        "accepted_tokens": 2,
        "source": "speculab usage.speculab_spec_decode",
    }
    assert r.completion_tokens == 3
