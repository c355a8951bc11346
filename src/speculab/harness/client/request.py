"""One async request function per endpoint kind, all behind `RequestFunc`: send one request, record raw events.

Kinds: `/v1/completions` and `/v1/chat/completions`, each streamed (SSE) or not. Every function returns a
`RequestRecord` and never raises for server or network trouble: failures become `ErrorInfo` with a category,
so a run always satisfies sent == ok + error. Times come from an injected clock (`time.perf_counter` by
default). Streamed bytes go through `StreamState`, a clock-free state machine that the scripted-clock unit
tests drive directly, so the rules it pins are the ones production uses:

- only chunks that carry generated text become `ChunkEvent`s (TTFT, gaps and E2E use them); a trailing
  usage-only chunk is read for its usage and its arrival kept in `extra["usage_chunk_s"]`, but never extends E2E;
- an error object inside the stream, a non-JSON payload, or a stream that ends before `[DONE]` is a failure;
- per-chunk token counts come from the best source: continuous usage stats -> logprobs -> a local tokenizer ->
  one per chunk (flagged); `completion_tokens` is the server's usage when it gives one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

import aiohttp

from speculab.errors import UserError
from speculab.harness.client.socket_times import ReadTimes, stamping_session
from speculab.harness.records import (
    ChunkEvent,
    ErrorCategory,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
    TokenCountSource,
)
from speculab.protocol.chunks import Delta, MalformedChunk, error_from_body, parse_body, parse_stream_chunk
from speculab.protocol.sse import SSEDecoder

ApiKind = Literal["completions", "chat"]
Clock = Callable[[], float]
TokenCounter = Callable[[str], int]  # text -> number of tokens (a local tokenizer)

API_KEY_ENV = ("SPECULAB_API_KEY", "OPENAI_API_KEY")
_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def resolve_api_key(flag_value: str | None) -> str | None:
    """The API key from the flag, else $SPECULAB_API_KEY, else $OPENAI_API_KEY. Never written to disk."""
    if flag_value:
        return flag_value
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    return None


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """Where and how to send requests. `api_key` is kept out of repr and out of `to_manifest()`."""

    base_url: str
    model: str
    api: ApiKind = "completions"
    stream: bool = True
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 600.0  # per request, connect to last byte
    include_usage: bool = True  # stream_options.include_usage; turn off for servers that reject it
    continuous_usage_stats: bool = True  # stream_options.continuous_usage_stats (vLLM, SGLang, speculab)
    logprobs: int | None = None  # request per-token logprobs with this many alternatives (0 = chosen token only)
    extra_body: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.api not in _PATHS:
            raise UserError(f"--api must be 'completions' or 'chat', not {self.api!r}")
        if self.timeout_s <= 0:
            raise UserError(f"--timeout must be positive seconds, got {self.timeout_s}")
        object.__setattr__(self, "base_url", normalize_base_url(self.base_url))

    @property
    def url(self) -> str:
        return self.base_url + _PATHS[self.api]

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def to_manifest(self) -> dict[str, Any]:
        """Everything but the key itself (only whether one was used)."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api": self.api,
            "stream": self.stream,
            "api_key_set": self.api_key is not None,
            "timeout_s": self.timeout_s,
            "include_usage": self.include_usage,
            "continuous_usage_stats": self.continuous_usage_stats,
            "logprobs": self.logprobs,
            "extra_body": dict(self.extra_body),
        }


