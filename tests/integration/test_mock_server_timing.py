"""The mock server keeps its schedule, measured by a raw client at concurrency 1 and 64 (issue 2's tolerances).

Server: TTFT 100 ms, 20 ms between chunks, 2 tokens per chunk, run as `speculab mock-server --spin-ms 2.5` in its
own process (so its CPU does not delay the client's reads). Without the spin, asyncio's sleeps wake 1-2 ms late
(docs/mock-server.md), which leaves no margin under a 2 ms tolerance: the default mode is the cheap one, the spin
the precise one that client benchmarks use. Medians must be within 2 ms (TTFT) and 1 ms (chunk gap) of the
script. The send time is taken when the request is written to the socket (an aiohttp trace hook), so the client's
own queueing of 64 simultaneous sends is not charged to the server. Connections are warmed first.

These tolerances only mean something on a machine with CPU to spare: the tests first measure how busy the CPUs
are and how late the event loop wakes from plain sleeps, and skip, saying so, when the machine is too busy
(tests/fakes/quiet.py; SPECULAB_FORCE_TIMING_TESTS=1 runs them anyway). A busy check cannot see a stall of the
VM itself (CI saw one TTFT p50 of 644 ms at concurrency 64 with nothing else running), so each test measures up to
3 times and passes when one measurement keeps the schedule: a fault of the mock's timing misses it every time.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from fakes.quiet import OtherCpu, other_cpu_share, skip_if_busy, wakeup_lateness_s
from fakes.raw_sse import post

# millisecond timing assertions: on the held lane, the rest of the suite in the idle background (tests/sharing.py)
pytestmark = pytest.mark.serial

SRC = Path(__file__).resolve().parents[2] / "src"
BODY = {"prompt": "measure me please", "stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture(scope="module")
def server_url():
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-m", "speculab", "mock-server", "--port", "0", "--ttft-ms", "100", "--gap-ms", "20"]
    argv += ["--tokens-per-chunk", "2", "--output-tokens", "32", "--spin-ms", "2.5"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        m = re.search(r"(http://\S+)", line)
        assert m, f"no URL in {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _skip_if_busy() -> None:
    """Millisecond tolerances need idle CPUs: other processes' load delays the server's and client's wake-ups."""
    skip_if_busy(others_share=await other_cpu_share(0.5), max_others_share=0.5, figures="before the test")
    late = await wakeup_lateness_s(quantile=0.5, sleep_s=0.002)
    skip_if_busy(lateness_s=late, max_lateness_s=0.0012, figures="sleeps late at p50, before the test")


def _traced_session() -> aiohttp.ClientSession:
    """A session whose requests record, in ctx.trace_request_ctx["sent"], when their body went to the socket.

    aiohttp buffers the headers and writes them together with the body, from a task of its own: the body write
    is the moment the request actually leaves."""
    trace = aiohttp.TraceConfig()

    async def on_chunk_sent(session, ctx, params):
        if ctx.trace_request_ctx is not None and "sent" not in ctx.trace_request_ctx:
            ctx.trace_request_ctx["sent"] = time.perf_counter()

    trace.on_request_chunk_sent.append(on_chunk_sent)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trace_configs=[trace])


async def _wave(session, url, n, stagger_s=0.0):
    async def one(i):
        await asyncio.sleep(i * stagger_s)
        ctx: dict[str, float] = {}
        r = await post(session, url + "/v1/completions", BODY, trace_ctx=ctx)
        r.t_send = ctx["sent"]
        return r

    return await asyncio.gather(*(one(i) for i in range(n)))


ATTEMPTS = 3  # a fault of the mock's schedule shows in every attempt; a stall of the VM (seen: TTFT p50 644 ms) in one


async def _check(url: str, concurrency: int, rounds: int, stagger_s: float = 0.0) -> None:
    await _skip_if_busy()
    seen = []
    for _ in range(ATTEMPTS):
        others = OtherCpu()  # a job that starts during the test delays the server's and the client's wake-ups too
        async with _traced_session() as session:
            await _wave(session, url, concurrency)  # open the keep-alive connections
            results = [r for _ in range(rounds) for r in await _wave(session, url, concurrency, stagger_s)]
        ttft = statistics.median(r.ttft_s for r in results)
        gap = statistics.median(g for r in results for g in r.gaps_s())
        for r in results:  # counts hold on any machine, in every attempt
            assert len(r.text_chunks()) == 16 and r.events[-1][1] == "[DONE]"
            assert r.events[-2][1]["usage"]["completion_tokens"] == 32
        figures = f"TTFT p50 {ttft * 1e3:.2f} ms, gap p50 {gap * 1e3:.2f} ms"
        skip_if_busy(others_share=others.share(), max_others_share=0.10, figures=f"during the test; {figures}")
        if abs(ttft - 0.1) <= 0.002 and abs(gap - 0.02) <= 0.001:
            return
        seen.append(figures)
    pytest.fail(f"the mock missed its schedule (TTFT 100 +- 2 ms, gap 20 +- 1 ms) in all {ATTEMPTS} attempts: {seen}")


async def test_timing_at_concurrency_1(server_url):
    await _check(server_url, concurrency=1, rounds=5)


async def test_timing_at_concurrency_64(server_url):
    # Starts 0.5 ms apart: all 64 streams are in flight together (32 ms of starts < 100 ms TTFT), but the
    # server's HTTP parsing (~50-100 us per request in aiohttp) is not asked to absorb 64 requests in one instant.
    await _check(server_url, concurrency=64, rounds=1, stagger_s=0.0005)
