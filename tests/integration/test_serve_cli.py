"""`speculab serve` end to end: a real checkpoint directory and tokenizer, a subprocess, the openai client."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)

from speculab.cli import main
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).parents[2] / "src")


def _start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "speculab", "serve", *args], env=env, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_serve_prints_url_and_answers_openai_clients(tiny_checkpoint):
    port = free_port()
    proc = _start([str(tiny_checkpoint), "--port", str(port), "--max-num-seqs", "2", "--served-model-name", "tiny"])
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and "ready" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "server exited before it was ready"
        assert f"http://127.0.0.1:{port}/v1" in line
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        chunks = list(
            client.chat.completions.create(
                model="tiny",
                messages=[{"role": "user", "content": "Say something."}],
                max_tokens=8,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert chunks[-1].usage.completion_tokens >= 1
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        whole = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Say something."}], max_tokens=8, temperature=0
        )
        assert whole.choices[0].message.content == streamed
        comp = client.completions.create(model="tiny", prompt="The quick brown", max_tokens=5, temperature=0)
        assert comp.usage.completion_tokens <= 5 and comp.usage.prompt_tokens > 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["/no/such/dir"], "does not exist"),
        (["{ckpt}", "--max-model-len", "100000"], "exceeds the model's"),
        (["{ckpt}", "--device", "cuda:7"], "cuda"),
        (["{ckpt}", "--dtype", "float8"], "unknown dtype"),
        (["{ckpt}", "--port", "0"], "--port"),
        (["{ckpt}", "--threads", "0"], "--threads must be at least 1"),
        (["{ckpt}", "--max-num-seqs", "8", "--max-num-batched-tokens", "4"], "max_num_batched_tokens"),
        (["{ckpt}", "--max-num-seqs", "100000000", "--max-model-len", "512"], "lower --max-num-seqs"),
    ],
)
def test_serve_user_mistakes_are_one_line(tiny_checkpoint, capsys, args, words):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", *(a.replace("{ckpt}", str(tiny_checkpoint)) for a in args)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert words in err and "Traceback" not in err, err
