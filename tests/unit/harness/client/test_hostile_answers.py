"""What a half-broken server sends never becomes a traceback or an absurd number: each surprise is a categorised
error on its request (or a field left out), the rest of the answer is still read (issue 25)."""

import json

import pytest

from fakes.scripted_openai import DONE, FakeServer, Reply, Write, completion_chunk, serve, sse
from speculab.harness.analysis.metrics import RunAccumulator
from speculab.harness.client.body import MAX_ERROR_BODY_BYTES
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.client.request import make_session, request_func
from speculab.harness.client.response import build_record
from speculab.harness.client.stream import StreamState
from speculab.harness.records import ErrorCategory, RequestSpec
from speculab.harness.results.strict_json import dumps
from speculab.harness.servers.adapters import response_reader
from speculab.harness.servers.adapters.base import checked_scalars
from speculab.protocol.chunks import MAX_DEPTH, MalformedChunk, as_count, parse_body, parse_stream_chunk

SPEC = RequestSpec(index=0, prompt="p")


def stream_of(*payloads: bytes):
    st = StreamState("completions")
    for i, p in enumerate(payloads):
        if st.feed(p, 1.0 + i):
            break
    else:
        st.eof()
    return st.record(spec=SPEC, scheduled_s=0.0, sent_s=0.5, end_s=9.0)


@pytest.mark.parametrize("bad", [1e308, -1, 2.5, "12", float("nan"), True, [3], 10**10, float("inf")])
def test_a_usage_count_that_is_not_one_makes_the_request_malformed(bad):
    """Issue 25: `completion_tokens: 1e308` ended `speculab bench` with an OverflowError and no summary.json."""
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": bad}}
    r = stream_of(completion_chunk("ab"), sse(usage), DONE)
    assert r.error is not None and r.error.category is ErrorCategory.MALFORMED
    assert "usage.completion_tokens" in r.error.message and r.completion_tokens is None
    acc = RunAccumulator()
    acc.add(r)
    assert acc.result().error == 1


def speculation_of(body: dict) -> dict | None:
    """A whole body's speculation as its record says it, read as from a server of unknown kind."""
    said = parse_body(json.dumps({"choices": [], "usage": {}, **body}), "completions")
    kw = {"scheduled_s": 0.0, "sent_s": 0.0, "end_s": 1.0, "warmup": False, "stream": False, "error": None}
    return build_record(SPEC, said, logprobs=None, read=response_reader("other"), **kw).speculation


def test_as_count_takes_integral_counts_only():
    assert [as_count(v) for v in (0, 7, 7.0, 10**9)] == [0, 7, 7, 10**9]
    assert [as_count(v) for v in (-1, 7.5, 10**9 + 1, None, "7", False, float("nan"))] == [None] * 7


@pytest.mark.parametrize(
    "payload",
    [
        "[" * 100_000 + "]" * 100_000,  # past the C decoder's stack
        "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5),  # parses, but deeper than any OpenAI chunk
        '{"choices": [{"text": 1' + "0" * 5000 + "}]}",  # more digits than Python converts
        '{"choices": [{"text": "a", "finish_reason": {"x": 1}}]}',
        '{"choices": [{"text": ["a"]}]}',
        '{"choices": "abc"}',
        '{"choices": [], "usage": {}, "metrics": {"m": ' + "[" * 40 + "]" * 40 + "}}",  # kept raw: depth checked
    ],
)
def test_garbage_json_is_malformed_not_a_traceback(payload):
    with pytest.raises(MalformedChunk):
        parse_stream_chunk(payload, "completions")
    with pytest.raises(MalformedChunk):
        parse_body(payload, "completions")


def test_lone_surrogates_are_replaced_so_every_record_can_be_written():
    r = stream_of(sse(b'{"choices": [{"text": "a\\ud800b", "finish_reason": "stop"}]}'), DONE)
    assert r.ok and r.output_text == "a?b"
    dumps(r.to_dict()).encode("utf-8")  # a lone surrogate here was a UnicodeEncodeError at write time


