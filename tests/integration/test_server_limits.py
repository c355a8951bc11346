"""Regression tests for the fuzzing issue, over a real socket to uvicorn as `speculab serve` configures it.

1. requests that used to disable the engine for good (out-of-vocabulary stop ids, temperature 1e-38, top_k past
   int64) on both endpoints, streaming or not; 2. size limits (413 before the body is read, 400 before a long
   prompt is tokenized, tokenizing off the event loop); 3. lone surrogates are 400; 4. an oversized request head
   is 431, readable by the client; 5. /metrics and /openapi.json under --api-key.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.request

import pytest
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.integration.raw_http import exchange, is_openai_error, post_json, read_answer, request_bytes
from tests.integration.server_harness import running_server

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"


@pytest.fixture(scope="module")
def server():
    with running_server(app_kw={"max_request_bytes": 256 * 1024}) as s:
        yield s


def body(path: str, stream: bool, **fields) -> dict:
    prompt = {"prompt": "hi"} if path == COMPLETIONS else {"messages": [{"role": "user", "content": "hi"}]}
    return {"model": "tiny", **prompt, "max_tokens": 4, "stream": stream, **fields}


def assert_serving(server) -> None:
    assert server.get("/health")[0] == 200
    ok = post_json(server.port, COMPLETIONS, body(COMPLETIONS, False, temperature=0))
    assert ok.status == 200 and ok.json()["usage"]["completion_tokens"] == 4


KILLERS = [
    ({"min_tokens": 2, "stop_token_ids": [8192]}, "stop_token_ids", "outside the vocabulary"),
    ({"min_tokens": 2, "stop_token_ids": [64]}, "stop_token_ids", "outside the vocabulary"),  # the vocabulary is 64
    ({"min_tokens": 2, "stop_token_ids": [-3]}, "stop_token_ids.0", "greater than or equal to 0"),
    ({"top_k": 9223372036854775808}, "top_k", "less than or equal to 9223372036854775807"),
    ({"seed": 2**64}, "seed", "less than or equal"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("path", [COMPLETIONS, CHAT])
@pytest.mark.parametrize(("fields", "param", "words"), KILLERS)
def test_requests_that_used_to_disable_the_engine_are_400(server, path, stream, fields, param, words):
    got = post_json(server.port, path, body(path, stream, **fields))
    assert got.status == 400 and is_openai_error(got), got
    assert got.json()["error"]["param"] == param and words in got.json()["error"]["message"]
    assert_serving(server)


@pytest.mark.parametrize("path", [COMPLETIONS, CHAT])
@pytest.mark.parametrize("stream", [False, True])
def test_a_tiny_temperature_is_refused_naming_the_fix(server, path, stream):
    """temperature 1e-38 made every probability NaN and disabled the engine for good (issue 17): now a 400."""
    got = post_json(server.port, path, body(path, stream, temperature=1e-38, seed=3))
    assert got.status == 400 and is_openai_error(got), got
    err = got.json()["error"]
    assert err["param"] == "temperature" and "send 0 for greedy decoding" in err["message"]
    ok = post_json(server.port, path, body(path, False, temperature=1e-5))  # the floor itself is served
    assert ok.status == 200
    assert_serving(server)


def test_a_top_k_covering_the_vocabulary_is_no_top_k(server):
    a = post_json(server.port, COMPLETIONS, body(COMPLETIONS, False, top_k=2**63 - 1, seed=1, max_tokens=8))
    b = post_json(server.port, COMPLETIONS, body(COMPLETIONS, False, top_k=-1, seed=1, max_tokens=8))
    assert a.status == 200 and a.json()["choices"][0]["text"] == b.json()["choices"][0]["text"]


@pytest.mark.parametrize("path", [COMPLETIONS, CHAT])
def test_a_lone_surrogate_is_400_naming_the_field(server, path):
    fields = {"prompt": "\ud800"} if path == COMPLETIONS else {"messages": [{"role": "user", "content": "a\udfff"}]}
    got = post_json(server.port, path, {**body(path, False), **fields})  # json.dumps writes "\ud800" escapes
    assert got.status == 400 and is_openai_error(got) and "surrogate" in got.json()["error"]["message"]
    assert got.json()["error"]["param"].split(".")[0] == ("prompt" if path == COMPLETIONS else "messages")
    got = post_json(server.port, path, {**body(path, False), "model": "\ud800"})
    assert got.status == 400 and is_openai_error(got)
    assert_serving(server)


def test_a_body_over_the_limit_is_413_before_it_is_read(server):
    declared = 10_000_000
    head = request_bytes("POST", COMPLETIONS, b"")[: -len(b"Content-Length: 0\r\n\r\n")]
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        # Only the head goes out: the answer cannot depend on reading a body that was never sent.
        sock.sendall(head + f"Content-Length: {declared}\r\n\r\n".encode())
        got = read_answer(sock)
    assert got.status == 413 and is_openai_error(got) and got.json()["error"]["code"] == "request_too_large"
    assert_serving(server)


def test_a_10mb_body_sent_whole_gets_its_413_on_a_connection_that_stays_usable(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", COMPLETIONS, body=b'{"model":"tiny","prompt":"' + b"a" * 10_000_000 + b'"}')
    r = conn.getresponse()
    assert r.status == 413 and "10000028 bytes" in json.loads(r.read())["error"]["message"]
    conn.request("POST", COMPLETIONS, body=json.dumps(body(COMPLETIONS, False)), headers={"Content-Type": "x/json"})
    r = conn.getresponse()  # the rest of the refused body was drained: the next request on the socket works
    assert r.status == 400 and "JSON object" in json.loads(r.read())["error"]["message"]
    conn.close()


def test_a_chunked_body_over_the_limit_is_413(server):
    piece = b"a" * 65536
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(8)) + b"0\r\n\r\n"
    head = request_bytes("POST", COMPLETIONS, b"")[: -len(b"Content-Length: 0\r\n\r\n")]
    got = exchange(server.port, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    assert got.status == 413 and is_openai_error(got)
    assert_serving(server)


@pytest.fixture(scope="module")
def real_server(tiny_checkpoint):
    with running_server(model_dir=tiny_checkpoint, max_model_len=256) as s:
        yield s


def test_a_prompt_that_cannot_fit_is_refused_without_tokenizing_it(real_server, monkeypatch):
    calls = []
    real = real_server.tokenizer.encode
    monkeypatch.setattr(real_server.tokenizer, "encode", lambda *a, **k: calls.append(1) or real(*a, **k))
    for path, fields in [
        (COMPLETIONS, {"prompt": "x" * 200_000}),
        (CHAT, {"messages": [{"role": "user", "content": "x" * 200_000}]}),
    ]:
        got = post_json(real_server.port, path, {**body(path, False), **fields})
        err = got.json()["error"]
        assert got.status == 400 and err["code"] == "context_length_exceeded" and "at least" in err["message"]
    assert calls == []  # refused by the byte bound (token_bound.py)
    got = post_json(real_server.port, COMPLETIONS, {**body(COMPLETIONS, False), "prompt": "x" * 3000})
    assert got.status == 400 and "the limit is 255" in got.json()["error"]["message"] and calls == [1]


def test_max_prompt_tokens_lowers_the_limit():
    with running_server(app_kw={"max_prompt_tokens": 10}) as s:
        assert post_json(s.port, COMPLETIONS, body(COMPLETIONS, False, prompt="123456789")).status == 200
        got = post_json(s.port, COMPLETIONS, body(COMPLETIONS, False, prompt="1234567890"))  # 10 + BOS
        assert got.status == 400 and "the limit is 10" in got.json()["error"]["message"]
        got = post_json(s.port, COMPLETIONS, body(COMPLETIONS, False, prompt=list(range(2, 13))))
        assert got.status == 400 and got.json()["error"]["param"] == "prompt"


@pytest.mark.parametrize("path", [COMPLETIONS, CHAT])
def test_tokenizing_does_not_block_other_clients(server, path, monkeypatch):
    """While one request's tokenizer call is stuck, /health and another request are served (no timing involved)."""
    entered, release = threading.Event(), threading.Event()
    real = server.tokenizer.encode

    def stuck(text, **kw):
        if "slow" in text:
            entered.set()
            release.wait(30)
        return real(text, **kw)

    monkeypatch.setattr(server.tokenizer, "encode", stuck)
    slow = body(path, False, **({"prompt": "slow"} if path == COMPLETIONS else {}))
    if path == CHAT:
        slow["messages"] = [{"role": "user", "content": "slow"}]
    results = []
    t = threading.Thread(target=lambda: results.append(post_json(server.port, path, slow)))
    t.start()
    try:
        assert entered.wait(10)
        assert server.get("/health")[0] == 200
        assert post_json(server.port, path, body(path, False)).status == 200
    finally:
        release.set()
        t.join(30)
    assert results[0].status == 200


