"""What the request schemas refuse on their own: non-finite numbers, integers past 64 bits, negative or too many
token ids, and text that is not valid Unicode (a lone surrogate), in every string field the server reads."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from speculab.protocol import openai as oa

MSG = [{"role": "user", "content": "x"}]


def completion(**kw):
    return oa.CompletionRequest.model_validate({"model": "m", "prompt": "p", **kw})


def chat(**kw):
    return oa.ChatCompletionRequest.model_validate({"model": "m", "messages": MSG, **kw})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", math.nan),
        ("temperature", math.inf),
        ("top_p", math.nan),
        ("presence_penalty", math.inf),
        ("frequency_penalty", -math.inf),
        ("repetition_penalty", math.nan),
        ("top_k", 2**63),
        ("max_tokens", 2**63),
        ("min_tokens", 2**64),
        ("n", 2**100),
        ("seed", 2**64),
        ("seed", -(2**63) - 1),
        ("stop_token_ids", [-1]),
        ("stop_token_ids", [2**63]),
        ("stop_token_ids", list(range(oa.MAX_STOP_TOKEN_IDS + 1))),
        ("prompt", [2**63]),
        ("prompt", [[-(2**63) - 1]]),
        ("logit_bias", {"5": math.nan}),
    ],
)
def test_numbers_outside_what_the_engine_can_hold_are_refused(field, value):
    with pytest.raises(ValidationError) as e:
        completion(**{field: value})
    assert e.value.errors()[0]["loc"][0] == field


def test_the_64_bit_edges_are_accepted():
    r = completion(top_k=2**63 - 1, seed=2**64 - 1, stop_token_ids=[2**63 - 1], prompt=[0, 2**63 - 1])
    assert r.seed == 2**64 - 1 and completion(seed=-(2**63)).seed == -(2**63)


def test_json_nan_and_infinity_literals_are_refused():
    body = '{"model": "m", "prompt": "p", "temperature": NaN}'
    with pytest.raises(ValidationError, match="finite"):
        oa.CompletionRequest.model_validate(json.loads(body))


LONE = "\ud800"


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: completion(prompt=LONE), "prompt"),
        (lambda: completion(prompt=["ok" + LONE]), "prompt"),
        (lambda: completion(stop=["a", "b\udfff"]), "stop"),
        (lambda: completion(stop=LONE), "stop"),
        (lambda: completion(model=LONE), "model"),
        (lambda: completion(user=LONE), "user"),
        (lambda: completion(suffix=LONE), "suffix"),
        (lambda: chat(messages=[{"role": "user", "content": LONE}]), "messages"),
        (lambda: chat(messages=[{"role": "user", "content": [{"type": "text", "text": LONE}]}]), "messages"),
        (lambda: chat(messages=[{"role": "user", "content": "x", "name": LONE}]), "messages"),
    ],
)
def test_lone_surrogates_are_refused_by_field(make, field):
    with pytest.raises(ValidationError) as e:
        make()
    errs = [x for x in e.value.errors() if "surrogate" in x["msg"]]
    assert errs and errs[0]["loc"][0] == field


def test_valid_unicode_passes_even_when_sent_as_a_json_surrogate_pair():
    body = json.loads('{"model": "m", "prompt": "caf\\u00e9 \\ud83d\\ude00 \\u4f60\\u597d"}')
    assert oa.CompletionRequest.model_validate(body).prompt == "café 😀 你好"