def test_logprobs_of_the_wrong_shape_are_read_as_unknown():
    lp = {"tokens": ["a", "b"], "token_logprobs": {"x": 1}, "top_logprobs": [5, None]}
    d = parse_stream_chunk(json.dumps({"choices": [{"text": "ab", "logprobs": lp}]}), "completions")
    assert d.logprobs == ({"token": "a", "logprob": None, "top": {}}, {"token": "b", "logprob": None, "top": {}})
    chat = {"content": [{"token": ["x"], "logprob": 1e308, "top_logprobs": [{"token": {}}, {"token": "y"}]}]}
    d = parse_stream_chunk(json.dumps({"choices": [{"delta": {"content": "x"}, "logprobs": chat}]}), "chat")
    assert d.logprobs == ({"token": None, "logprob": None, "top": {"y": None}},)


def test_speculation_fields_that_are_not_counts_are_not_reported():
    usage = {"speculab_spec_decode": {"drafts": -3, "draft_tokens": 1e308, "accepted_tokens": 4}}
    assert speculation_of({"usage": usage}) == {
        "drafts": None,
        "draft_tokens": None,
        "accepted_tokens": 4,
        "source": "speculab usage.speculab_spec_decode",
    }
    hist = {"speculative_decoding": {"num_spec_steps": 2, "acceptance_histogram": [1, "x", 2]}}
    assert speculation_of({"metrics": hist})["drafts"] == 2
    assert "accepted_per_position" not in speculation_of({"metrics": hist})


def test_engine_scalars_keep_what_later_sums_can_read_and_say_what_was_dropped():
    kept = checked_scalars({"draft_n": "abc", "draft_n_accepted": 3, "prompt_ms": float("nan"), "x": {"y": 1}})
    assert kept == {"draft_n_accepted": 3, "dropped": ["draft_n", "prompt_ms", "x"]}


async def one(script, *, stream=True):
    async with serve(FakeServer(lambda body: script)) as url, make_session() as session:
        ep = EndpointConfig(url, "fake-model", stream=stream)
        return await request_func(ep, RequestSampling(max_tokens=8))(session, SPEC, scheduled_s=0.0)


async def test_an_html_page_answering_a_stream_request_is_malformed():
    rec = await one(Reply(200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"))
    assert rec.error.category is ErrorCategory.MALFORMED
    assert "expected an SSE stream, got text/html" in rec.error.message and "502 Bad Gateway" in rec.error.message


async def test_an_endless_stream_line_is_malformed_at_the_cap():
    line = Write(b"data: " + b"x" * (1 << 20))
    rec = await one([line] * 6)  # 6 MB, never a newline
    assert rec.error.category is ErrorCategory.MALFORMED and "line over 4 MB" in rec.error.message


async def test_a_huge_error_body_is_read_only_to_its_cap():
    rec = await one(Reply(500, b"e" * (MAX_ERROR_BODY_BYTES * 20), content_type="text/plain"))
    assert rec.error.category is ErrorCategory.HTTP and rec.error.status == 500
    assert len(rec.error.message) < 400


async def test_a_unary_body_that_is_not_json_is_malformed():
    rec = await one(Reply(200, b"\xff\xfe\x00garbage"), stream=False)
    assert rec.error.category is ErrorCategory.MALFORMED and "malformed response body" in rec.error.message


def test_more_accepted_than_drafted_is_not_reported():
    usage = {"speculab_spec_decode": {"drafts": 2, "draft_tokens": 4, "accepted_tokens": 9}}
    spec = speculation_of({"usage": usage})
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == (2, None, None)
    hist = {"speculative_decoding": {"num_spec_steps": 1, "num_draft_tokens": 2, "acceptance_histogram": [0, 0, 5]}}
    spec = speculation_of({"metrics": hist})
    assert spec["drafts"] == 1 and "accepted_per_position" not in spec  # position 0 accepted 5 of 1


async def test_every_error_message_is_one_line():
    """A warning quotes a request's first error message: a server's newlines must not break it in two."""
    rec = await one(Reply(500, b"<html>\n<body>\n  down\n</body></html>", content_type="text/html"))
    assert rec.error.message == "HTTP 500: <html> <body> down </body></html>"
    r = stream_of(b"event: error\ndata: line one\ndata: line two\n\n")
    assert r.error.category is ErrorCategory.ERROR_EVENT and r.error.message == "line one line two"
    r = stream_of(sse({"error": {"message": "a\n\nb" + "c" * 1000}}))
    assert "\n" not in r.error.message and len(r.error.message) <= 503
