"""A scripted fake OpenAI server for client tests: each request plays a list of steps exactly.

Steps: `Sleep(s)`, `Write(bytes)`, `Abort()` (drop the TCP connection mid-response). A script may also answer
with a plain status and body (`Reply`). The script is chosen per request by a function of the JSON body, so
a test can make request 3 fail and the others succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Sleep:
    s: float


@dataclass(frozen=True)
class Write:
    data: bytes


@dataclass(frozen=True)
class Abort:
    pass


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"


Step = Sleep | Write | Abort
Script = Reply | Sequence[Step]


def sse(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def completion_chunk(text: str, *, cum_tokens: int | None = None, finish: str | None = None) -> bytes:
    c: dict[str, Any] = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if cum_tokens is not None:
        c["usage"] = {"prompt_tokens": 3, "completion_tokens": cum_tokens, "total_tokens": 3 + cum_tokens}
    return sse(c)


def usage_chunk(completion_tokens: int, prompt_tokens: int = 3) -> bytes:
    return sse({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}})


DONE = b"data: [DONE]\n\n"


def simple_stream(
    n_chunks: int, tokens_per_chunk: int, ttft_s: float, gap_s: float, *, continuous: bool = True
) -> list:
    steps: list[Step] = [Sleep(ttft_s)]
    for i in range(n_chunks):
        if i:
            steps.append(Sleep(gap_s))
        text = "ab" * tokens_per_chunk
        fin = "length" if i == n_chunks - 1 else None
        steps.append(
            Write(completion_chunk(text, cum_tokens=(i + 1) * tokens_per_chunk if continuous else None, finish=fin))
        )
    steps += [Write(usage_chunk(n_chunks * tokens_per_chunk)), Write(DONE)]
    return steps


@dataclass
class FakeServer:
    script: Callable[[dict[str, Any]], Script]
    bodies: list[dict[str, Any]] = field(default_factory=list)
    models: tuple[str, ...] = ("fake-model",)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self._handle)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        script = self.script(body)
        if isinstance(script, Reply):
            return web.Response(status=script.status, body=script.body, content_type=script.content_type)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for step in script:
            if isinstance(step, Sleep):
                await asyncio.sleep(step.s)
            elif isinstance(step, Write):
                await resp.write(step.data)
            elif isinstance(step, Abort):
                assert request.transport is not None
                request.transport.abort()
                return resp
        await resp.write_eof()
        return resp


@contextlib.asynccontextmanager
async def serve(fake: FakeServer) -> AsyncIterator[str]:
    """Run the fake on 127.0.0.1 at a free port; yields its base URL."""
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
