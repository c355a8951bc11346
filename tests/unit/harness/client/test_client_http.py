"""The request functions against a scripted fake server: payloads, faults and their categories."""

import json

import pytest

from fakes.scripted_openai import (
    DONE,
    Abort,
    FakeServer,
    Reply,
    Sleep,
    Write,
    completion_chunk,
    serve,
    simple_stream,
    sse,
    usage_chunk,
)
from speculab.errors import UserError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling, build_payload
from speculab.harness.client.request import make_session, open_connections, request_func
from speculab.harness.records import ErrorCategory, RequestSpec, TokenCountSource
from speculab.harness.servers.process import free_port

SPEC = RequestSpec(index=3, prompt="hello")


async def one(script, *, api="completions", stream=True, spec=SPEC, **ep_kw):
    fake = FakeServer(lambda body: script)
    async with serve(fake) as url, make_session() as session:
        ep = EndpointConfig(url, "fake-model", api=api, stream=stream, **ep_kw)
        rec = await request_func(ep, RequestSampling(max_tokens=8, seed=7))(session, spec, scheduled_s=0.0)
    return rec, fake.bodies


async def test_stream_ok_and_payload():
    rec, bodies = await one(simple_stream(3, 2, 0.0, 0.0), api_key="sk-test")
    assert rec.ok and len(rec.chunks) == 3 and rec.completion_tokens == 6
    assert rec.token_count_source is TokenCountSource.CONTINUOUS_USAGE
    b = bodies[0]
    assert b["prompt"] == "hello" and b["max_tokens"] == 8 and b["seed"] == 10  # run seed 7 + index 3
    assert b["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


async def test_no_include_usage_flag():
    rec, bodies = await one(simple_stream(2, 1, 0.0, 0.0, continuous=False), include_usage=False)
    assert "stream_options" not in bodies[0] and rec.ok


async def test_chat_stream():
    script = [
        Write(sse({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})),
        Write(sse({"choices": [{"index": 0, "delta": {"content": "Hi"}}]})),
        Write(sse({"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]})),
        Write(usage_chunk(2)),
        Write(DONE),
    ]
    rec, bodies = await one(script, api="chat")
    assert bodies[0]["messages"] == [{"role": "user", "content": "hello"}]
    assert rec.ok and rec.output_text == "Hi there" and len(rec.chunks) == 2 and rec.completion_tokens == 2


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_non_stream(api):
    choice = {"text": "yo"} if api == "completions" else {"message": {"role": "assistant", "content": "yo"}}
    body = {
        "choices": [{"index": 0, "finish_reason": "stop", **choice}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1},
    }
    rec, bodies = await one(Reply(200, json.dumps(body).encode()), api=api, stream=False)
    assert rec.ok and rec.output_text == "yo" and rec.completion_tokens == 1 and not rec.stream
    assert "stream_options" not in bodies[0] and bodies[0]["stream"] is False
    body["choices"][0]["finish_reason"] = "abort"  # vLLM's engine-side abort: HTTP 200, yet no complete answer
    rec, _ = await one(Reply(200, json.dumps(body).encode()), api=api, stream=False)
    assert not rec.ok and rec.error.category is ErrorCategory.ERROR_EVENT and rec.output_text == "yo"


async def test_http_5xx():
    err = json.dumps({"error": {"message": "overloaded", "type": "server_error", "param": None, "code": 503}})
    rec, _ = await one(Reply(503, err.encode()))
    assert rec.error.category is ErrorCategory.HTTP and rec.error.status == 503 and "overloaded" in rec.error.message


async def test_dropped_connection_mid_stream():
    rec, _ = await one([Write(completion_chunk("ab", cum_tokens=1)), Sleep(0.01), Abort()])
    assert rec.error.category is ErrorCategory.DROPPED and len(rec.chunks) == 1


async def test_malformed_stream():
    rec, _ = await one([Write(completion_chunk("ab")), Write(b"data: not json\n\n"), Write(DONE)])
    assert rec.error.category is ErrorCategory.MALFORMED


async def test_error_event():
    rec, _ = await one([Write(completion_chunk("ab")), Write(sse({"error": {"message": "boom"}})), Write(DONE)])
    assert rec.error.category is ErrorCategory.ERROR_EVENT and rec.error.message == "boom"


async def test_timeout():
    rec, _ = await one([Write(completion_chunk("ab")), Sleep(0.8), Write(DONE)], timeout_s=0.2)
    assert rec.error.category is ErrorCategory.TIMEOUT and len(rec.chunks) == 1


async def test_connect_refused():
    ep = EndpointConfig(f"http://127.0.0.1:{free_port()}", "m")
    async with make_session() as session:
        rec = await request_func(ep, RequestSampling())(session, SPEC, scheduled_s=0.0)
    assert rec.error.category is ErrorCategory.CONNECT


async def test_json_body_on_stream_request():
    rec, _ = await one(Reply(200, b'{"error": {"message": "stream not supported"}}'))
    assert rec.error.category is ErrorCategory.ERROR_EVENT


def test_payload_rules():
    ep = EndpointConfig("http://h:1/v1/", "m", api="chat", logprobs=2, extra_body={"ignore_eos": True})
    assert ep.base_url == "http://h:1" and ep.url == "http://h:1/v1/chat/completions"
    b = build_payload(ep, RequestSampling(max_tokens=5, seed=None), RequestSpec(0, prompt="x", seed=42, max_tokens=9))
    assert b["seed"] == 42 and b["max_tokens"] == 9 and b["logprobs"] is True and b["top_logprobs"] == 2
    assert b["ignore_eos"] is True
    assert "response_format" not in b
    fmt = {"type": "json_object"}
    assert (
        build_payload(ep, RequestSampling(), RequestSpec(0, prompt="x", response_format=fmt))["response_format"] == fmt
    )
    forced = RequestSampling(max_tokens=5, max_tokens_overrides_items=True)
    assert build_payload(ep, forced, RequestSpec(0, prompt="x", max_tokens=9))["max_tokens"] == 5
    assert "key" not in repr(EndpointConfig("http://h", "m", api_key="sk-secret")).replace("api_key", "")
    # servers that drop keep-alive connections after a stream (llama-server) are asked to close each one
    assert "Connection" not in ep.headers() and EndpointConfig("http://h", "m", keep_alive=False).headers()[
        "Connection"] == "close"  # fmt: skip
    assert "sk-secret" not in json.dumps(EndpointConfig("http://h", "m", api_key="sk-secret").to_manifest())
    with pytest.raises(UserError, match="--api chat"):
        build_payload(
            EndpointConfig("http://h", "m"),
            RequestSampling(),
            RequestSpec(0, messages=({"role": "user", "content": "x"},)),
        )
    with pytest.raises(UserError, match="http://"):
        EndpointConfig("localhost:8000", "m")
    # an endpoint URL pasted as --url: say which part to drop instead of probing http://h/v1/completions/v1/models
    with pytest.raises(UserError, match=r"drop '/v1/chat/completions' \(e\.g\. --url http://h:1;"):
        EndpointConfig("http://h:1/v1/chat/completions/", "m")


async def test_open_connections_fills_the_pool_so_a_burst_sets_none_up():
    import asyncio

    import aiohttp

    made = []

    async def on_create(_session, _ctx, _params):
        made.append(1)

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_create)
    trace.freeze()
    async with serve(FakeServer(lambda body: simple_stream(2, 1, 0.0, 0.0))) as url, make_session() as session:
        session._trace_configs.append(trace)  # aiohttp keeps it private; the test only counts connections made
        ep = EndpointConfig(url, "fake-model")
        assert await open_connections(session, ep.url, 6) == 6
        assert await open_connections(session, ep.url, 6) == 6  # the idle ones count: none more opened
        request = request_func(ep, RequestSampling(max_tokens=2))
        recs = await asyncio.gather(
            *(request(session, RequestSpec(index=i, prompt="p"), scheduled_s=0.0) for i in range(6))
        )
        assert all(r.ok for r in recs)
        assert made == []  # the burst took the pool's connections
        assert await open_connections(session, ep.url, 0) == 0


async def test_open_connections_to_nothing_opens_none_and_raises_nothing():
    async with make_session() as session:
        assert await open_connections(session, f"http://127.0.0.1:{free_port()}/v1/completions", 3) == 0
