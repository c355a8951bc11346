"""The abuse soak of `server_soak.py --abuse-s S`: valid streams at a fixed concurrency while the server is abused.

Windows of --window-s alternate, clean first: in a *clean* window every client loop sends valid streamed
completions; in an *abuse* window each loop's request is, by a seeded draw, a fuzzed body (--fuzz-share), a stream
it drops after the first chunk (--disconnect-share) or a valid stream as before, while --slow-headers more
connections send their request headers one byte a second and never finish them. Both kinds of window run on the
same server, interleaved, so drift (a warming cache, a neighbour's load) falls on both alike; what differs is the
abuse. A warm-up of valid streams before the first window is not counted.

The valid requests' end-to-end latency (send to the last byte, seconds) is compared between the two kinds of
window: p50 and p99 of each and the abuse/clean p99 ratio with a bootstrap interval (requests resampled within each
kind). Also counted: every status by kind, 5xx, connections the server closed, whether the server process is alive
and /health answers at the end, the running/waiting gauges and KV usage once the load has stopped (all back to 0?),
and the server's RSS over the run (`rss_timeline`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np

PROMPTS = (
    "Once upon a time",
    "The quick brown fox",
    "In a small village by the sea,",
    "Summarize: the cat sat on the mat and the dog sat on the log.",
    "List three colours:",
    "Q: What is two plus two?\nA:",
)


@dataclass(frozen=True, slots=True)
class AbuseConfig:
    port: int
    model: str
    abuse_s: float  # seconds of abuse windows in all; as many seconds of clean windows run between them
    window_s: float = 60.0
    warmup_s: float = 20.0
    streams: int = 32  # client loops, each one request at a time
    max_tokens: int = 16
    fuzz_share: float = 0.10
    disconnect_share: float = 0.05
    slow_headers: int = 50
    seed: int = 0


@dataclass(slots=True)
class Tally:
    """What one kind of window saw."""

    seconds: float = 0.0
    latencies_s: list[float] = field(default_factory=list)  # valid streams that completed with 200
    statuses: Counter[str] = field(default_factory=Counter)  # "valid 200", "fuzz 400", "disconnect 200", ...
    slow_closed_by_server: int = 0  # slow-header connections the server ended


# ---------------------------------------------------------------------------------------------------------------
# What the loops send.
# ---------------------------------------------------------------------------------------------------------------


def valid_body(cfg: AbuseConfig, rng: random.Random, *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": cfg.model,
        "prompt": rng.choice(PROMPTS),
        "max_tokens": cfg.max_tokens,
        "temperature": 0,
        "stream": stream,
    }


def fuzz_body(cfg: AbuseConfig, rng: random.Random) -> bytes:
    """A seeded malformed or hostile request body: a valid one with one thing wrong (or many)."""
    base = valid_body(cfg, rng, stream=rng.random() < 0.5)
    text = json.dumps(base)
    kind = rng.randrange(12)
    if kind == 0:  # bytes flipped at random places
        raw = bytearray(text.encode())
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    if kind == 1:  # cut anywhere
        return text.encode()[: rng.randrange(len(text))]
    if kind == 2:  # a field of the wrong type or out of range
        key = rng.choice(["max_tokens", "temperature", "top_p", "top_k", "n", "seed", "logprobs", "stop", "prompt"])
        base[key] = rng.choice([-1, 0, 2**63, 1e308, -1e308, "x", [], {}, None, True, [[1, 2], [3]], "\u0000"])
        return json.dumps(base).encode()
    if kind == 3:  # nested very deep
        return b'{"model": "' + cfg.model.encode() + b'", "prompt": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    if kind == 4:  # invalid UTF-8 and NUL bytes inside the prompt
        return text.replace("Once", "\x00").encode().replace(b"The", b"\xff\xfe\xc3")
    if kind == 5:  # a lone surrogate (JSON-legal, not UTF-8-encodable)
        return json.dumps({**base, "prompt": "\ud800 hi"}).encode()
    if kind == 6:  # token ids out of the vocabulary
        return json.dumps({**base, "prompt": [rng.randrange(10**6, 10**9) for _ in range(8)]}).encode()
    if kind == 7:  # many stop strings, a huge n, logit_bias garbage
        return json.dumps({**base, "stop": ["x" * 50] * 500, "n": 10**6, "logit_bias": {"abc": "def"}}).encode()
    if kind == 8:  # not JSON at all
        return rng.choice([b"", b"null", b"[]", b"42", b"NaN", b"<html>hi</html>", b"\xef\xbb\xbf{}"])
    if kind == 9:  # unknown and duplicated keys
        return text[:-1].encode() + b', "max_tokens": "again", "zzz": {"a": [1, {"b": null}]}}'
    if kind == 10:  # non-finite numbers (Python's JSON writes NaN/Infinity)
        return json.dumps({**base, "temperature": float("nan"), "top_p": float("inf")}).encode()
    return json.dumps({**base, "messages": [{"role": "user", "content": "hi"}]}).encode()  # chat body on /completions


# ---------------------------------------------------------------------------------------------------------------
# The loops.
# ---------------------------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, cfg: AbuseConfig, clock: Callable[[], float] = time.perf_counter):
        self.cfg, self.clock = cfg, clock
        self.url = f"http://127.0.0.1:{cfg.port}/v1/completions"
        self.phase = "warmup"
        self.tallies = {"warmup": Tally(), "clean": Tally(), "abuse": Tally()}
        self.stop = asyncio.Event()

    async def valid(self, session: aiohttp.ClientSession, rng: random.Random) -> None:
        phase, t0 = self.phase, self.clock()
        try:
            async with session.post(self.url, json=valid_body(self.cfg, rng)) as resp:
                async for _ in resp.content.iter_any():
                    pass
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            self.tallies[phase].statuses[f"valid {type(e).__name__}"] += 1
            return
        if phase == self.phase:  # a request that straddles a window boundary counts for neither
            self.tallies[phase].statuses[f"valid {status}"] += 1
            if status == 200:
                self.tallies[phase].latencies_s.append(self.clock() - t0)

    async def fuzz(self, session: aiohttp.ClientSession, rng: random.Random) -> None:
        phase, data = self.phase, fuzz_body(self.cfg, rng)  # counted in the window it was sent in
        try:
            headers = {"Content-Type": "application/json"}
            async with session.post(self.url, data=data, headers=headers) as resp:
                await resp.read()
                self.tallies[phase].statuses[f"fuzz {resp.status}"] += 1
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            self.tallies[phase].statuses[f"fuzz {type(e).__name__}"] += 1

    async def disconnect(self, session: aiohttp.ClientSession, rng: random.Random) -> None:
        """A stream dropped after its first chunk: the engine must abort the sequence and free its slot."""
        phase, body = self.phase, {**valid_body(self.cfg, rng), "max_tokens": 4 * self.cfg.max_tokens}
        try:
            async with session.post(self.url, json=body) as resp:
                await resp.content.readany()
                self.tallies[phase].statuses[f"disconnect {resp.status}"] += 1
                resp.close()  # drops the connection mid-stream
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            self.tallies[phase].statuses[f"disconnect {type(e).__name__}"] += 1

    async def loop(self, session: aiohttp.ClientSession, i: int) -> None:
        rng = random.Random(f"{self.cfg.seed}-{i}")
        while not self.stop.is_set():
            u = rng.random() if self.phase == "abuse" else 1.0
            if u < self.cfg.fuzz_share:
                await self.fuzz(session, rng)
            elif u < self.cfg.fuzz_share + self.cfg.disconnect_share:
                await self.disconnect(session, rng)
            else:
                await self.valid(session, rng)

    async def slow_headers(self, i: int, until: asyncio.Event) -> None:
        """Headers one byte a second, never finished; reconnects when the server closes the connection."""
        head = f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow-{i}: "
        while not until.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.cfg.port)
            except OSError:
                await asyncio.sleep(1)
                continue
            try:
                for j in range(10**6):
                    if until.is_set():
                        break
                    writer.write((head[j] if j < len(head) else "a").encode())
                    await writer.drain()
                    with contextlib.suppress(asyncio.TimeoutError):
                        if await asyncio.wait_for(reader.read(1024), timeout=1.0) == b"":
                            self.tallies[self.phase].slow_closed_by_server += 1
                            break
            except OSError:
                self.tallies[self.phase].slow_closed_by_server += 1
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def run(self) -> dict[str, Any]:
        cfg = self.cfg
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
            loops = [asyncio.create_task(self.loop(session, i)) for i in range(cfg.streams)]
            await asyncio.sleep(cfg.warmup_s)
            n_windows = max(1, round(cfg.abuse_s / cfg.window_s))
            for _ in range(n_windows):
                for phase in ("clean", "abuse"):
                    await self.window(phase)
            self.stop.set()
            await asyncio.gather(*loops)
        return self.summary()

    async def window(self, phase: str) -> None:
        self.phase = phase
        t0 = self.clock()
        until = asyncio.Event()
        n_slow = self.cfg.slow_headers if phase == "abuse" else 0
        slow = [asyncio.create_task(self.slow_headers(i, until)) for i in range(n_slow)]
        await asyncio.sleep(self.cfg.window_s)
        until.set()
        await asyncio.gather(*slow, return_exceptions=True)
        self.tallies[phase].seconds += self.clock() - t0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for phase in ("clean", "abuse"):
            t = self.tallies[phase]
            lat = np.array(t.latencies_s)
            out[phase] = {
                "seconds": round(t.seconds, 1),
                "valid_completed": len(lat),
                "valid_per_s": round(len(lat) / t.seconds, 2) if t.seconds else None,
                "valid_e2e_p50_s": round(float(np.percentile(lat, 50)), 4) if len(lat) else None,
                "valid_e2e_p99_s": round(float(np.percentile(lat, 99)), 4) if len(lat) else None,
                "statuses": dict(sorted(t.statuses.items())),
                "server_errors_5xx": sum(n for k, n in t.statuses.items() if k.split()[-1].startswith("5")),
                "slow_header_connections_closed_by_server": t.slow_closed_by_server,
            }
        out["p99_ratio_abuse_over_clean"] = p99_ratio(
            self.tallies["abuse"].latencies_s, self.tallies["clean"].latencies_s, self.cfg.seed
        )
        return out


def p99_ratio(abuse: list[float], clean: list[float], seed: int, n: int = 2000) -> dict[str, float] | None:
    """The abuse/clean ratio of the valid requests' p99, with a 95 % percentile-bootstrap interval."""
    if len(abuse) < 100 or len(clean) < 100:
        return None
    a, c = np.array(abuse), np.array(clean)
    rng = np.random.default_rng(seed)
    reps = [np.percentile(rng.choice(a, len(a)), 99) / np.percentile(rng.choice(c, len(c)), 99) for _ in range(n)]
    est = float(np.percentile(a, 99) / np.percentile(c, 99))
    return {"estimate": round(est, 3), "low": round(float(np.percentile(reps, 2.5)), 3),
            "high": round(float(np.percentile(reps, 97.5)), 3)}  # fmt: skip


def gauges(port: int, timeout_s: float = 2.0) -> dict[str, float]:
    """The engine's running/waiting gauges and KV usage from /metrics (Prometheus text, `speculab:` prefix)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as r:
        text = r.read().decode()
    want = ("speculab:num_requests_running", "speculab:num_requests_waiting", "speculab:kv_cache_usage_perc")
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in want:
            out[name.removeprefix("speculab:")] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def run_abuse_soak(cfg: AbuseConfig) -> dict[str, Any]:
    return asyncio.run(Soak(cfg).run())