def test_a_1mb_header_is_a_431_the_client_can_read(server):
    req = urllib.request.Request(server.url + "/health", headers={"X-Big": "a" * 1_000_000})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 431
    err = json.loads(e.value.read())["error"]
    assert err["code"] == "request_header_fields_too_large" and "--max-header-bytes" in err["message"]
    assert_serving(server)


def test_a_header_over_the_limit_that_arrives_in_one_piece_is_431_too(server):
    got = exchange(server.port, request_bytes("GET", "/health", headers={"X-Big": "a" * 20_000}))
    assert got.status == 431 and is_openai_error(got)


@pytest.mark.parametrize(
    "data",
    [
        b"GET /v1/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x00\x01 nonsense\r\n\r\n",
        b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
    ],
    ids=["non-ascii-target", "garbage", "bad-header"],
)
def test_a_request_http_cannot_parse_is_a_json_400(server, data):
    got = exchange(server.port, data)
    assert got.status == 400 and is_openai_error(got)


def test_api_key_guards_the_schema_but_not_metrics_by_default():
    with running_server(api_key="sekret") as s:
        assert s.get("/metrics")[0] == 200  # the harness scrapes without a key (bench/scrape.py)
        assert s.get("/health")[0] == 200 and s.get("/version")[0] == 200
        assert s.get("/openapi.json")[0] == 401
        req = urllib.request.Request(s.url + "/openapi.json", headers={"Authorization": "Bearer sekret"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200 and "/v1/completions" in json.loads(r.read())["paths"]


def test_private_metrics_need_the_key():
    with running_server(api_key="sekret", app_kw={"metrics_public": False}) as s:
        status, text = s.get("/metrics")
        assert status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key"
        req = urllib.request.Request(s.url + "/metrics", headers={"Authorization": "Bearer sekret"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200 and b"speculab:num_requests_running" in r.read()


def test_refusals_are_counted_by_status(server):
    post_json(server.port, COMPLETIONS, body(COMPLETIONS, False, top_k=2**64))
    exchange(server.port, request_bytes("POST", COMPLETIONS, b"x" * 300_000))
    text = server.get("/metrics")[1]
    for status in ("400", "413"):
        assert f'speculab:request_errors_total{{model_name="tiny",status="{status}"}}' in text
