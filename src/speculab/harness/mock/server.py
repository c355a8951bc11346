"""A scripted OpenAI-compatible server: known TTFT, chunk gaps, tokens per chunk, counters and faults.

Users point the harness at it to check their setup and the client's noise floor; the test suite uses it as its
fake endpoint. It runs on aiohttp.web only, so the harness never needs the `[engine]` extra. The script it follows
(what a token is, the timing of each request, how speculation is counted) is described in
`speculab.harness.mock.script`; docs/mock-server.md has the user's view.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from speculab import __version__
from speculab.harness.mock.script import (
    VOCAB,
    Fault,
    MockConfig,
    chunk_sizes,
    count_tokens,
    generate_tokens,
    plan_output,
    render_chat,
    token_logprobs,
)
from speculab.harness.mock.state import MockState
from speculab.protocol.openai import error_body

# --------------------------------------------------------------------------------------------------------------
# Request bodies (pydantic at the edge). Unknown fields are accepted and ignored, as servers do.


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False
    continuous_usage_stats: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    min_tokens: int = Field(0, ge=0)
    ignore_eos: bool = False
    stream: bool = False
    stream_options: _StreamOptions | None = None
    seed: int | None = None
    n: int = Field(1, ge=1, le=1)


class _CompletionBody(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=20)


class _ChatBody(_Common):
    messages: list[dict[str, Any]] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)


# --------------------------------------------------------------------------------------------------------------
# Errors: OpenAI-style JSON bodies with the right status


def error_response(
    status: int, message: str, type_: str, code: str | None = None, param: str | None = None, **headers: str
) -> web.Response:
    body = error_body(message, type=type_, param=param, code=code)
    return web.json_response(body, status=status, headers=headers or None)


class _RequestError(Exception):
    """A bad request, turned into an OpenAI-style error response by the handler."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None):
        super().__init__(message)
        self.response = error_response(status, message, "invalid_request_error", code, param)


def _one_line(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"]) or "body"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


STATE_KEY = web.AppKey("speculab_mock_state", MockState)


# --------------------------------------------------------------------------------------------------------------
# One generation: the parsed request and its schedule


@dataclass(slots=True)
class _Job:
    chat: bool
    rid: str
    model: str
    prompt_text: str
    prompt_words: list[str]
    prompt_tokens: int
    n_tokens: int
    finish_reason: str
    seed: int | None
    logprobs_top: int | None  # None: no logprobs; else alternatives per token (0 = chosen token only)
    include_usage: bool
    continuous_usage: bool
    created: int = field(default_factory=lambda: int(time.time()))
    cached_tokens: int = 0

    def usage(self, completion_tokens: int) -> dict[str, Any]:
        u: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }
        if self.cached_tokens:
            u["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return u


def _parse_job(cfg: MockConfig, body: Any, chat: bool, rid: int) -> _Job:
    if not isinstance(body, dict):
        raise _RequestError(400, "the request body must be a JSON object", "invalid_body")
    try:
        req: _ChatBody | _CompletionBody = (
            _ChatBody.model_validate(body) if chat else _CompletionBody.model_validate(body)
        )
    except ValidationError as e:
        raise _RequestError(400, f"invalid request: {_one_line(e)}", "invalid_request") from None
    model = req.model or cfg.models[0]
    if model not in cfg.models:
        served = ", ".join(cfg.models)
        raise _RequestError(
            404, f"The model `{model}` does not exist. Served models: {served}", "model_not_found", "model"
        )
    if isinstance(req, _ChatBody):
        prompt_text = render_chat(req.messages)
        words = prompt_text.split()
        max_tokens = req.max_completion_tokens or req.max_tokens
        top = (req.top_logprobs or 0) if req.logprobs else None
    else:
        prompt = req.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):  # batch of token-id prompts
            if len(prompt) != 1:
                raise _RequestError(400, "the mock serves one prompt per request", "batch_not_supported", "prompt")
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            if len(prompt) != 1:
                raise _RequestError(400, "the mock serves one prompt per request", "batch_not_supported", "prompt")
            prompt = prompt[0]
        if isinstance(prompt, list):  # token ids: one token each
            words = [str(t) for t in prompt]
            prompt_text = " ".join(words)
        else:
            prompt_text, words = prompt, prompt.split()
        max_tokens, top = req.max_tokens, req.logprobs
    n_prompt = len(words)
    if n_prompt == 0:
        raise _RequestError(400, "the prompt is empty", "empty_prompt", "messages" if chat else "prompt")
    if n_prompt + (max_tokens or 1) > cfg.max_model_len:
        raise _RequestError(
            400,
            f"This model's maximum context length is {cfg.max_model_len} tokens. However, you requested "
            f"{n_prompt + (max_tokens or 0)} tokens ({n_prompt} in the prompt, {max_tokens or 0} in the completion).",
            "context_length_exceeded",
            "max_tokens" if max_tokens else "prompt",
        )
    n_tokens, reason = plan_output(cfg, n_prompt, max_tokens, req.min_tokens, req.ignore_eos)
    opts = req.stream_options
    include_usage = bool(opts and opts.include_usage)
    return _Job(
        chat=chat,
        rid=f"{'chatcmpl' if chat else 'cmpl'}-mock-{rid}",
        model=model,
        prompt_text=prompt_text,
        prompt_words=words,
        prompt_tokens=n_prompt,
        n_tokens=n_tokens,
        finish_reason=reason,
        seed=req.seed,
        logprobs_top=top,
        include_usage=include_usage,
        # vLLM sends per-chunk usage only when include_usage is on too; the mock behaves the same.
        continuous_usage=include_usage and bool(opts and opts.continuous_usage_stats),
    )


