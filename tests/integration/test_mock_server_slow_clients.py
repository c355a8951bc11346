"""Slow clients against `speculab mock-server` (issue 44): the bounds of `speculab serve`, from the same code
(serving/exhaustion.py). A request that never finishes is closed at the receive deadline with a 408 and counted;
a streamed answer longer than the deadline is never cut; out of descriptors, the oldest incomplete requests make
room and one line is logged, no traceback. Every loop is bounded in count and time; traffic stays on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from integration.raw_http import closed, exchange, read_answer, request_bytes
from speculab.harness.servers.process import free_port
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

SRC = str(Path(__file__).parents[2] / "src")
SLOW_HEAD = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
HANG_S = 30  # a guard against a hung test, not a timed assertion


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def _completion(port: int, max_tokens: int) -> tuple[int, bytes]:
    body = json.dumps({"model": "speculab-mock", "prompt": "hi", "max_tokens": max_tokens, "stream": True}).encode()
    answer = exchange(port, request_bytes("POST", "/v1/completions", body), timeout_s=HANG_S)
    return answer.status, answer.body


def test_slow_connections_get_408_at_the_deadline_counted_while_normal_requests_are_served():
    n = 300
    with mock_server_in_thread(MockConfig(ttft_s=0.001, gap_s=0.001, request_receive_timeout_s=1.0)) as url:
        port = _port(url)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
        for s in socks:
            s.sendall(SLOW_HEAD)
            s.setblocking(False)
        status, _ = _completion(port, 4)  # a normal request while they hold their connections
        assert status == 200
        open_, start = list(socks), time.monotonic()
        while open_ and time.monotonic() - start < HANG_S:  # a header byte each per 0.25 s: never a whole head
            for s in open_:
                with contextlib.suppress(OSError):
                    s.send(b"a")
            time.sleep(0.25)
            open_ = [s for s in open_ if not closed(s)]
        assert not open_, f"{len(open_)} of {n} slow connections still open"
        assert _metric(port, "speculab_mock:request_receive_timeouts_total") == n
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # what a slow client reads
            sock.sendall(SLOW_HEAD)
            late = read_answer(sock)
            assert late.status == 408 and late.json()["error"]["code"] == "request_timeout"
        for s in socks:
            s.close()


def test_a_stream_longer_than_the_deadline_is_never_cut():
    with mock_server_in_thread(MockConfig(ttft_s=0.001, gap_s=0.05, request_receive_timeout_s=0.5)) as url:
        start = time.monotonic()
        status, body = _completion(_port(url), 30)  # 30 chunks 50 ms apart: three times the deadline
        assert status == 200 and body.rstrip().endswith(b"data: [DONE]")
        assert time.monotonic() - start > 0.5  # it did outlast the deadline
        assert _metric(_port(url), "speculab_mock:request_receive_timeouts_total") == 0


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_out_of_descriptors_the_oldest_incomplete_requests_make_room_and_one_line_is_logged(tmp_path):
    port, log = free_port(), tmp_path / "mock.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, *sys.path])}

    def few_descriptors() -> None:  # soft and hard: the mock-server raises the soft limit to the hard one
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    cmd = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "1", "--gap-ms", "1"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=out, preexec_fn=few_descriptors)
    socks: list[socket.socket] = []
    try:
        start = time.monotonic()
        while time.monotonic() - start < HANG_S and b"ready at" not in log.read_bytes():
            time.sleep(0.05)
        assert b"open files 64" in log.read_bytes(), log.read_text()
        for _ in range(120):  # about twice what the server can hold: accept() fails with EMFILE for the rest
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        # long before their 30 s deadline, the oldest silent connections are closed to make room for a request
        status, _ = _completion(port, 4)
        assert status == 200 and proc.poll() is None
        shed = sum(closed(s) for s in (s.setblocking(False) or s for s in socks))
        assert shed >= 50, shed
        assert _metric(port, "speculab_mock:connections_shed_total") >= 50
        text = log.read_text()
        assert text.count("accept() failed") == 1 and "Too many open files" in text, text[-2000:]
        assert "Traceback" not in text and len(text) < 4000, text[-2000:]
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(timeout=HANG_S)
