"""The server on a real checkpoint directory: byte-level BPE text, stop strings and unicode end to end."""

from __future__ import annotations

import openai
import pytest
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.integration.server_harness import running_server


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    with running_server(model_dir=tiny_checkpoint, max_model_len=256) as s:
        yield openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=30)


PROMPTS = ["The quick brown fox", "naïve café — ünïcödé ✓ 你好", "def f(x):\n    return"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_streamed_text_equals_whole_text(client, prompt):
    kw = {"model": "tiny", "prompt": prompt, "max_tokens": 24, "temperature": 0, "extra_body": {"ignore_eos": True}}
    whole = client.completions.create(**kw).choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(**kw, stream=True))
    assert streamed == whole  # a random model emits broken byte runs too: they must stream exactly as decoded


@pytest.mark.parametrize("prompt", PROMPTS)
def test_stop_string_cut_on_real_tokens(client, prompt):
    kw = {"model": "tiny", "prompt": prompt, "max_tokens": 24, "temperature": 0, "extra_body": {"ignore_eos": True}}
    whole = client.completions.create(**kw).choices[0].text
    stop = whole[len(whole) // 2 : len(whole) // 2 + 2]
    if not stop.strip():
        pytest.skip("generated text has no usable stop string at its middle")
    chunks = list(client.completions.create(**kw, stop=[stop], stream=True))
    text = "".join(c.choices[0].text for c in chunks)
    assert text == whole[: whole.index(stop)] and chunks[-1].choices[0].finish_reason == "stop"
    # the same cut without streaming; a stop inside text held back as incomplete UTF-8 is found at the end
    once = client.completions.create(**kw, stop=[stop])
    assert once.choices[0].text == text and once.choices[0].finish_reason == "stop"
    assert once.usage.completion_tokens <= 24
