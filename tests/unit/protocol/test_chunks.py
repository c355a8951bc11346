import json

import pytest

from speculab.protocol.chunks import MalformedChunk, error_from_body, parse_body, parse_stream_chunk


def test_completions_chunk_with_continuous_usage_and_logprobs():
    d = parse_stream_chunk(
        json.dumps(
            {
                "choices": [
                    {
                        "index": 0,
                        "text": "ab",
                        "finish_reason": None,
                        "logprobs": {"tokens": ["a", "b"], "token_logprobs": [-0.1, -0.2], "top_logprobs": None},
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
        ),
        "completions",
    )
    assert d.text == "ab" and d.carries_text and d.completion_tokens == 2 and d.n_logprob_tokens == 2
    assert d.logprobs[1] == {"token": "b", "logprob": -0.2, "top": {}}


def test_chat_delta_role_only_and_reasoning():
    d = parse_stream_chunk('{"choices":[{"index":0,"delta":{"role":"assistant"}}]}', "chat")
    assert not d.carries_text and d.has_choices
    d = parse_stream_chunk('{"choices":[{"delta":{"reasoning_content":"hmm"}}]}', "chat")
    assert d.carries_text and d.text == "" and d.reasoning == "hmm"


def test_chat_logprobs():
    d = parse_stream_chunk(
        '{"choices":[{"delta":{"content":"xy"},"logprobs":{"content":[{"token":"x","logprob":-1,'
        '"top_logprobs":[{"token":"x","logprob":-1}]},{"token":"y","logprob":-2,"top_logprobs":[]}]}}]}',
        "chat",
    )
    assert d.n_logprob_tokens == 2 and d.logprobs[0]["top"] == {"x": -1}


def test_usage_only_chunk():
    d = parse_stream_chunk('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}', "chat")
    assert not d.has_choices and not d.carries_text and d.completion_tokens == 9


def test_error_objects():
    d = parse_stream_chunk('{"error":{"message":"boom","type":"server_error","code":500}}', "completions")
    assert d.error.message == "boom" and d.error.code == 500
    d = parse_stream_chunk('{"object":"error","message":"oom","type":"InternalServerError","code":500}', "chat")
    assert d.error.message == "oom"
    assert error_from_body(b'{"detail":"Not Found"}').message == "Not Found"
    assert error_from_body(b"<html>") is None


@pytest.mark.parametrize(
    "payload",
    ["{not json", "[1, 2]", '{"choices": "x"}', '{"choices": [1]}', '{"choices":[{"text": 3}]}', '{"usage": 5}'],
)
def test_malformed(payload):
    with pytest.raises(MalformedChunk):
        parse_stream_chunk(payload, "completions")


def test_non_stream_bodies():
    d = parse_body(
        b'{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":1,"completion_tokens":1}}',
        "chat",
    )
    assert d.text == "hi" and d.finish_reason == "stop" and d.completion_tokens == 1
    d = parse_body(b'{"choices":[{"text":"yo","finish_reason":"length"}]}', "completions")
    assert d.text == "yo" and d.usage is None
    with pytest.raises(MalformedChunk):
        parse_body(b"{}", "completions")


def test_an_engines_own_fields_are_carried_raw_and_bounded_without_being_named():
    """The wire layer keeps what a body adds to the OpenAI schema, top-level and on choice 0, for the engine's adapter
    to read: objects and finite numbers, never strings; an object past the size bound keeps its members that fit."""
    logprobs = [[-0.1, 7, "tok"]] * 2_000  # an engine's per-token list beside its counts: past the bound
    body = {
        "id": "x",
        "model": "m",
        "object": "chat.completion",
        "usage": {"prompt_tokens": 1, "completion_tokens": 2},
        "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop",
                     "ext": {"steps": 3, "logprobs": logprobs}, "note": "a string"}],
        "own": {"n": 1},
        "rate": 0.5,
        "label": "dropped",
        "big": {"x": "y" * 20_000},
    }  # fmt: skip
    d = parse_body(json.dumps(body), "chat")
    assert d.extras == {"own": {"n": 1}, "rate": 0.5}  # the OpenAI keys are not an engine's; nothing fits of "big"
    assert d.choice_extras == {"ext": {"steps": 3}}
    said = d.engine_said
    assert (said.usage, said.top, said.choice) == (d.usage, d.extras, d.choice_extras)
    many = {f"k{i}": i for i in range(40)}
    assert len(parse_body(json.dumps({"choices": [], "usage": {}, **many}), "completions").extras) == 16
