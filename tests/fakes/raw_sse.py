"""A raw SSE client for testing servers (the mock, the engine): no harness code, timestamps taken as bytes arrive."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class Streamed:
    """What one request returned: status, send time, and every SSE event with its arrival time (perf_counter)."""

    status: int
    t_send: float
    events: list[tuple[float, Any]] = field(default_factory=list)  # (t, parsed JSON | "[DONE]" | raw str)
    body: Any = None  # non-streaming or error responses: the parsed JSON body (or text)
    headers: dict[str, str] = field(default_factory=dict)

    def text_chunks(self) -> list[tuple[float, dict[str, Any]]]:
        """Events whose choice carries generated text (completions `text`, chat `delta.content`)."""
        out = []
        for t, ev in self.events:
            if isinstance(ev, dict) and ev.get("choices"):
                c = ev["choices"][0]
                text = c.get("text") if "text" in c else (c.get("delta") or {}).get("content")
                if text:
                    out.append((t, ev))
        return out

    def text(self) -> str:
        out = []
        for _, ev in self.text_chunks():
            c = ev["choices"][0]
            out.append(c["text"] if "text" in c else c["delta"]["content"])
        return "".join(out)

    @property
    def ttft_s(self) -> float:
        return self.text_chunks()[0][0] - self.t_send

    def gaps_s(self) -> list[float]:
        ts = [t for t, _ in self.text_chunks()]
        return [b - a for a, b in itertools.pairwise(ts)]


async def post(
    session: aiohttp.ClientSession,
    url: str,
    body: Any,
    timeout_s: float = 30.0,
    raw: bytes | None = None,
    trace_ctx: dict[str, Any] | None = None,
) -> Streamed:
    """POST and collect the response; SSE events are split and timestamped as their bytes arrive."""
    t_send = time.perf_counter()
    kwargs: dict[str, Any] = {"data": raw} if raw is not None else {"json": body}
    if trace_ctx is not None:
        kwargs["trace_request_ctx"] = trace_ctx
    async with session.post(url, timeout=aiohttp.ClientTimeout(total=timeout_s), **kwargs) as r:
        out = Streamed(status=r.status, t_send=t_send, headers=dict(r.headers))
        if not r.headers.get("Content-Type", "").startswith("text/event-stream"):
            text = await r.text()
            try:
                out.body = json.loads(text)
            except json.JSONDecodeError:
                out.body = text
            return out
        # Timestamp the bytes as they arrive; split and parse only after the stream ends, so that reading one
        # stream's chunk does not delay the timestamps of the others.
        arrivals: list[tuple[float, bytes]] = []
        async for data in r.content.iter_any():
            arrivals.append((time.perf_counter(), data))
        _parse_sse(arrivals, out.events)
        return out


def _parse_sse(arrivals: list[tuple[float, bytes]], events: list[tuple[float, Any]]) -> None:
    """Split timestamped bytes into SSE events; an event's time is the arrival of the bytes that completed it."""
    buf = b""
    for t, data in arrivals:
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data: "):
                    continue
                payload = line[6:].decode()
                if payload == "[DONE]":
                    events.append((t, "[DONE]"))
                    continue
                try:
                    events.append((t, json.loads(payload)))
                except json.JSONDecodeError:
                    events.append((t, payload))
