"""`speculab mock-server` as a user runs it: prints its URL when ready, serves, stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from speculab.harness.servers.process import free_port

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "speculab", "mock-server", *args]


def test_serves_then_stops_cleanly_on_ctrl_c():
    argv = _cli("--port", "0", "--ttft-ms", "1", "--gap-ms", "1", "--tokens-per-chunk", "2,3", "--model", "my-model")
    # faulthandler: a server still up 10 s after Ctrl-C gets SIGABRT and prints every thread's stack (below)
    env = {**ENV, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        url = re.search(r"ready at (http://\S+)", line).group(1)
        req = urllib.request.Request(
            url + "/v1/completions",
            data=json.dumps({"prompt": "p", "model": "my-model", "max_tokens": 5}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["usage"]["completion_tokens"] == 5
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
        # default k = largest chunk - 1: the 3-token chunks accept every draft
        assert "vllm:spec_decode_num_drafts_total" in metrics
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            # seen once in the suite (2026-12-07, 0.3 s of CPU in the test: not a starved process), never alone in 80
            # tries: where it waits is the finding
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=10)
            stacks = err[:6000]  # innermost frames first
            raise AssertionError(f"still serving 10 s after SIGINT; its threads at SIGABRT:\n{stacks}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "Traceback" not in err and "stopped" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--tokens-per-chunk", "2,x"), "--tokens-per-chunk must be N or a pattern"),
        (("--tokens-per-chunk", "3", "--num-speculative-tokens", "1"), "num_speculative_tokens >= 2"),
        (("--fault-5xx-rate", "1.5"), "fault_5xx_rate must be in [0, 1]"),
    ],
)
def test_bad_settings_are_one_line_errors(args, needle):
    proc = subprocess.run(_cli("--port", "0", *args), capture_output=True, text=True, env=ENV, timeout=30)
    assert proc.returncode == 2
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_port_in_use_is_a_one_line_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run(_cli("--port", str(port)), capture_output=True, text=True, env=ENV, timeout=30)
    assert proc.returncode == 2
    assert "address already in use" in proc.stderr and "--port" in proc.stderr and "Traceback" not in proc.stderr


def test_startup_delay_before_listening():
    import time

    port = free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        _cli("--port", str(port), "--startup-ms", "700"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        line = proc.stdout.readline()
        assert "ready at" in line and time.monotonic() - t0 >= 0.7
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
            assert resp.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_sigterm_stops_cleanly():
    proc = subprocess.Popen(_cli("--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert "ready at" in proc.stdout.readline()
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped" in err and "Traceback" not in err
