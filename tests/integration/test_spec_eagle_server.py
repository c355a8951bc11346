"""EAGLE speculation as clients see it: `speculab serve demo --speculative-config '{"method":"eagle",
"model":"demo-eagle",...}'` answers with plain decoding's greedy text, and its acceptance counters move in /metrics,
with fixed k and with the adaptive policy."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
import torch
from tests.integration.server_harness import free_port

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.loader import SHIPPED_MODELS, load_model
from speculab.engine.sequence import SamplingParams
from speculab.engine.tokenizer import IncrementalDetokenizer, Tokenizer

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["import os\n\n\ndef main(argv):\n", "class Stack:\n    def __init__(self):\n", "for i in range(10):\n"]
MAX_TOKENS = 40

pytestmark = pytest.mark.skipif(
    not (SHIPPED_MODELS["demo-eagle"] / "config.json").is_file(), reason="demo EAGLE head not shipped"
)


@contextlib.contextmanager
def serve(config: dict) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "speculab", "serve", "demo", "--port", str(port), "--max-num-seqs", "4"]
    cmd += ["--threads", "1", "--speculative-config", json.dumps(config)]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline, line = time.monotonic() + 180, ""
        while time.monotonic() < deadline and "ready" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "server exited before it was ready"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def plain_greedy(prompt_ids: list[list[int]]) -> list[tuple[int, str]]:
    """(tokens, text) of the demo target's plain greedy continuations, in process: float32 on the CPU and the
    server's detokenizer, as `speculab serve demo` without speculation answers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = load_model("demo")
        tok = Tokenizer.from_dir(SHIPPED_MODELS["demo"])
        engine = Engine(
            model,
            EngineConfig(max_num_seqs=4, max_model_len=512),
            eos_token_ids=set(tok.eos_token_ids),
            detokenizer_factory=lambda ids: IncrementalDetokenizer(tok, ids),
        )
        seqs = engine.generate(prompt_ids, SamplingParams(max_tokens=MAX_TOKENS, temperature=0))
        return [(len(s.output_ids), s.text) for s in seqs]
    finally:
        torch.set_num_threads(threads)


def metric(body: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(name + "{"))


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.slow
def test_served_eagle_head_keeps_greedy_output_and_counts_acceptance(adaptive):
    tok = Tokenizer.from_dir(SHIPPED_MODELS["demo"])
    prompt_ids = [tok.encode(p) for p in PROMPTS]
    want = plain_greedy(prompt_ids)
    config = {"method": "eagle", "model": "demo-eagle", "num_speculative_tokens": 4}
    if adaptive:
        config["adaptive"] = True
    with serve(config) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120)
        for ids, (n_tokens, text) in zip(prompt_ids, want, strict=True):
            out = client.completions.create(model="demo", prompt=ids, max_tokens=MAX_TOKENS, temperature=0)
            assert out.choices[0].text == text
            assert out.usage.completion_tokens == n_tokens
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            body = r.read().decode()
    drafts = metric(body, "speculab:spec_decode_num_drafts_total")
    accepted = metric(body, "speculab:spec_decode_num_accepted_tokens_total")
    steps = metric(body, "speculab:spec_decode_num_steps_total")
    assert drafts > 0 and accepted > 0 and steps > 0
    assert accepted <= metric(body, "speculab:spec_decode_num_draft_tokens_total")
