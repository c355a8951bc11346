"""The OpenAI-compatible HTTP server: FastAPI routes over an `AsyncEngine`.

Every error leaves as OpenAI JSON (`{"error": {"message", "type", "param", "code"}}`) with its status:
400 for bad requests (FastAPI's own validation errors included), 401 without the API key, 404 for an
unknown model or route, 429 with Retry-After when the waiting queue is full, 500/503 only for our own
failures. A request is only handed to the engine once it is valid, so a refused request never holds a
slot; a client that disconnects (streaming or not) aborts its request and frees its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from speculab import __version__
from speculab.engine.async_engine import AsyncEngine, EngineDeadError
from speculab.engine.engine import InvalidRequest
from speculab.engine.scheduler import QueueFull
from speculab.engine.sequence import SamplingParams, SequenceOutput
from speculab.engine.server.metrics import ServerMetrics
from speculab.engine.server.streaming import Rendering, stream_events
from speculab.errors import UserError
from speculab.protocol import openai as oa

log = logging.getLogger(__name__)

RETRY_AFTER_S = 1
DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


class ServerTokenizer(Protocol):
    eos_token_ids: frozenset[int]

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]: ...

    def apply_chat_template(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> str: ...

    def token_text(self, token_id: int) -> str: ...


@dataclass(frozen=True, slots=True)
class AppConfig:
    served_model_name: str
    api_key: str | None = None


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


def _error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(oa.error_body(message, type=type, param=param, code=code), status_code=status, headers=headers)


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """One line naming the field and the problem, from FastAPI/pydantic's error list."""
    errs = exc.errors()
    if not errs:
        return "invalid request", None
    e = errs[0]
    if e.get("type") == "json_invalid":
        return f"request body is not valid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}", None
    # Union members and validators show up as extra loc parts (prompt.str, prompt.list[int], function-after[...]);
    # keep field names and list indices only.
    loc = [str(p) for p in e.get("loc", ()) if p != "body" and _FIELD.fullmatch(str(p)) and str(p) not in _TYPE_TAGS]
    param = ".".join(loc) or None
    msg = str(e.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    if e.get("type") == "extra_forbidden":
        msg = "unknown field (not part of this API); remove it"
    elif e.get("type") == "missing":
        msg = "field required"
    extra = f" ({len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})" if len(errs) > 1 else ""
    return (f"{param}: {msg}{extra}" if param else f"{msg}{extra}"), param


def create_app(
    engine: AsyncEngine,
    tokenizer: ServerTokenizer,
    cfg: AppConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    collectors: Sequence[Collector] = (),
) -> FastAPI:
    """The FastAPI app; starting it starts the engine thread, stopping it stops the thread.

    `collectors` join /metrics (speculative decoding registers its acceptance counters this way).
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine.start()
        yield
        engine.stop()

    app = FastAPI(title="speculab engine", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    metrics = ServerMetrics(engine, cfg.served_model_name, clock)
    for c in collectors:
        metrics.registry.register(c)
    app.state.engine, app.state.metrics = engine, metrics
    max_model_len = engine.engine.cfg.max_model_len
    counter = iter(range(1, 1 << 62))

    @app.exception_handler(RequestValidationError)
    async def _on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        msg, param = _validation_message(exc)
        metrics.error(400)
        return _error(400, msg, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        metrics.error(exc.status_code)
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return _error(exc.status_code, str(exc.detail), type=kind)

    @app.exception_handler(Exception)
    async def _on_crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        metrics.error(500)
        return _error(500, f"internal server error: {type(exc).__name__}: {exc}", type="server_error")

    @app.middleware("http")
    async def _auth(request: Request, call_next: Callable[[Request], Any]) -> Response:
        guarded = cfg.api_key is not None and request.url.path.startswith("/v1/")
        sent = request.headers.get("authorization", "").encode()
        if guarded and not hmac.compare_digest(sent, f"Bearer {cfg.api_key}".encode()):
            metrics.error(401)
            return _error(401, "invalid or missing API key; send 'Authorization: Bearer <key>'", code="invalid_api_key")
        return await call_next(request)

    @app.get("/health")
    async def health() -> Response:
        if engine.error is not None:
            return _error(503, f"engine failed: {engine.error}", type="server_error")
        if engine.shutting_down:
            return _error(503, "the server is shutting down", type="server_error")
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> dict[str, str]:
        # "name" tells speculab's own endpoint detection this is not vLLM (whose /version is only {"version"}).
        return {"name": "speculab", "version": __version__}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return oa.models_list([cfg.served_model_name], oa.now_s(), max_model_len=max_model_len)

    @app.get("/v1/models/{name:path}")
    async def model_card(name: str) -> dict[str, Any]:
        check_model(name)
        return oa.models_list([cfg.served_model_name], oa.now_s(), max_model_len=max_model_len)["data"][0]

    def check_model(name: str) -> None:
        if name != cfg.served_model_name:
            raise oa.ApiError(
                404,
                f"model {name!r} does not exist; this server serves {cfg.served_model_name!r}",
                param="model",
                code="model_not_found",
            )

    def sampling(
        req: oa.CompletionRequest | oa.ChatCompletionRequest, max_tokens: int, logprobs: int | None
    ) -> SamplingParams:
        try:
            return SamplingParams(
                max_tokens=max_tokens,
                temperature=1.0 if req.temperature is None else req.temperature,
                top_p=1.0 if req.top_p is None else req.top_p,
                top_k=max(req.top_k or 0, 0),
                seed=req.seed,
                min_tokens=req.min_tokens,
                ignore_eos=req.ignore_eos,
                stop=tuple(req.stop_list),
                stop_token_ids=tuple(req.stop_token_ids or ()),
                logprobs=logprobs,
            )
        except ValueError as e:
            raise oa.ApiError(400, str(e)) from None

    async def run(
        request: Request,
        req: oa.CompletionRequest | oa.ChatCompletionRequest,
        prompt_ids: list[int],
        max_tokens: int | None,
        logprobs: int | None,
        *,
        chat: bool,
    ) -> Response:
        if max_tokens is None:  # chat default: whatever fits in the context
            max_tokens = max(max_model_len - len(prompt_ids), 1)
        params = sampling(req, max_tokens, logprobs)
        rid = oa.new_id("chatcmpl" if chat else "cmpl") + f"-{next(counter)}"
        opts = req.stream_options or oa.StreamOptions()
        rendering = Rendering(
            chat=chat,
            request_id=rid,
            model=cfg.served_model_name,
            created=oa.now_s(),
            token_text=tokenizer.token_text,
            want_logprobs=logprobs is not None,
            include_usage=opts.include_usage,
            continuous_usage=opts.continuous_usage_stats,
        )
        tracker = metrics.tracker()
        try:
            q = engine.submit(rid, prompt_ids, params)
        except InvalidRequest as e:
            raise oa.ApiError(400, str(e), param=e.param) from None
        except QueueFull:
            metrics.error(429)
            return _error(
                429,
                "the server is at capacity (waiting queue full); retry later",
                type="rate_limit_error",
                code="queue_full",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        except EngineDeadError as e:
            raise oa.ApiError(503, str(e), type="server_error") from None

        def on_output(out: SequenceOutput) -> None:
            tracker.on_tokens(len(out.new_token_ids))
            if out.finished and out.finish_reason is not None:
                tracker.on_phases(out.phases)
                tracker.on_finish(out.finish_reason.value)

        async def outputs() -> AsyncIterator[SequenceOutput]:
            while True:
                out = await q.get()
                if isinstance(out, Exception):
                    raise out
                yield out
                if out.finished:
                    return

        def close() -> None:
            engine.abort(rid)  # no-op when already finished; frees the slot when the client left
            tracker.on_finish("abort")  # no-op when already finished

        if req.stream:
            return AbortOnCloseStream(stream_events(rendering, outputs(), on_output), on_close=close)

        async def collect() -> None:
            async for out in outputs():
                on_output(out)
                rendering.chunk(out)

        async def client_gone() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        gen, watch = asyncio.create_task(collect()), asyncio.create_task(client_gone())
        try:
            await asyncio.wait({gen, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (gen, watch):
                t.cancel()
            close()
        if not gen.done() or gen.cancelled():
            return Response(status_code=499)  # the client left; nobody reads this
        if gen.exception() is not None:
            raise oa.ApiError(500, f"generation failed: {gen.exception()}", type="server_error")
        return JSONResponse(rendering.response())

    @app.exception_handler(oa.ApiError)
    async def _on_api_error(_: Request, exc: oa.ApiError) -> JSONResponse:
        metrics.error(exc.status)
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.post("/v1/completions")
    async def completions(request: Request, req: oa.CompletionRequest) -> Response:
        check_model(req.model)
        p = req.prompt
        # Tokenizing a long prompt is CPU work: keep it off the event loop.
        prompt_ids = await asyncio.to_thread(tokenizer.encode, p) if isinstance(p, str) else list(p)  # type: ignore[arg-type]
        return await run(
            request, req, prompt_ids, req.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS, req.logprobs, chat=False
        )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request, req: oa.ChatCompletionRequest) -> Response:
        check_model(req.model)

        def render() -> list[int]:
            text = tokenizer.apply_chat_template(req.message_dicts(), add_generation_prompt=req.add_generation_prompt)
            return tokenizer.encode(text, add_special_tokens=False)

        try:
            prompt_ids = await asyncio.to_thread(render)
        except UserError as e:
            raise oa.ApiError(400, str(e), param="messages") from None
        logprobs = (req.top_logprobs or 0) if req.logprobs else None
        return await run(request, req, prompt_ids, req.output_limit, logprobs, chat=True)

    return app
