"""Fuzzing the engine server over real sockets (uvicorn configured as `speculab serve` runs it), in CI.

About 1,250 generated requests, deterministic (derandomize=True): JSON bodies built from valid ones by
replacing fields with edge values or junk (wrong types, huge, negative, NaN and infinite numbers, out-of-vocabulary
ids, lone surrogates, nested junk), dropping required fields and adding unknown ones, on both endpoints, streaming
or not; and raw bytes (malformed JSON, non-objects, deep nesting, invalid UTF-8, wrong or missing content types,
odd headers, bodies past the size limit). Every answer must be below 500, every error OpenAI-shaped, every
success well formed; afterwards /health is 200 and a valid request still gets the same text as before.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.integration.raw_http import Answer, exchange, is_openai_error, request_bytes
from tests.integration.server_harness import running_server

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
MAX_REQUEST_BYTES = 32 * 1024  # small, so that bodies past it are cheap to generate
FUZZ = settings(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))

REFERENCE = {"model": "tiny", "prompt": "hello world", "max_tokens": 6, "temperature": 0}


@pytest.fixture(scope="module")
def server():
    with running_server(max_model_len=64, app_kw={"max_request_bytes": MAX_REQUEST_BYTES}) as s:
        reference = exchange(s.port, request_bytes("POST", COMPLETIONS, json.dumps(REFERENCE).encode()))
        assert reference.status == 200
        s.reference_text = reference.json()["choices"][0]["text"]  # type: ignore[attr-defined]
        yield s
        assert_still_serving(s)


def assert_still_serving(s) -> None:
    assert s.get("/health")[0] == 200
    again = exchange(s.port, request_bytes("POST", COMPLETIONS, json.dumps(REFERENCE).encode()))
    assert again.status == 200 and again.json()["choices"][0]["text"] == s.reference_text
    assert s.async_engine.num_in_flight == 0 or s.engine.num_running <= 4


def check(answer: Answer, stream: bool | None = None) -> None:
    assert answer.status < 500, (answer.status, answer.body[:300])
    if answer.status >= 400:
        assert is_openai_error(answer), answer.body[:300]
        assert answer.status in (400, 404, 405, 413, 431), answer.status
        return
    if answer.events:
        assert answer.events[-1] == "[DONE]" and not any(isinstance(e, dict) and "error" in e for e in answer.events)
        return
    if not answer.body:  # GET /health
        return
    data = answer.json()
    assert isinstance(data, dict) and (data.get("choices") is not None or data.get("object") == "list"), data


# --- JSON bodies ---------------------------------------------------------------------------------------------------
HUGE_INTS = [2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, -(10**30)]
SURROGATES = ["\ud800", "\udfff", "a\ud83d", "\udc00b", "ok \ud800 ok"]
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70),
    st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e-38, 5e-324, 1e308, -0.0, 2.0000001]),
    st.text(max_size=12),
    st.sampled_from(SURROGATES),
)
junk = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
token_ids = st.lists(st.one_of(st.integers(-70, 70), st.sampled_from(HUGE_INTS)), min_size=0, max_size=6)
EDGES = {
    "model": st.sampled_from(["tiny", "other", "", "\ud800", "tiny "]),
    "max_tokens": st.one_of(st.integers(-2, 70), st.sampled_from([*HUGE_INTS, 1.0, 1.5, "3", True])),
    "max_completion_tokens": st.one_of(st.integers(-2, 70), st.sampled_from(HUGE_INTS)),
    "min_tokens": st.one_of(st.integers(-2, 70), st.sampled_from(HUGE_INTS)),
    "temperature": st.one_of(st.floats(-1, 3), st.sampled_from([0, 1e-38, 1e-6, 1e-5, math.nan, math.inf, "1"])),
    "top_p": st.one_of(st.floats(-0.5, 1.5), st.sampled_from([0, 1, math.nan, 1e-30])),
    "top_k": st.one_of(st.integers(-3, 70), st.sampled_from(HUGE_INTS)),
    "seed": st.one_of(st.integers(-5, 5), st.sampled_from(HUGE_INTS)),
    "n": st.one_of(st.integers(-1, 3), st.sampled_from(HUGE_INTS)),
    "logprobs": st.one_of(st.integers(-1, 25), st.booleans(), st.sampled_from(HUGE_INTS)),
    "top_logprobs": st.one_of(st.integers(-1, 25), st.sampled_from(HUGE_INTS)),
    "stop": st.one_of(st.text(max_size=5), st.lists(st.text(max_size=4), max_size=20), st.sampled_from(SURROGATES)),
    "stop_token_ids": token_ids,
    "prompt": st.one_of(
        st.text(max_size=30),
        st.sampled_from([*SURROGATES, "", "x" * 200]),
        token_ids,
        st.lists(token_ids, max_size=3),
        st.lists(st.text(max_size=5), max_size=3),
    ),
    "messages": st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "system", "assistant", "developer", "tool", "robot"])},
            optional={
                "content": st.one_of(
                    st.text(max_size=20),
                    st.sampled_from(SURROGATES),
                    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": junk})),
                    junk,
                ),
                "name": junk,
            },
        ),
        max_size=3,
    ),
    "stream_options": st.one_of(junk, st.fixed_dictionaries({"include_usage": junk, "continuous_usage_stats": junk})),
    "logit_bias": st.one_of(st.dictionaries(st.text(max_size=4), st.floats(), max_size=2), junk),
    "ignore_eos": junk,
    "presence_penalty": st.one_of(st.floats(), junk),
    "frequency_penalty": st.one_of(st.floats(), junk),
    "repetition_penalty": st.one_of(st.floats(), junk),
    "echo": junk,
    "suffix": junk,
    "best_of": junk,
    "tools": junk,
    "tool_choice": junk,
    "response_format": junk,
    "add_generation_prompt": junk,
    "user": st.one_of(st.text(max_size=5), st.sampled_from(SURROGATES), junk),
    "metadata": junk,
}


@st.composite
def json_request(draw) -> tuple[str, dict, bool]:
    chat = draw(st.booleans())
    stream = draw(st.booleans())
    body: dict = {"model": "tiny", "max_tokens": 2, "stream": stream}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"})
    for name in draw(st.lists(st.sampled_from(sorted(EDGES)), max_size=4, unique=True)):
        body[name] = draw(EDGES[name] if draw(st.integers(0, 3)) else junk)
    for name in draw(st.lists(st.sampled_from(sorted(body)), max_size=2, unique=True)):
        if draw(st.integers(0, 3)) == 0:
            del body[name]  # a required field missing, sometimes
    if draw(st.integers(0, 5)) == 0:
        body[draw(st.text(min_size=1, max_size=8))] = draw(junk)  # an unknown field
    stream_flag = body.get("stream")
    return (CHAT if chat else COMPLETIONS), body, stream_flag is True


# Well-typed sampling fields at and past their edges, together: these reach the engine (the vocabulary is 64 and
# the context 64 tokens), where out-of-vocabulary stop ids under min_tokens, tiny temperatures and huge top_k
# used to kill it.
SAMPLING = {
    "max_tokens": st.integers(1, 8),
    "min_tokens": st.integers(0, 4),
    "stop_token_ids": st.lists(st.one_of(st.integers(-2, 70), st.sampled_from(HUGE_INTS)), max_size=3),
    "temperature": st.one_of(st.floats(0, 2), st.sampled_from([1e-38, 5e-324, 1e-6, 1e-5])),
    "top_p": st.one_of(st.floats(1e-9, 1), st.sampled_from([1e-30, 1])),
    "top_k": st.one_of(st.integers(-2, 70), st.sampled_from(HUGE_INTS)),
    "seed": st.one_of(st.integers(-(2**63), 2**64 - 1), st.sampled_from(HUGE_INTS)),
    "logprobs": st.integers(0, 21),
    "ignore_eos": st.booleans(),
    "stop": st.lists(st.text(min_size=1, max_size=3), max_size=3),
}


@st.composite
def sampling_request(draw) -> tuple[str, dict, bool]:
    chat = draw(st.booleans())
    body: dict = {"model": "tiny", "stream": draw(st.booleans())}
    if chat:
        body["messages"] = [{"role": "user", "content": draw(st.text(min_size=1, max_size=20))}]
    else:
        ids = st.lists(st.one_of(st.integers(0, 63), st.integers(-2, 70)), min_size=1, max_size=8)
        body["prompt"] = draw(st.one_of(st.text(min_size=1, max_size=20), ids))
    for name in draw(st.lists(st.sampled_from(sorted(SAMPLING)), min_size=2, max_size=6, unique=True)):
        body[name] = draw(SAMPLING[name])
    if chat and "logprobs" in body:
        body["top_logprobs"], body["logprobs"] = body["logprobs"], True
    return (CHAT if chat else COMPLETIONS), body, body["stream"]


def send_json(server, req: tuple[str, dict, bool]) -> None:
    path, body, stream = req
    data = json.dumps(
        body, allow_nan=True
    ).encode()  # NaN/Infinity literals are sent as such (Python's json reads them)
    check(exchange(server.port, request_bytes("POST", path, data)), stream)


@settings(FUZZ, max_examples=600)
@given(req=json_request())
@pytest.mark.slow
def test_json_bodies_never_get_a_5xx(server, req):
    send_json(server, req)


@settings(FUZZ, max_examples=400)
@given(req=sampling_request())
@pytest.mark.slow
def test_sampling_fields_at_their_edges_never_get_a_5xx(server, req):
    send_json(server, req)


# --- raw bytes -----------------------------------------------------------------------------------------------------
VALID = json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 2}).encode()
raw_bodies = st.one_of(
    st.binary(max_size=64),
    st.integers(0, len(VALID)).map(lambda n: VALID[:n]),  # truncated JSON
    st.sampled_from([b"[]", b"1", b"null", b'"x"', b"{}", b"{,}", b"\xef\xbb\xbf" + VALID, b"NaN", b"-"]),
    st.integers(1, 20_000).map(lambda n: b"[" * n),  # deep nesting
    st.integers(1, 6000).map(lambda n: b'{"model":"tiny","prompt":"hi","max_tokens":' + b"9" * n + b"}"),  # long int
    st.sampled_from([b'{"model":"tiny","prompt":"\xff\xfe"}', b'{"model":"tiny","prompt":"\\ud800"}']),
    st.integers(MAX_REQUEST_BYTES - 64, MAX_REQUEST_BYTES + 64).map(
        lambda n: b'{"model":"tiny","prompt":"' + b"a" * n + b'"}'
    ),
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/vnd.api+json",
        None,
    ]
)
header_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
    lambda n: n not in ("content-length", "transfer-encoding", "host", "content-type", "expect", "connection")
)
header_values = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=30)


@settings(FUZZ, max_examples=250)
@given(
    path=st.sampled_from([COMPLETIONS, CHAT, COMPLETIONS, CHAT, "/v1/models", "/health", "/v1/embeddings", "/"]),
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE"]),
    body=raw_bodies,
    content_type=content_types,
    headers=st.dictionaries(header_names, header_values, max_size=3),
)
def test_raw_bytes_never_get_a_5xx(server, path, method, body, content_type, headers):
    data = request_bytes(method, path, body, headers, content_type=content_type)
    check(exchange(server.port, data))


def test_framing_the_server_cannot_honour_is_a_4xx(server):
    chunked = request_bytes("POST", COMPLETIONS, b"")[: -len(b"Content-Length: 0\r\n\r\n")]
    for extra in (b"Transfer-Encoding: gzip\r\n\r\n", b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"):
        check(exchange(server.port, chunked + extra))
    check(exchange(server.port, request_bytes("POST", COMPLETIONS, VALID, {"X-Pad": "p" * 40_000})))
    assert_still_serving(server)
