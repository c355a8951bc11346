"""The engine server with the official openai client, raw HTTP for bad input, metrics, and disconnects."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from typing import Any

import openai
import pytest
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.integration.server_harness import running_server, wait_for


@pytest.fixture(scope="module")
def server():
    with running_server() as s:
        yield s


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def post(server, path: str, body: bytes | dict, headers: dict | None = None) -> tuple[int, dict, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        server.url + path, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read()), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers


def test_completions_stream_with_usage(client, server):
    stream = client.completions.create(
        model="tiny",
        prompt="hello there",
        max_tokens=10,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10
    assert chunks[-1].usage.prompt_tokens == 12  # bos + 11 characters
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    whole = client.completions.create(model="tiny", prompt="hello there", max_tokens=10, temperature=0)
    assert whole.choices[0].text == text and whole.usage.completion_tokens == 10


def test_chat_stream_with_continuous_usage(client):
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        max_completion_tokens=6,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert content and all(c.usage is not None for c in chunks)
    counts = [c.usage.completion_tokens for c in content]
    assert counts == sorted(counts) and counts[-1] <= 6
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    whole = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=6, temperature=0
    )
    assert whole.choices[0].message.content == text and whole.choices[0].message.role == "assistant"
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 6


def test_logprobs_both_endpoints(client):
    c = client.completions.create(model="tiny", prompt="abc", max_tokens=3, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == 3 and all(len(t) == 2 for t in lp.top_logprobs) and lp.text_offset[0] == 0
    ch = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "x"}],
        max_tokens=3,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    content = ch.choices[0].logprobs.content
    assert len(content) == 3 and all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in content)


def test_seeded_sampling_reproducible(client):
    kw = {"model": "tiny", "prompt": "seed", "max_tokens": 8, "temperature": 1.0, "seed": 7}
    assert client.completions.create(**kw).choices[0].text == client.completions.create(**kw).choices[0].text


def test_stop_string_never_streamed(client):
    free = client.completions.create(model="tiny", prompt="stop test", max_tokens=20, temperature=0).choices[0].text
    stop = free[4:6]
    stream = client.completions.create(
        model="tiny", prompt="stop test", max_tokens=20, temperature=0, stop=[stop], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks)
    assert text == free[: free.index(stop)] and chunks[-1].choices[0].finish_reason == "stop"


def test_models_health_version_metrics(client, server):
    assert [m.id for m in client.models.list()] == ["tiny"]
    assert client.models.retrieve("tiny").id == "tiny"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("other")
    status, body = server.get("/v1/completions")  # wrong method: still OpenAI JSON
    assert status == 405 and json.loads(body)["error"]["message"]
    assert server.get("/health")[0] == 200
    status, body = server.get("/version")
    assert status == 200 and json.loads(body)["name"] == "speculab" and "version" in json.loads(body)
    # an app built from code, not by `speculab serve`, was given no arguments to say: it says none, never "plain"
    assert not {"speculative_config", "server_args"} & set(json.loads(body))
    status, text = server.get("/metrics")
    assert status == 200
    for name in (
        "speculab:num_requests_running",
        "speculab:num_requests_waiting",
        "speculab:prompt_tokens_total",
        "speculab:generation_tokens_total",
        "speculab:time_to_first_token_seconds_bucket",
        "speculab:inter_token_latency_seconds_bucket",
        "speculab:e2e_request_latency_seconds_bucket",
        "speculab:kv_cache_usage_perc",
        "speculab:process_resident_memory_bytes",
        "speculab:request_queue_time_seconds_bucket",
        "speculab:request_prefill_time_seconds_bucket",
        "speculab:request_decode_time_seconds_bucket",
    ):
        assert name in text, name


BAD = [
    # (path, body, status, words expected in the message, param)
    ("/v1/completions", b"{not json", 400, "not valid JSON", None),
    ("/v1/completions", {"prompt": "x"}, 400, "model: field required", "model"),
    ("/v1/completions", {"model": "tiny"}, 400, "prompt: field required", "prompt"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": "many"}, 400, "max_tokens", "max_tokens"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "max_token": 5}, 400, "unknown field", "max_token"),
    ("/v1/completions", {"model": "tiny", "prompt": ""}, 400, "prompt is empty", "prompt"),
    ("/v1/completions", {"model": "tiny", "prompt": []}, 400, "prompt is empty", "prompt"),
    ("/v1/completions", {"model": "tiny", "prompt": "x" * 200}, 400, "context", "prompt"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 0}, 400, "max_tokens", "max_tokens"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 500}, 400, "exceeds the context", "max_tokens"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "temperature": -0.5}, 400, "temperature", "temperature"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "top_p": 0}, 400, "top_p", "top_p"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "top_p": 1.5}, 400, "top_p", "top_p"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "n": 2}, 400, "n > 1 is not supported", None),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "presence_penalty": 0.5}, 400, "presence_penalty", None),
    ("/v1/completions", {"model": "tiny", "prompt": [999999]}, 400, "vocabulary", "prompt"),
    ("/v1/completions", {"model": "nope", "prompt": "x"}, 404, "does not exist", "model"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 5, "min_tokens": 9}, 400, "min_tokens", None),
    ("/v1/chat/completions", {"model": "tiny", "messages": []}, 400, "messages", "messages"),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "robot", "content": "x"}]}, 400, "role", None),
    ("/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "nope", "model"),
    (
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "n": 3},
        400,
        "n > 1",
        None,
    ),
    (
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": -1},
        400,
        "temperature",
        "temperature",
    ),
    ("/v1/nothing", {}, 404, "Not Found", None),
]


@pytest.mark.parametrize(("path", "body", "status", "words", "param"), BAD)
def test_bad_input_gets_openai_error(server, path, body, status, words, param):
    got, payload, _ = post(server, path, body)
    assert got == status, payload
    err = payload["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert words in err["message"], err["message"]
    if param is not None:
        assert err["param"] == param
    assert server.engine.num_running == 0 and len(server.engine.scheduler.free_slots) == 4


def test_openai_client_raises_typed_errors(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model="tiny", prompt="x", max_tokens=2, temperature=-1)


def _raw_stream_request(server, body: dict) -> socket.socket:
    port = int(server.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    got = b""
    while marker not in got:
        chunk = sock.recv(4096)
        assert chunk, f"connection closed before {marker!r}: {got!r}"
        got += chunk
    return got


@pytest.fixture
def slow_steps(server, monkeypatch):
    """Each engine step takes at least 20 ms, so a 120-token request is still running when the client leaves."""
    step = server.engine.step

    def slow():
        time.sleep(0.02)
        return step()

    monkeypatch.setattr(server.engine, "step", slow)


def _aborted(server) -> float:
    _, text = server.get("/metrics")
    line = [ln for ln in text.splitlines() if ln.startswith("speculab:request_success_total") and "abort" in ln]
    return float(line[0].rsplit(" ", 1)[1]) if line else 0.0


def test_disconnect_mid_stream_frees_the_slot(server, slow_steps):
    before = _aborted(server)
    sock = _raw_stream_request(
        server, {"model": "tiny", "prompt": "long", "max_tokens": 120, "ignore_eos": True, "stream": True}
    )
    _read_until(sock, b"data:")  # the stream has started
    assert server.engine.num_running == 1
    sock.close()
    assert wait_for(lambda: server.engine.num_running == 0 and server.async_engine.num_in_flight == 0)
    assert len(server.engine.scheduler.free_slots) == 4
    assert _aborted(server) == before + 1
    _, metrics = server.get("/metrics")
    assert 'speculab:num_requests_running{model_name="tiny"} 0.0' in metrics


def test_disconnect_non_streaming_frees_the_slot(server, slow_steps):
    before = _aborted(server)
    sock = _raw_stream_request(server, {"model": "tiny", "prompt": "long", "max_tokens": 120, "ignore_eos": True})
    assert wait_for(lambda: server.engine.num_running == 1, 5)
    sock.close()
    assert wait_for(lambda: server.engine.num_running == 0 and server.async_engine.num_in_flight == 0)
    assert _aborted(server) == before + 1


def test_queue_full_is_429_with_retry_after():
    with running_server(max_num_seqs=1, max_waiting=1) as s:
        step = s.engine.step
        s.engine.step = lambda: (time.sleep(0.02), step())[1]  # keep the first two requests in flight
        long = {"model": "tiny", "prompt": "q", "max_tokens": 120, "ignore_eos": True, "stream": True}
        socks = [_raw_stream_request(s, long) for _ in range(2)]  # one running, one waiting
        assert wait_for(lambda: s.async_engine.num_in_flight == 2)
        status, payload, headers = post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert status == 429 and headers.get("Retry-After") == "1" and payload["error"]["code"] == "queue_full"
        for sock in socks:
            sock.close()
        assert wait_for(lambda: s.async_engine.num_in_flight == 0)
        assert post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})[0] == 200


def test_api_key():
    with running_server(api_key="sekret") as s:
        status, payload, _ = post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert status == 401 and payload["error"]["code"] == "invalid_api_key"
        good = openai.OpenAI(base_url=s.url + "/v1", api_key="sekret", max_retries=0)
        assert good.completions.create(model="tiny", prompt="x", max_tokens=2).usage.completion_tokens == 2
        assert s.get("/health")[0] == 200


def test_a_step_failure_no_request_explains_fails_those_requests_and_the_server_goes_on():
    with running_server() as s:
        step = s.engine.step

        def broken():
            raise RuntimeError("simulated scheduler failure")

        s.engine.step = broken
        status, payload, _ = post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert status == 500 and "simulated scheduler failure" in payload["error"]["message"]
        assert payload["error"]["type"] == "server_error"
        assert s.get("/health")[0] == 200  # the engine was reset, not killed
        s.engine.step = step
        assert post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})[0] == 200
        assert len(s.engine.scheduler.free_slots) == 4


def test_engine_stops_for_good_only_when_it_cannot_even_reset():
    with running_server() as s:

        def broken():
            raise RuntimeError("simulated kernel failure")

        s.engine.step = s.engine.reset = broken
        status, payload, _ = post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert status == 500 and payload["error"]["type"] == "server_error"
        assert s.get("/health")[0] == 503
        status, payload, _ = post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert status == 503 and "engine" in payload["error"]["message"]


def test_harness_detects_this_server_as_speculab(server):
    from speculab.harness.servers.adapters import detect_engine

    version = json.loads(server.get("/version")[1])
    models = json.loads(server.get("/v1/models")[1])
    names = [ln.split("{")[0].split(" ")[0] for ln in server.get("/metrics")[1].splitlines() if ln[:1] != "#"]
    assert detect_engine(version, None) == detect_engine(None, models) == detect_engine(None, None, names) == "speculab"


def test_shutdown_ends_streams_cleanly_and_refuses_new_requests():
    with running_server() as s:
        step = s.engine.step
        s.engine.step = lambda: (time.sleep(0.02), step())[1]
        sock = _raw_stream_request(
            s, {"model": "tiny", "prompt": "x", "max_tokens": 120, "ignore_eos": True, "stream": True}
        )
        _read_until(sock, b"data:")
        s.async_engine.begin_shutdown()  # what Ctrl-C / SIGTERM does in `speculab serve`
        tail = _read_until(sock, b"data: [DONE]")
        assert b"the server is shutting down" in tail
        sock.close()
        status, payload, _ = post(s, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert status == 503 and "shutting down" in payload["error"]["message"]
        assert s.get("/health")[0] == 503


def test_reset_prefix_cache_answers_json_as_vllms_endpoint_is_called(server):
    """#40 item 1: the harness empties every engine's cache between blocks; this engine keeps no prompt's KV cache
    past its request, so it frees nothing and says so."""
    status, body, _ = post(server, "/reset_prefix_cache", b"")
    assert status == 200 and body == {"object": "prefix_cache.reset", "success": True, "freed_blocks": 0}
    assert post(server, "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2})[0] == 200  # it serves on