# --------------------------------------------------------------------------------------------------------------
# Wire format of chunks and bodies


def _logprobs_block(job: _Job, lps: list[dict[str, Any]], text_offset: int) -> dict[str, Any]:
    if job.chat:
        return {
            "content": [
                {
                    "token": e["token"],
                    "logprob": e["logprob"],
                    "bytes": list(e["token"].encode()),
                    "top_logprobs": [
                        {"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in e["top"].items()
                    ],
                }
                for e in lps
            ]
        }
    offsets, off = [], text_offset
    for e in lps:
        offsets.append(off)
        off += len(e["token"])
    return {
        "tokens": [e["token"] for e in lps],
        "token_logprobs": [e["logprob"] for e in lps],
        "top_logprobs": [e["top"] for e in lps] if job.logprobs_top else None,
        "text_offset": offsets,
    }


def _choice(job: _Job, text: str | None, finish: str | None, logprobs: dict[str, Any] | None) -> dict[str, Any]:
    if job.chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if text is None else {"content": text}
        return {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    return {"index": 0, "text": text or "", "logprobs": logprobs, "finish_reason": finish}


def _chunk(job: _Job, choices: list[dict[str, Any]], usage: dict[str, Any] | None) -> bytes:
    obj: dict[str, Any] = {
        "id": job.rid,
        "object": "chat.completion.chunk" if job.chat else "text_completion",
        "created": job.created,
        "model": job.model,
        "choices": choices,
    }
    if job.include_usage:
        obj["usage"] = usage  # OpenAI: null on every chunk but the usage chunk, unless continuous
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _full_body(job: _Job, text: str, lps: list[dict[str, Any]] | None) -> dict[str, Any]:
    logprobs = _logprobs_block(job, lps, 0) if lps is not None else None
    if job.chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": logprobs,
            "finish_reason": job.finish_reason,
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": job.finish_reason}
    return {
        "id": job.rid,
        "object": "chat.completion" if job.chat else "text_completion",
        "created": job.created,
        "model": job.model,
        "choices": [choice],
        "usage": job.usage(job.n_tokens),
    }


def _error_event(message: str) -> bytes:
    err = {"error": {"message": message, "type": "server_error", "param": None, "code": "mock_fault"}}
    return b"data: " + json.dumps(err).encode() + b"\n\n"


# --------------------------------------------------------------------------------------------------------------
# Handlers


async def _sleep_until(deadline: float, spin_s: float = 0.0) -> None:
    """Sleep until `deadline` (loop clock). asyncio's sleeps overshoot by 1-2 ms; with `spin_s` > 0 the sleep ends
    `spin_s` early and the rest is spent yielding to the loop (other streams' writes still run meanwhile)."""
    loop = asyncio.get_running_loop()
    delay = deadline - loop.time()
    if delay > spin_s:
        await asyncio.sleep(delay - spin_s)
    while loop.time() < deadline:
        await asyncio.sleep(0)


def _client_gone(request: web.Request) -> bool:
    t = request.transport
    return t is None or t.is_closing()


async def _stall(state: MockState, request: web.Request, seconds: float) -> None:
    """Pause, but give up early when the client hangs up or the server shuts down (keeps shutdown quick)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not state.shutdown.is_set() and not _client_gone(request):
        left = end - loop.time()
        if left <= 0:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(state.shutdown.wait(), timeout=min(left, 0.1))


async def _completions(request: web.Request, chat: bool) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    cfg = state.cfg
    loop = asyncio.get_running_loop()
    t_arrival = loop.time()
    # Let requests that arrived in the same burst stamp their arrival before this one does its set-up work:
    # otherwise the 64th of 64 simultaneous requests would start its TTFT clock 63 set-ups late.
    await asyncio.sleep(0)
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return error_response(400, f"the request body is not valid JSON: {e}", "invalid_request_error", "invalid_json")
    try:
        job = _parse_job(cfg, body, chat, state.next_id())
    except _RequestError as e:
        return e.response
    fault, fault_pos = state.draw_fault()
    if fault is Fault.HTTP_5XX:
        return error_response(500, "mock fault: internal server error", "server_error", "mock_fault")
    if fault is Fault.HTTP_429:
        retry = str(max(1, int(-(-cfg.retry_after_s // 1))))
        return error_response(
            429,
            "mock fault: rate limit reached, retry later",
            "rate_limit_error",
            "rate_limit_exceeded",
            **{"Retry-After": retry},
        )

    resp: web.StreamResponse | None = None
    stream = bool(body.get("stream"))
    if stream:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if job.chat:  # OpenAI sends the role delta at once, before any text: it must not count as the first token
            await resp.write(
                _chunk(job, [_choice(job, None, None, None)], job.usage(0) if job.continuous_usage else None)
            )
    try:
        async with state.admission(t_arrival) as t_admit:
            m = state.metrics
            m.queue.observe(t_admit - t_arrival)
            wait = state.cold_start_wait(t_admit)
            job.cached_tokens = state.cached_tokens(job.prompt_words)
            m.prompt_tokens.inc(job.prompt_tokens)
            first = state.prefill_done(t_admit + wait, job.prompt_tokens - job.cached_tokens) + cfg.ttft_s
            if cfg.ttft_jitter_s > 0:
                first += state.jitter_rng.uniform(0.0, cfg.ttft_jitter_s)
            return await _generate(state, request, job, resp, first, t_arrival, fault, fault_pos)
    except ConnectionResetError:  # the client hung up (its timeout, or a cancelled run): nothing to send
        return resp if resp is not None else web.Response(status=499)


async def _generate(
    state: MockState,
    request: web.Request,
    job: _Job,
    resp: web.StreamResponse | None,
    deadline: float,
    t_arrival: float,
    fault: Fault | None,
    fault_pos: float,
) -> web.StreamResponse:
    """Produce the chunks on schedule; write them when streaming, else answer once at the end."""
    cfg, m = state.cfg, state.metrics
    loop = asyncio.get_running_loop()
    tokens = generate_tokens(job.prompt_text, job.seed, job.n_tokens)
    lps = token_logprobs(job.prompt_text, job.seed, tokens, job.logprobs_top) if job.logprobs_top is not None else None
    steps = chunk_sizes(cfg.chunk_pattern, job.n_tokens)
    pattern = cfg.chunk_pattern
    # Mid-stream faults fire before chunk `fault_at`: after at least one chunk when there are two or more.
    fault_at = 1 + int(fault_pos * (len(steps) - 1)) if len(steps) > 1 else 0
    done, text_off = 0, 0
    sends: list[float] | None = None
    if cfg.record_send_times and resp is not None:
        sends = []
        state.send_log.append(
            {"prompt": job.prompt_text, "arrival_s": t_arrival, "first_deadline_s": deadline, "chunks_s": sends}
        )
    for i, n in enumerate(steps):
        if state.shutdown.is_set():  # server stopping: end the stream abruptly, as a dying server would
            _drop(request)
            return resp if resp is not None else web.Response(status=503)
        if i == fault_at and fault is Fault.STALL:
            await _stall(state, request, cfg.fault_stall_s)
            deadline = max(deadline, loop.time())
        last = i == len(steps) - 1
        payload = b""
        if resp is not None:  # encoded before the deadline, so that at the deadline only the write is left
            text = "".join(tokens[done : done + n])
            lp_block = _logprobs_block(job, lps[done : done + n], text_off) if lps is not None else None
            usage = job.usage(done + n) if job.continuous_usage else None
            payload = _chunk(job, [_choice(job, text, job.finish_reason if last else None, lp_block)], usage)
            text_off += len(text)
        await _sleep_until(deadline, cfg.spin_s)
        if i == 0:
            m.ttft.observe(loop.time() - t_arrival)
        if i == fault_at and fault in (Fault.DROP, Fault.MALFORMED, Fault.ERROR_EVENT) and resp is None:
            return _unary_fault(request, fault)
        if resp is not None and i == fault_at:
            if fault is Fault.DROP:
                _drop(request)
                return resp
            if fault is Fault.ERROR_EVENT:
                await resp.write(_error_event("mock fault: generation failed mid-stream"))
                await resp.write(b"data: [DONE]\n\n")
                return resp
            if fault is Fault.MALFORMED:
                await resp.write(b'data: {"id": "' + job.rid.encode() + b'", "choices": [{"text": \n\n')
        if resp is not None:
            await resp.write(payload)
            if sends is not None:
                sends.append(loop.time())
        m.chunks.chunk(n, pattern[i % len(pattern)])
        done += n
        running = max(state.running, 1)
        deadline += cfg.gap_s * (1 + cfg.decode_slowdown_per_request * (running - 1))
    m.e2e.observe(loop.time() - t_arrival)
    m.success(job.finish_reason)
    if resp is None:
        return web.json_response(_full_body(job, "".join(tokens), lps))
    if job.include_usage:
        await resp.write(_chunk(job, [], job.usage(done)))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _drop(request: web.Request) -> None:
    """Close the connection without the chunked-encoding terminator: the client sees a truncated payload."""
    if request.transport is not None:
        request.transport.close()


def _unary_fault(request: web.Request, fault: Fault) -> web.StreamResponse:
    if fault is Fault.DROP:
        _drop(request)
        return web.Response(status=499)
    if fault is Fault.MALFORMED:
        return web.Response(status=200, text='{"id": "truncated", "choices": [', content_type="application/json")
    return error_response(500, "mock fault: generation failed", "server_error", "mock_fault")


async def _chat_handler(request: web.Request) -> web.StreamResponse:
    return await _completions(request, chat=True)


async def _completions_handler(request: web.Request) -> web.StreamResponse:
    return await _completions(request, chat=False)


async def _models(request: web.Request) -> web.Response:
    cfg = request.app[STATE_KEY].cfg
    data = [
        {
            "id": m,
            "object": "model",
            "created": 0,
            "owned_by": "speculab-mock",
            "root": m,
            "max_model_len": cfg.max_model_len,
        }
        for m in cfg.models
    ]
    return web.json_response({"object": "list", "data": data})


async def _version(request: web.Request) -> web.Response:
    return web.json_response({"version": __version__, "server": "speculab-mock"})


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _send_times(request: web.Request) -> web.Response:
    """Chunk write times of every streamed request so far (with record_send_times), on CLOCK_MONOTONIC: the
    same clock as time.monotonic() and time.perf_counter() in any process on this machine (Linux)."""
    state = request.app[STATE_KEY]
    if not state.cfg.record_send_times:
        return error_response(
            404,
            "send times are not recorded: start the mock with --record-send-times",
            "invalid_request_error",
            "not_recorded",
        )
    return web.json_response({"clock": "CLOCK_MONOTONIC", "requests": state.send_log})


async def _metrics(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    return web.Response(body=generate_latest(state.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


@web.middleware
async def _json_errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Routing errors (404, 405) as OpenAI-style JSON too."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status, "http_error")
        return error_response(e.status, f"{e.reason}: {request.method} {request.path}", "invalid_request_error", code)


def create_app(cfg: MockConfig) -> web.Application:
    """The mock server as an aiohttp application (its own Prometheus registry; several may share a process)."""
    app = web.Application(middlewares=[_json_errors], client_max_size=64 * 1024 * 1024)
    state = MockState(cfg)
    app[STATE_KEY] = state

    async def _on_shutdown(_: web.Application) -> None:
        state.shutdown.set()

    app.on_shutdown.append(_on_shutdown)
    app.router.add_post("/v1/completions", _completions_handler)
    app.router.add_post("/v1/chat/completions", _chat_handler)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/version", _version)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/mock/send_times", _send_times)
    return app


# --------------------------------------------------------------------------------------------------------------
# Running it


@contextlib.asynccontextmanager
async def running_mock_server(cfg: MockConfig, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve `cfg` on the current loop; yields the base URL ("http://127.0.0.1:PORT", no /v1)."""
    # handler_cancellation: a client that hangs up cancels its handler, freeing its slot at once.
    runner = web.AppRunner(create_app(cfg), handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=1024)  # load tests open hundreds of connections at once
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
        yield f"http://{url_host}:{bound_port}"
    finally:
        await runner.cleanup()


async def serve_mock(
    cfg: MockConfig, host: str, port: int, on_ready: Callable[[str], None], stop: asyncio.Event | None = None
) -> None:
    """Serve until `stop` is set or the task is cancelled (Ctrl-C); SIGTERM stops it cleanly too.
    Waits `cfg.startup_s` before listening, as a server loading its model would."""
    import signal

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    if cfg.startup_s > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=cfg.startup_s)
        if stop.is_set():
            return
    async with running_mock_server(cfg, host, port) as url:
        # This process is ours: move everything alive at start-up out of the collector's generations, so that a
        # full collection mid-run scans only the requests' objects instead of pausing the schedule for ~10 ms.
        gc.collect()
        gc.freeze()
        on_ready(url)
        await stop.wait()


@contextlib.contextmanager
def mock_server_in_thread(cfg: MockConfig, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `cfg` from a background thread with its own event loop; yields the base URL. For sync callers."""
    ready: Future[tuple[str, asyncio.AbstractEventLoop, asyncio.Event]] = Future()

    async def main() -> None:
        stop = asyncio.Event()
        async with running_mock_server(cfg, host, port) as url:
            ready.set_result((url, asyncio.get_running_loop(), stop))
            await stop.wait()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as e:  # surface start-up failures (port in use) to the caller
            if not ready.done():
                ready.set_exception(e)

    thread = threading.Thread(target=run, name="speculab-mock-server", daemon=True)
    thread.start()
    url, loop, stop = ready.result(timeout=30)
    try:
        yield url
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)


__all__ = [
    "VOCAB",
    "Fault",
    "MockConfig",
    "chunk_sizes",
    "count_tokens",
    "create_app",
    "generate_tokens",
    "mock_server_in_thread",
    "plan_output",
    "render_chat",
    "running_mock_server",
    "serve_mock",
]
