"""Slow clients (issue 44): a request that never finishes is closed at the receive deadline and counted, a long
streamed answer is never cut by it, and running out of descriptors costs one log line per interval, not a traceback
per accept. Every loop here is bounded in count and time; all traffic stays on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.engine_fakes import tiny_model
from tests.integration.raw_http import closed, exchange, read_answer, request_bytes
from tests.integration.server_harness import CharDetok, CharTokenizer, free_port

from speculab.engine.async_engine import AsyncEngine
from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.server.app import AppConfig, create_app
from speculab.engine.server.connection import uvicorn_config
from speculab.serving.exhaustion import ConnectionCollector, ConnectionCounters

SRC = str(Path(__file__).parents[2] / "src")
SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@contextlib.contextmanager
def serve(app: Any, counters: ConnectionCounters, deadline_s: float) -> Iterator[int]:
    """uvicorn as `speculab serve` runs it, with a short receive deadline, on a free port; yields the port."""
    import uvicorn

    port = free_port()
    cfg = uvicorn_config(
        app,
        host="127.0.0.1",
        port=port,
        max_header_bytes=16384,
        request_receive_timeout_s=deadline_s,
        counters=counters,
    )
    server = uvicorn.Server(cfg)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not server.started:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def engine_server(deadline_s: float) -> Iterator[tuple[int, ConnectionCounters]]:
    engine = Engine(
        tiny_model(),
        EngineConfig(max_num_seqs=2, max_model_len=64, max_num_batched_tokens=64),
        eos_token_ids=CharTokenizer.eos_token_ids,
        detokenizer_factory=lambda ids: CharDetok(CharTokenizer(), ids),
    )
    counters = ConnectionCounters()
    app = create_app(
        AsyncEngine(engine),
        CharTokenizer(),
        AppConfig(served_model_name="tiny"),
        collectors=[ConnectionCollector(counters, "tiny")],
    )
    with serve(app, counters, deadline_s) as port:
        yield port, counters


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_slow_connections_are_closed_at_the_deadline_counted_and_normal_requests_served(caplog):
    n, deadline_s = 300, 2.0
    caplog.set_level(logging.INFO)
    with engine_server(deadline_s) as (port, counters):
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
        start = time.monotonic()
        for s in socks:
            s.sendall(SLOW_HEAD)
            s.setblocking(False)
        answer = None
        open_ = list(socks)
        while open_ and time.monotonic() - start < deadline_s + 4:  # one header byte each per 0.5 s
            for s in open_:
                with contextlib.suppress(OSError):
                    s.send(b"a")
            if answer is None:  # a normal request while they hold their connections
                answer = exchange(port, request_bytes("GET", "/health"), timeout_s=5)
                answered_s = time.monotonic() - start
            time.sleep(0.5)
            open_ = [s for s in open_ if not closed(s)]
        elapsed = time.monotonic() - start
        for s in socks:
            s.close()
        assert answer is not None and answer.status == 200 and answered_s < deadline_s
        assert not open_, f"{len(open_)} of {n} slow connections still open after {elapsed:.1f} s"
        assert deadline_s - 0.5 < elapsed < deadline_s + 2.5
        assert counters.receive_timeouts == n
        assert metric(port, "speculab:request_receive_timeouts_total") == n
    assert len(caplog.records) < 10, [r.getMessage() for r in caplog.records[:10]]  # closing them logs nothing


async def slow_stream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Streams ten chunks 0.25 s apart after reading the whole body (a long generation in miniature)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body", False):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    for i in range(10):
        await send({"type": "http.response.body", "body": f"chunk {i}\n".encode(), "more_body": True})
        await asyncio.sleep(0.25)
    await send({"type": "http.response.body", "body": b""})


@pytest.mark.slow
def test_the_deadline_never_cuts_a_streamed_answer_and_rearms_for_the_next_request():
    counters = ConnectionCounters()
    with serve(slow_stream_app, counters, deadline_s=1.0) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            head, body = request_bytes("POST", "/", b"x" * 10)[:-10], b"x" * 10
            sock.sendall(head + body[:5])
            time.sleep(0.5)  # the body arrives in two parts, within the deadline
            sock.sendall(body[5:])
            start = time.monotonic()
            answer = read_answer(sock)  # 2.5 s of streaming, well past the 1 s deadline
            assert answer.status == 200 and answer.body.count(b"chunk") == 10
            assert time.monotonic() - start > 2.0 and counters.receive_timeouts == 0
            # the next request on the kept-alive connection has its own deadline, armed by its first byte
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            late = read_answer(sock)
            assert late.status == 408 and late.json()["error"]["code"] == "request_timeout"
            assert counters.receive_timeouts == 1
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # head complete, body not
            sock.sendall(request_bytes("POST", "/", b"x" * 100)[:-90])
            assert read_answer(sock).status == 408 and counters.receive_timeouts == 2
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # pipelined behind a stream
            sock.sendall(request_bytes("POST", "/", b"x") + request_bytes("POST", "/", b"x" * 100)[:-90])
            assert read_answer(sock).status == 200  # the stream is not cut
            assert read_answer(sock).status == 408 and counters.receive_timeouts == 3
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # nothing sent at all
            sock.settimeout(5)
            assert read_answer(sock).status == 408 and counters.receive_timeouts == 4


# A child server whose descriptors run out: RLIMIT_NOFILE 64, the default 30 s receive deadline, a trivial app.
_CHILD = """
import logging, resource, sys
import uvicorn
from speculab.engine.server.connection import uvicorn_config
from speculab.serving.exhaustion import ConnectionCounters, bound_logs

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})

resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
counters = ConnectionCounters()
cfg = uvicorn_config(app, host="127.0.0.1", port=int(sys.argv[1]), max_header_bytes=16384,
                     counters=counters, lifespan="off")
bound_logs(counters)
print("serving", flush=True)
uvicorn.Server(cfg).run()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_out_of_descriptors_the_oldest_incomplete_requests_make_room_and_one_line_is_logged(tmp_path):
    port, log = free_port(), tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, *sys.path])}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(port)], env=env, stdout=out, stderr=out)
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b"serving" not in log.read_bytes():
            time.sleep(0.05)
        time.sleep(0.3)
        for _ in range(120):  # about twice what the server can hold: accept() fails with EMFILE for the rest
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.5)
        assert proc.poll() is None
        # long before their 30 s deadline, the oldest silent connections are closed to make room for a request
        start = time.monotonic()
        answer = exchange(port, request_bytes("GET", "/"), timeout_s=5)
        assert answer.status == 200 and time.monotonic() - start < 3
        shed = sum(closed(s) for s in (s.setblocking(False) or s for s in socks))
        assert shed >= 50, shed
        text = log.read_text()
        assert "accept() failed" in text and "Too many open files" in text, text[-2000:]
        assert text.count("accept() failed") == 1 and "Traceback" not in text, text[-2000:]
        assert len(text) < 4000, text[-2000:]
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(timeout=30)
