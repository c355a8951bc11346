"""`speculab serve`'s limit and access flags, end to end: a subprocess on a real checkpoint, raw sockets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.integration.raw_http import exchange, is_openai_error, post_json, request_bytes
from tests.integration.server_harness import free_port

from speculab.cli import main

SRC = str(Path(__file__).parents[2] / "src")


@pytest.mark.slow
def test_limit_and_access_flags_reach_the_server(tiny_checkpoint):
    port = free_port()
    args = [str(tiny_checkpoint), "--port", str(port), "--max-num-seqs", "2", "--served-model-name", "tiny"]
    args += ["--max-request-bytes", "4096", "--max-header-bytes", "2048", "--max-prompt-tokens", "8"]
    args += ["--api-key", "k", "--metrics-private"]
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "speculab", "serve", *args], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline, line = time.monotonic() + 120, ""
        while time.monotonic() < deadline and "ready" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "server exited before it was ready"
        key = {"Authorization": "Bearer k"}
        big = exchange(port, request_bytes("POST", "/v1/completions", b"x" * 5000, key))
        assert big.status == 413 and is_openai_error(big)
        head = exchange(port, request_bytes("GET", "/health", headers={"X-Pad": "p" * 3000}))
        assert head.status == 431 and is_openai_error(head)
        body = {"model": "tiny", "prompt": "The quick brown fox jumps over the lazy dog", "max_tokens": 2}
        long = post_json(port, "/v1/completions", body, key)
        assert long.status == 400 and long.json()["error"]["code"] == "context_length_exceeded"
        assert post_json(port, "/v1/completions", {**body, "prompt": "Hi"}, key).status == 200
        assert exchange(port, request_bytes("GET", "/metrics")).status == 401
        assert exchange(port, request_bytes("GET", "/metrics", headers=key)).status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--max-request-bytes", "10"], "--max-request-bytes must be at least 1024"),
        (["--max-header-bytes", "0"], "--max-header-bytes must be at least 1024"),
        (["--max-prompt-tokens", "0"], "--max-prompt-tokens must be at least 1"),
    ],
)
def test_limit_flag_mistakes_are_one_line(tiny_checkpoint, capsys, args, words):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", str(tiny_checkpoint), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and words in err and "Traceback" not in err, err
