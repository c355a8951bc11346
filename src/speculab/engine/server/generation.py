"""One generation request over HTTP: admit it to the engine, then stream its events or collect the whole response.

Whatever happens, the request leaves the engine: a client that disconnects (streaming or not) aborts it and
frees its slot at the next step. A request the engine fails (a bug inside a step) answers 500 with OpenAI JSON
when unary, or an error event then `data: [DONE]` when streaming (the 200 status is already sent).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from speculab.engine.async_engine import AsyncEngine, EngineDeadError
from speculab.engine.engine import InvalidRequest
from speculab.engine.scheduler import QueueFull
from speculab.engine.sequence import SamplingParams, SequenceOutput
from speculab.engine.server.errors import error_response
from speculab.engine.server.metrics import RequestTracker, ServerMetrics
from speculab.engine.server.streaming import Rendering, stream_events
from speculab.protocol import openai as oa

RETRY_AFTER_S = 1


class AbortOnCloseStream(StreamingResponse):
    """A streaming response that watches for the client going away and always runs `on_close` at the end."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None], **kw: Any):
        super().__init__(content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}, **kw)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tg:

                async def stream() -> None:
                    with contextlib.suppress(OSError):  # the socket broke mid-write
                        await self.stream_response(send)
                    tg.cancel_scope.cancel()

                async def watch() -> None:
                    await self.listen_for_disconnect(receive)
                    tg.cancel_scope.cancel()

                tg.start_soon(stream)
                tg.start_soon(watch)
        finally:
            self.on_close()


@dataclass
class Generation:
    """A request admitted to the engine: its output queue, its rendering and its metrics."""

    engine: AsyncEngine
    request_id: str
    queue: asyncio.Queue[SequenceOutput | Exception]
    rendering: Rendering
    tracker: RequestTracker
    metrics: ServerMetrics

    def on_output(self, out: SequenceOutput) -> None:
        self.tracker.on_tokens(len(out.new_token_ids))
        if out.finished and out.finish_reason is not None:
            self.tracker.on_phases(out.phases)
            self.tracker.on_finish(out.finish_reason.value)

    async def outputs(self) -> AsyncIterator[SequenceOutput]:
        while True:
            out = await self.queue.get()
            if isinstance(out, Exception):
                self.tracker.on_error()
                raise out
            yield out
            if out.finished:
                return

    def close(self) -> None:
        self.engine.abort(self.request_id)  # no-op when already finished; frees the slot when the client left
        self.tracker.on_finish("abort")  # no-op when already finished

    def on_stream_error(self, _: Exception) -> None:
        self.metrics.error(500)


def admit(
    engine: AsyncEngine,
    metrics: ServerMetrics,
    rendering: Rendering,
    prompt_ids: list[int],
    params: SamplingParams,
) -> Generation | Response:
    """Hand the request to the engine, or the error response that refuses it (400, 429, 503)."""
    tracker = metrics.tracker()
    try:
        q = engine.submit(rendering.request_id, prompt_ids, params)
    except InvalidRequest as e:
        raise oa.ApiError(400, str(e), param=e.param) from None
    except QueueFull:
        metrics.error(429)
        return error_response(
            429,
            "the server is at capacity (waiting queue full); retry later",
            code="queue_full",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    except EngineDeadError as e:
        raise oa.ApiError(503, str(e), type="server_error") from None
    return Generation(engine, rendering.request_id, q, rendering, tracker, metrics)


def stream(gen: Generation) -> Response:
    events = stream_events(gen.rendering, gen.outputs(), gen.on_output, on_error=gen.on_stream_error)
    return AbortOnCloseStream(events, on_close=gen.close)


async def collect(request: Request, gen: Generation) -> Response:
    """The whole response once generation finishes; abort early if the client goes away."""

    async def run() -> None:
        async for out in gen.outputs():
            gen.on_output(out)
            gen.rendering.chunk(out)

    async def client_gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    work, watch = asyncio.create_task(run()), asyncio.create_task(client_gone())
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (work, watch):
            t.cancel()
        gen.close()
    if not work.done() or work.cancelled():
        return Response(status_code=499)  # the client left; nobody reads this
    if work.exception() is not None:
        raise oa.ApiError(500, f"generation failed: {work.exception()}", type="server_error")
    return JSONResponse(gen.rendering.response())
