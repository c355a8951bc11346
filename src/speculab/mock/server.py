"""A scripted OpenAI-compatible server: known TTFT, chunk gaps, tokens per chunk, counters and faults.

Users point the harness at it to check their setup and the client's noise floor; the test suite uses it as its
fake endpoint. It runs on aiohttp.web only, so the harness never needs the `[engine]` extra. The script it follows
(what a token is, the timing of each request, how speculation is counted) is described in
`speculab.mock.script`; docs/mock-server.md has the user's view.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from speculab import __version__
from speculab.mock.connection import ConnectionGuard, GuardedRunner, received_ns
from speculab.mock.requests import Job, RequestError, error_response, parse_job
from speculab.mock.script import (
    VOCAB,
    Fault,
    MockConfig,
    chunk_sizes,
    count_tokens,
    generate_tokens,
    plan_output,
    render_chat,
    scripted_tokens,
    streamed_tokens,
    token_logprobs,
)
from speculab.mock.state import MockState
from speculab.mock.timing import BatchedChunks, PacedChunks, sleep_until_on_loop
from speculab.mock.truth_log import TruthEntry
from speculab.mock.wire import choice, chunk_event, error_event, full_body, logprobs_block, spec_decode_metrics
from speculab.serving.exhaustion import AcceptLoop, ConnectionCounters, bound_logs, raise_open_files_limit
from speculab.serving.receive_stamps import ReceiveStamps, receive_stamps_of

STATE_KEY = web.AppKey("speculab_mock_state", MockState)
# per request (aiohttp's request mapping): when its handler began, for the truth log
HANDLER_NS_KEY = web.RequestKey("speculab_mock_handler_ns", int)


# --------------------------------------------------------------------------------------------------------------
# Handlers


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
    if state.truth is not None:
        request[HANDLER_NS_KEY] = time.time_ns()
    # Let requests that arrived in the same burst stamp their arrival before this one does its set-up work:
    # otherwise the 64th of 64 simultaneous requests would start its TTFT clock 63 set-ups late.
    await asyncio.sleep(0)
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return error_response(400, f"the request body is not valid JSON: {e}", "invalid_request_error", "invalid_json")
    try:
        job = parse_job(cfg, body, chat, state.next_id())
    except RequestError as e:
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
    try:
        if stream:  # a client gone before its headers are written is one that hung up too (below), not an error
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(request)
            if job.chat:  # OpenAI sends the role delta at once, before any text: it must not count as the first token
                await resp.write(
                    chunk_event(job, [choice(job, None, None, None)], job.usage(0) if job.continuous_usage else None)
                )
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
    job: Job,
    resp: web.StreamResponse | None,
    deadline: float,
    t_arrival: float,
    fault: Fault | None,
    fault_pos: float,
) -> web.StreamResponse:
    """Produce the chunks on schedule (`deadline`: the request is ready, prefill done); write them when streaming,
    else answer once at the end."""
    cfg = state.cfg
    tokens = scripted_tokens(cfg, job.prompt_text, job.seed, job.n_tokens)
    lps = token_logprobs(job.prompt_text, job.seed, tokens, job.logprobs_top) if job.logprobs_top is not None else None
    # what to note as each chunk's write begins, and once it returned
    stamps: tuple[list[Callable[[], None]], list[Callable[[], None]]] = ([], [])
    if cfg.record_send_times and resp is not None:
        sends: list[float] = []
        state.send_log.append(
            {"prompt": job.prompt_text, "arrival_s": t_arrival, "first_deadline_s": deadline, "chunks_s": sends}
        )
        clock = asyncio.get_running_loop().time
        stamps[1].append(lambda: sends.append(clock()))
    truth = None
    if state.truth is not None and resp is not None:
        handler_ns = request.get(HANDLER_NS_KEY) or time.time_ns()
        received, by = received_ns(request) or (handler_ns, "handler")
        entry = TruthEntry(
            job.rid, job.prompt_text, request.headers.get("X-Request-Id"), received, handler_ns, received_by=by
        )
        truth = state.truth.begin(entry)
        # as the write begins: the send system call inside it may already hand the bytes to a client, which may
        # read them before this process, on a busy machine, gets the CPU back to note a time after it
        stamps[0].append(lambda: entry.chunks_ns.append(time.time_ns()))
        stamps[1].append(lambda: entry.chunks_done_ns.append(time.time_ns()))
    chunks = state.chunk_source(deadline, job.n_tokens)
    try:
        return await _send_chunks(state, request, job, resp, chunks, (tokens, lps), t_arrival, fault, fault_pos, stamps)
    finally:
        chunks.close()  # the step-batched mode: out of the batch, however the request ended
        if truth is not None and state.truth is not None:
            state.truth.end(truth)


async def _send_chunks(  # long: one loop over the chunks, the faults at their place in it
    state: MockState,
    request: web.Request,
    job: Job,
    resp: web.StreamResponse | None,
    chunks: PacedChunks | BatchedChunks,
    output: tuple[list[str], list[dict[str, Any]] | None],
    t_arrival: float,
    fault: Fault | None,
    fault_pos: float,
    stamps: tuple[list[Callable[[], None]], list[Callable[[], None]]],
) -> web.StreamResponse:
    cfg, m = state.cfg, state.metrics
    loop = asyncio.get_running_loop()
    tokens, lps = output
    streamed = streamed_tokens(tokens, cfg.stream_drop_last_tokens)  # what a stream's chunks carry
    # A mid-stream fault strikes before the first chunk at or past this token (after at least one chunk when the
    # output has two or more).
    fault_token = chunks.fault_token(fault_pos)
    done, text_off, struck = 0, 0, False
    verified: list[int] = []  # each chunk's verification step: the tokens it yielded (per-request spec metrics)
    while done < job.n_tokens:
        chunk = None if state.shutdown.is_set() else await chunks.next()
        if chunk is None:  # server stopping: end the stream abruptly, as a dying server would
            _drop(request)
            return resp if resp is not None else web.Response(status=503)
        here = fault is not None and not struck and done >= fault_token
        struck |= here
        if here and fault is Fault.STALL:
            chunks.leave()
            await _stall(state, request, cfg.fault_stall_s)
            chunk = chunks.resume(chunk, loop.time())
        n = chunk.tokens
        payload = b""
        if resp is not None:  # encoded before the deadline, so that at the deadline only the write is left
            text = "".join(streamed[done : done + n])
            lp_block = logprobs_block(job, lps[done : done + n], text_off) if lps is not None else None
            usage = job.usage(done + n) if job.continuous_usage else None
            last = done + n >= job.n_tokens
            payload = chunk_event(job, [choice(job, text, job.finish_reason if last else None, lp_block)], usage)
            text_off += len(text)
        await sleep_until_on_loop(chunk.due, cfg.spin_s)
        if done == 0:
            m.ttft.observe(loop.time() - t_arrival)
        if here and fault is not Fault.STALL:
            ended = await _mid_stream_fault(request, job, resp, fault)
            if ended is not None:
                return ended
        if resp is not None:
            for stamp in stamps[0]:
                stamp()
            await resp.write(payload)
            for stamp in stamps[1]:
                stamp()
        m.chunks.chunk(n, chunk.step_tokens)
        if chunk.step_tokens is not None:
            verified.append(chunk.step_tokens)
        done += n
    m.e2e.observe(loop.time() - t_arrival)
    m.success(job.finish_reason)
    k = cfg.num_speculative_tokens
    spec = spec_decode_metrics(verified, k) if cfg.per_request_spec_metrics and k > 0 else None
    if resp is None:
        body = full_body(job, "".join(tokens), lps)
        return web.json_response(body | ({"metrics": spec} if spec is not None else {}))
    if job.include_usage:
        await resp.write(chunk_event(job, [], job.usage(done), spec))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _mid_stream_fault(
    request: web.Request, job: Job, resp: web.StreamResponse | None, fault: Fault
) -> web.StreamResponse | None:
    """A drop, error event or malformed event at its chunk: the response when it ends the request, else None (a
    malformed event is followed by the stream's own chunks)."""
    if resp is None:
        return _unary_fault(request, fault)
    if fault is Fault.DROP:
        _drop(request)
        return resp
    if fault is Fault.ERROR_EVENT:
        await resp.write(error_event("mock fault: generation failed mid-stream"))
        await resp.write(b"data: [DONE]\n\n")
        return resp
    await resp.write(b'data: {"id": "' + job.rid.encode() + b'", "choices": [{"text": \n\n')
    return None


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


async def _reset_prefix_cache(request: web.Request) -> web.Response:
    """vLLM's dev-mode endpoint: empty the prefix cache. Each reset is also a line on stderr, so a launched mock's
    log says how many it saw after it has stopped."""
    state = request.app[STATE_KEY]
    if not state.cfg.dev_mode:
        raise web.HTTPNotFound()  # vLLM has no such route outside dev mode
    state.cache.clear()
    state.cache_resets += 1
    print(f"mock-server: prefix cache reset ({state.cache_resets})", file=sys.stderr, flush=True)
    return web.json_response({"success": True})  # vLLM 0.32's answer


async def _metrics(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    return web.Response(body=generate_latest(state.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


@web.middleware
async def _json_errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Routing errors (404, 405) as OpenAI-style JSON too; the API key (401) on /v1/* when one is set."""
    key = request.app[STATE_KEY].cfg.api_key
    if key is not None and request.path.startswith("/v1/") and request.headers.get("Authorization") != f"Bearer {key}":
        return error_response(401, "invalid or missing API key", "authentication_error", "invalid_api_key")
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status, "http_error")
        return error_response(e.status, f"{e.reason}: {request.method} {request.path}", "invalid_request_error", code)


def create_app(cfg: MockConfig, counters: ConnectionCounters | None = None) -> web.Application:
    """The mock server as an aiohttp application (its own Prometheus registry; several may share a process);
    `counters`: what its connection layer refused, exported on /metrics."""
    app = web.Application(middlewares=[_json_errors], client_max_size=64 * 1024 * 1024)
    state = MockState(cfg, counters or ConnectionCounters())
    app[STATE_KEY] = state

    async def _on_cleanup(_: web.Application) -> None:
        if state.truth is not None:
            state.truth.close()

    app.on_cleanup.append(_on_cleanup)

    async def _on_shutdown(_: web.Application) -> None:
        state.shutdown.set()
        if state.steps is not None:
            state.steps.close()

    app.on_shutdown.append(_on_shutdown)
    app.router.add_post("/v1/completions", _completions_handler)
    app.router.add_post("/v1/chat/completions", _chat_handler)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/version", _version)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post("/reset_prefix_cache", _reset_prefix_cache)
    app.router.add_get("/mock/send_times", _send_times)
    return app


# --------------------------------------------------------------------------------------------------------------
# Running it


@contextlib.asynccontextmanager
async def running_mock_server(cfg: MockConfig, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve `cfg` on the current loop; yields the base URL ("http://127.0.0.1:PORT", no /v1)."""
    loop = asyncio.get_running_loop()
    # the truth log's arrival times: the kernel's, where the loop's selector reads them (the CLI's)
    stamps = receive_stamps_of(loop) if cfg.truth_log else None
    guard = ConnectionGuard(cfg.request_receive_timeout_s, receive_stamps=stamps)
    if isinstance(loop, AcceptLoop):  # the CLI's: its accept failures count here, and shed this server's slow clients
        loop.counters, loop.on_exhausted = guard.counters, guard.receiving.shed
        bound_logs(guard.counters)  # this process is the server's: rate-limit what clients can make it log
    # handler_cancellation: a client that hangs up cancels its handler, freeing its slot at once.
    app = create_app(cfg, guard.counters)
    runner = GuardedRunner(app, guard, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
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
    cfg: MockConfig,
    host: str,
    port: int,
    on_ready: Callable[[str], None],
    stop: asyncio.Event | None = None,
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


def run_mock_server(cfg: MockConfig, host: str, port: int, on_ready: Callable[[str, int | None], None]) -> None:
    """`speculab mock-server`: `serve_mock` with the bounds of `speculab serve` (serving/exhaustion.py): the soft
    open-files limit raised (passed to `on_ready` with the URL) and an accept loop that survives running out of
    descriptors. Python 3.10 has no loop factory for asyncio's runner: there accept failures are asyncio's."""
    open_files = raise_open_files_limit()
    main = serve_mock(cfg, host, port, lambda url: on_ready(url, open_files))

    def accept_loop() -> AcceptLoop:
        # with a truth log, a request's arrival is the kernel's receive stamp, which the loop's selector reads
        stamps = ReceiveStamps() if cfg.truth_log else None
        loop = AcceptLoop(ConnectionCounters(), selector=stamps)
        loop.receive_stamps = stamps  # type: ignore[attr-defined]  # serving.receive_stamps.receive_stamps_of
        return loop

    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=accept_loop) as runner:
            runner.run(main)
    else:  # pragma: no cover
        asyncio.run(main)


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
    "run_mock_server",
    "running_mock_server",
    "serve_mock",
]
