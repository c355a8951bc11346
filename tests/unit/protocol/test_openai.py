"""The OpenAI wire schemas: what real clients send parses; what we cannot honour is refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from speculab.protocol import openai as oa


def test_module_does_not_import_torch():
    code = "import sys, speculab.protocol.openai; print('torch' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [("hi", "hi"), (["hi"], "hi"), ([1, 2, 3], [1, 2, 3]), ([[4, 5]], [4, 5])],
)
def test_prompt_forms(prompt, expected):
    assert oa.CompletionRequest(model="m", prompt=prompt).prompt == expected


def test_typical_openai_sdk_chat_body():
    body = {
        "model": "m",
        "messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]},
        ],
        "max_completion_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.7,
        "seed": 3,
        "user": "u1",
        "store": False,
    }
    req = oa.ChatCompletionRequest.model_validate(body)
    assert req.output_limit == 5
    assert req.message_dicts() == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"prompt": ["a", "b"]}, "batched prompts"),
        ({"prompt": "a", "n": 2}, "n > 1"),
        ({"prompt": "a", "frequency_penalty": 1}, "frequency_penalty"),
        ({"prompt": "a", "logit_bias": {"5": 1}}, "logit_bias"),
        ({"prompt": "a", "echo": True}, "echo"),
        ({"prompt": "a", "stop": [""]}, "non-empty"),
        ({"prompt": "a", "stream_options": {"include_usage": True}}, "only allowed when stream"),
        ({"prompt": "a", "max_tokns": 3}, "max_tokns"),
        ({"prompt": "a", "logprobs": 21}, "logprobs"),
        ({"prompt": "a", "seed": 2**64}, "seed"),
    ],
)
def test_refusals_name_the_problem(body, words):
    with pytest.raises(ValidationError) as e:
        oa.CompletionRequest.model_validate({"model": "m", **body})
    assert words in str(e.value)


def test_chat_refusals():
    msg = [{"role": "user", "content": "x"}]
    with pytest.raises(ValidationError, match="tools"):
        oa.ChatCompletionRequest(model="m", messages=msg, tools=[{"type": "function"}])
    with pytest.raises(ValidationError, match="top_logprobs requires"):
        oa.ChatCompletionRequest(model="m", messages=msg, top_logprobs=2)
    with pytest.raises(ValidationError, match="disagree"):
        oa.ChatCompletionRequest(model="m", messages=msg, max_tokens=3, max_completion_tokens=4)


def test_builders_shapes():
    u = oa.usage(3, 4, {"speculative": {"num_drafts": 1}})
    assert u["total_tokens"] == 7 and u["speculative"] == {"num_drafts": 1}
    r = oa.chat_response("id", "m", 1, "hi", "stop", u, None)
    assert r["choices"][0]["message"] == {"role": "assistant", "content": "hi"} and r["object"] == "chat.completion"
    lp = oa.completion_logprobs([("a", -0.1, [("a", -0.1), ("b", -2.0)]), ("bc", -0.5, [])], text_offset0=2)
    assert lp["text_offset"] == [2, 3] and lp["top_logprobs"][0] == {"a": -0.1, "b": -2.0}
    clp = oa.chat_logprobs([("é", -0.2, [("é", -0.2)])])
    assert clp["content"][0]["bytes"] == [195, 169] and clp["content"][0]["top_logprobs"][0]["token"] == "é"
    err = oa.error_body("bad", param="x")
    assert json.loads(json.dumps(err)) == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": "x", "code": None}
    }
    assert oa.usage_chunk("id", "m", 1, "text_completion", u)["choices"] == []