def normalize_base_url(url: str) -> str:
    """'http://h:8000/v1/' and 'http://h:8000' both become 'http://h:8000' (paths add /v1/...)."""
    u = url.strip().rstrip("/")
    if not (u.startswith("http://") or u.startswith("https://")):
        raise UserError(f"--url must start with http:// or https://, got {url!r}")
    for path in ("/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions", "/v1/models"):
        if u.endswith(path):
            raise UserError(
                f"--url is the server's base address, not an endpoint: drop {path!r} "
                f"(e.g. --url {u[: -len(path)]}; --api chooses completions or chat)"
            )
    if u.endswith("/v1"):
        u = u[: -len("/v1")]
    return u


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """Sampling parameters of a run, identical for every request (per-item max_tokens may override)."""

    max_tokens: int | None = 256  # for items without their own max_tokens
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = 0  # run seed; a request without its own seed gets seed + index
    ignore_eos: bool = False  # vLLM/SGLang extension: generate exactly max_tokens
    max_tokens_overrides_items: bool = False  # True when the user set --max-tokens: it wins over per-item limits

    def __post_init__(self) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise UserError(f"--temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise UserError(f"--top-p must be in (0, 1], got {self.top_p}")

    def request_seed(self, spec: RequestSpec) -> int | None:
        if spec.seed is not None:
            return spec.seed
        return None if self.seed is None else self.seed + spec.index


def build_payload(ep: EndpointConfig, sp: SamplingConfig, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body for one request."""
    body: dict[str, Any] = {"model": ep.model, "stream": ep.stream}
    if ep.api == "completions":
        if spec.prompt is None:
            raise UserError(f"workload item {spec.index} has only chat messages; use --api chat")
        body["prompt"] = spec.prompt
    else:
        body["messages"] = (
            [dict(m) for m in spec.messages] if spec.messages else [{"role": "user", "content": spec.prompt or ""}]
        )
    use_item = spec.max_tokens is not None and not sp.max_tokens_overrides_items
    max_tokens = spec.max_tokens if use_item else sp.max_tokens
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    body["temperature"] = sp.temperature
    if sp.top_p is not None:
        body["top_p"] = sp.top_p
    seed = sp.request_seed(spec)
    if seed is not None:
        body["seed"] = seed
    if sp.ignore_eos:
        body["ignore_eos"] = True
    if ep.stream and ep.include_usage:
        opts: dict[str, Any] = {"include_usage": True}
        if ep.continuous_usage_stats:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
    if ep.logprobs is not None:
        if ep.api == "completions":
            body["logprobs"] = ep.logprobs
        else:
            body["logprobs"] = True
            body["top_logprobs"] = ep.logprobs
    body.update(ep.extra_body)
    return body


@dataclass(slots=True)
class _PendingChunk:
    t_s: float
    text: str
    cum_tokens: int | None  # usage.completion_tokens carried by this chunk (cumulative), if any
    n_logprobs: int | None


class StreamState:
    """Consumes a streamed response's bytes with their arrival times; knows nothing about sockets or clocks."""

    def __init__(self, api: ApiKind, *, logprobs_requested: bool = False, count_tokens: TokenCounter | None = None):
        self.api = api
        self.logprobs_requested = logprobs_requested
        self.count_tokens = count_tokens
        self._dec = SSEDecoder()
        self._chunks: list[_PendingChunk] = []
        self._answer: list[str] = []
        self._reasoning: list[str] = []
        self._logprobs: list[dict[str, Any]] = []
        self._untexted_logprob_tokens = 0  # tokens of text-less chunks since the last text chunk (credited to the next)
        self.usage: dict[str, Any] | None = None
        self.usage_chunk_s: float | None = None
        self.finish_reason: str | None = None
        self.timings: dict[str, Any] | None = None
        self.error: ErrorInfo | None = None
        self.done = False  # [DONE] seen
        self.n_events = 0

    @property
    def finished(self) -> bool:
        """No more bytes are needed: [DONE] arrived or the stream already failed."""
        return self.done or self.error is not None

    def feed(self, piece: bytes, t_s: float) -> bool:
        """One network read that arrived at t_s. Returns `finished`."""
        for ev in self._dec.feed(piece):
            self.n_events += 1
            if ev.is_done:
                self.done = True
                break
            if ev.event == "error":
                err = error_from_body(ev.data)
                self.error = ErrorInfo(ErrorCategory.ERROR_EVENT, err.message if err else ev.data[:500])
                break
            try:
                delta = parse_stream_chunk(ev.data, self.api)
            except MalformedChunk as e:
                self.error = ErrorInfo(ErrorCategory.MALFORMED, f"malformed stream chunk: {e}")
                break
            self._apply(delta, t_s)
            if self.error is not None:
                break
        return self.finished

    def _apply(self, d: Delta, t_s: float) -> None:
        if d.error is not None:
            self.error = ErrorInfo(ErrorCategory.ERROR_EVENT, d.error.message or "error event in stream")
            return
        if d.usage is not None:
            self.usage = d.usage
            if not d.has_choices:
                self.usage_chunk_s = t_s
        if d.timings is not None:
            self.timings = d.timings
        if d.finish_reason:
            self.finish_reason = d.finish_reason
        if d.logprobs:
            self._logprobs.extend(d.logprobs)
        if d.carries_text:
            self._answer.append(d.text)
            self._reasoning.append(d.reasoning)
            n_lp = d.n_logprob_tokens
            if n_lp is not None:
                # a token whose text is held back (a partial UTF-8 character, a special token) arrives in a
                # text-less chunk; like continuous usage, its count goes to the next chunk that carries text
                n_lp += self._untexted_logprob_tokens
                self._untexted_logprob_tokens = 0
            self._chunks.append(_PendingChunk(t_s, d.reasoning + d.text, d.completion_tokens, n_lp))
        elif d.logprobs:
            self._untexted_logprob_tokens += len(d.logprobs)

    def eof(self) -> None:
        """The server closed the stream. Without [DONE] (or at least a finish_reason and no cut event) the
        response is incomplete: dropped mid-stream."""
        if self.finished:
            return
        if self._dec.pending or self.finish_reason is None:
            what = "in the middle of an event" if self._dec.pending else "before [DONE]"
            self.error = ErrorInfo(ErrorCategory.DROPPED, f"stream ended {what} after {self.n_events} events")

    def _chunk_counts(self) -> tuple[list[int | None], TokenCountSource]:
        cs = self._chunks
        if not cs:
            return [], TokenCountSource.NONE
        if all(c.cum_tokens is not None for c in cs):
            counts: list[int | None] = []
            prev = 0
            for c in cs:
                assert c.cum_tokens is not None
                counts.append(max(c.cum_tokens - prev, 0))
                prev = c.cum_tokens
            return counts, TokenCountSource.CONTINUOUS_USAGE
        if self.logprobs_requested and all(c.n_logprobs is not None for c in cs):
            return [c.n_logprobs for c in cs], TokenCountSource.LOGPROBS
        if self.count_tokens is not None:
            return [self.count_tokens(c.text) for c in cs], TokenCountSource.TOKENIZER
        return [1] * len(cs), TokenCountSource.ONE_PER_CHUNK

    def record(
        self,
        *,
        spec: RequestSpec,
        scheduled_s: float,
        sent_s: float,
        end_s: float,
        warmup: bool = False,
        error: ErrorInfo | None = None,
    ) -> RequestRecord:
        """The record of this request; `error` (transport failure) wins over what the stream said."""
        counts, source = self._chunk_counts()
        chunks = tuple(ChunkEvent(c.t_s, c.text, n) for c, n in zip(self._chunks, counts, strict=True))
        extra: dict[str, Any] = {}
        if self.usage_chunk_s is not None:
            extra["usage_chunk_s"] = self.usage_chunk_s
        if any(self._reasoning):
            extra["reasoning_text"] = "".join(self._reasoning)
        if self.timings is not None:
            extra["timings"] = self.timings  # raw llama.cpp timings, for engines.acceptance.from_llamacpp_timings
        return RequestRecord(
            index=spec.index,
            scheduled_s=scheduled_s,
            sent_s=sent_s,
            end_s=end_s,
            chunks=chunks,
            output_text="".join(self._answer),
            prompt_tokens=_usage_int(self.usage, "prompt_tokens"),
            completion_tokens=_usage_int(self.usage, "completion_tokens"),
            token_count_source=source,
            finish_reason=self.finish_reason,
            error=error or self.error or finish_error(self.finish_reason),
            warmup=warmup,
            stream=True,
            spec=spec_from_response(self.usage, self.timings),
            logprobs=tuple(self._logprobs) if self.logprobs_requested else None,
            extra=extra,
        )


def _usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    if not usage:
        return None
    v = usage.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def spec_from_response(usage: dict[str, Any] | None, timings: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per-response speculation stats: speculab's `usage.speculab_spec_decode`, else llama.cpp's `timings`."""
    ours = (usage or {}).get("speculab_spec_decode")
    if isinstance(ours, dict):
        return {
            "drafts": ours.get("drafts"),
            "draft_tokens": ours.get("draft_tokens"),
            "accepted_tokens": ours.get("accepted_tokens"),
            "source": "speculab usage.speculab_spec_decode",
        }
    return spec_from_timings(timings)


def spec_from_timings(timings: dict[str, Any] | None) -> dict[str, Any] | None:
    """llama.cpp reports per-response draft stats in `timings` (draft_n, draft_n_accepted)."""
    if not timings or "draft_n" not in timings:
        return None
    return {
        "draft_tokens": timings.get("draft_n"),
        "accepted_tokens": timings.get("draft_n_accepted"),
        "source": "llama.cpp timings",
    }


# Finish reasons that mean the server gave up on the request, though the response may look complete (HTTP 200,
# [DONE]): vLLM ends engine-side aborts (shutdown, pause, scale-down) with finish_reason "abort" (vllm#57082).
FAILED_FINISH_REASONS = frozenset({"abort", "error"})


def finish_error(finish_reason: Any) -> ErrorInfo | None:
    """An `error_event` failure for a finish reason that means the server gave up on the request."""
    if isinstance(finish_reason, str) and finish_reason in FAILED_FINISH_REASONS:
        return ErrorInfo(
            ErrorCategory.ERROR_EVENT, f"the server ended the response with finish_reason {finish_reason!r}"
        )
    return None


class RequestFunc(Protocol):
    """Send one request and return what was observed. Never raises for server or network failures."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord: ...


def _timeout(ep: EndpointConfig) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=ep.timeout_s)


def _transport_error(e: BaseException, *, got_response: bool, timeout_s: float) -> ErrorInfo:
    if isinstance(e, asyncio.CancelledError):
        return ErrorInfo(ErrorCategory.CANCELLED, "cancelled: the run was interrupted")
    if isinstance(e, asyncio.TimeoutError):
        return ErrorInfo(ErrorCategory.TIMEOUT, f"no complete response within {timeout_s:g} s")
    if isinstance(e, aiohttp.ClientConnectorError):
        return ErrorInfo(ErrorCategory.CONNECT, f"cannot connect: {e}")
    if isinstance(e, aiohttp.ClientResponseError) and not got_response:
        return ErrorInfo(ErrorCategory.MALFORMED, f"invalid HTTP response: {e.message}", e.status or None)
    return ErrorInfo(ErrorCategory.DROPPED, f"connection lost: {type(e).__name__}: {e}".rstrip(": "))


async def _http_error(resp: aiohttp.ClientResponse) -> ErrorInfo:
    body = await resp.read()
    err = error_from_body(body)
    msg = err.message if err else body[:300].decode("utf-8", errors="replace") or resp.reason or ""
    return ErrorInfo(ErrorCategory.HTTP, f"HTTP {resp.status}: {msg}", resp.status)


@dataclass(frozen=True, slots=True)
class _Request:
    """What both request functions hold, and the request they send."""

    endpoint: EndpointConfig
    sampling: SamplingConfig
    clock: Clock = time.perf_counter
    count_tokens: TokenCounter | None = None

    def _body(self, spec: RequestSpec) -> bytes:
        # serialized before the clock starts: encoding the body is the harness's work, not the endpoint's latency
        return json.dumps(build_payload(self.endpoint, self.sampling, spec)).encode()


@dataclass(frozen=True, slots=True)
class StreamingRequest(_Request):
    """`RequestFunc` for streamed completions or chat completions."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        ep = self.endpoint
        body = self._body(spec)
        headers = ep.headers()
        st = StreamState(ep.api, logprobs_requested=ep.logprobs is not None, count_tokens=self.count_tokens)
        clock = self.clock
        err: ErrorInfo | None = None
        got_response = False
        end_s: float | None = None
        sent_s = clock()
        try:
            async with session.post(ep.url, data=body, headers=headers, timeout=_timeout(ep)) as resp:
                got_response = True
                if resp.status != 200:
                    err = await _http_error(resp)
                elif resp.content_type == "application/json":
                    # the server ignored stream=true or answered with a JSON error and status 200
                    body = await resp.read()
                    e = error_from_body(body)
                    err = (
                        ErrorInfo(ErrorCategory.ERROR_EVENT, e.message)
                        if e
                        else ErrorInfo(ErrorCategory.MALFORMED, "expected an SSE stream, got a JSON body")
                    )
                else:
                    reads = ReadTimes.of(resp, clock)  # each chunk's time: the socket read that delivered it
                    async for piece in resp.content.iter_any():
                        if any(st.feed(part, t) for part, t in reads.split(piece, clock())):
                            break
                    else:
                        st.eof()
                    end_s = clock()
                    if st.done:
                        # read the terminating bytes so the connection can be reused; never wait long for them
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(resp.content.read(), 0.05)
        except (asyncio.CancelledError, asyncio.TimeoutError, aiohttp.ClientError) as e:
            if not (st.done and end_s is not None):  # a failure after [DONE] does not spoil the response
                err = _transport_error(e, got_response=got_response, timeout_s=ep.timeout_s)
        return st.record(
            spec=spec, scheduled_s=scheduled_s, sent_s=sent_s, end_s=end_s or clock(), warmup=warmup, error=err
        )


@dataclass(frozen=True, slots=True)
class UnaryRequest(_Request):
    """`RequestFunc` for non-streamed completions or chat completions: one body, no chunks."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        ep = self.endpoint
        body = self._body(spec)
        headers = ep.headers()
        err: ErrorInfo | None = None
        delta = Delta()
        got_response = False
        sent_s = self.clock()
        try:
            async with session.post(ep.url, data=body, headers=headers, timeout=_timeout(ep)) as resp:
                got_response = True
                if resp.status != 200:
                    err = await _http_error(resp)
                else:
                    body = await resp.read()
                    try:
                        delta = parse_body(body, ep.api)
                    except MalformedChunk as e:
                        err = ErrorInfo(ErrorCategory.MALFORMED, f"malformed response body: {e}")
                    if delta.error is not None:
                        err = ErrorInfo(ErrorCategory.ERROR_EVENT, delta.error.message or "error object in body")
                    err = err or finish_error(delta.finish_reason)
        except (asyncio.CancelledError, asyncio.TimeoutError, aiohttp.ClientError) as e:
            err = _transport_error(e, got_response=got_response, timeout_s=ep.timeout_s)
        end_s = self.clock()
        extra: dict[str, Any] = {"reasoning_text": delta.reasoning} if delta.reasoning else {}
        if delta.timings is not None:
            extra["timings"] = delta.timings
        return RequestRecord(
            index=spec.index,
            scheduled_s=scheduled_s,
            sent_s=sent_s,
            end_s=end_s,
            output_text=delta.text,
            prompt_tokens=_usage_int(delta.usage, "prompt_tokens"),
            completion_tokens=_usage_int(delta.usage, "completion_tokens"),
            token_count_source=TokenCountSource.NONE,
            finish_reason=delta.finish_reason,
            error=err,
            warmup=warmup,
            stream=False,
            spec=spec_from_response(delta.usage, delta.timings),
            logprobs=delta.logprobs if ep.logprobs is not None else None,
            extra=extra,
        )


def request_func(
    endpoint: EndpointConfig,
    sampling: SamplingConfig,
    *,
    clock: Clock = time.perf_counter,
    count_tokens: TokenCounter | None = None,
) -> RequestFunc:
    """The request function for this endpoint kind (api x stream)."""
    cls = StreamingRequest if endpoint.stream else UnaryRequest
    return cls(endpoint, sampling, clock, count_tokens)


def make_session(*, limit: int = 0, clock: Clock = time.perf_counter) -> aiohttp.ClientSession:
    """One session per run. No connection cap by default (aiohttp's default of 100 would silently throttle
    high concurrency); no session-wide timeout (each request has its own). Its connections stamp every socket
    read with `clock` (see read_stamps): streamed requests using the same clock time chunks by those stamps."""
    return stamping_session(
        aiohttp.TCPConnector(limit=limit, force_close=False),
        clock,
        timeout=aiohttp.ClientTimeout(total=None),
        # keep-alive connections are reused; responses are read incrementally by us
        auto_decompress=True,
    )
