"""A hostile OpenAI-compatible server: a catalogue of broken answers, the mirror of the engine server's fuzz.

The endpoints speculab measures are often half-broken (a proxy's HTML page, a buggy fork, a counter that resets
mid-run). This server answers every request with the next entry of a catalogue generated combinatorially
(endpoint x corruption x position), so one `bench` meets hundreds of them:

- streamed completions and chat (`STREAM`): one field of one chunk (first, middle, last text chunk or the trailing
  usage chunk) set to a junk value; one chunk's bytes replaced by raw junk (not JSON, invalid UTF-8, NUL bytes, deep
  nesting, an endless line, a cut connection, ...); or the whole answer replaced (an HTML page, a JSON body, an error
  status, nothing at all, a stall past the timeout);
- whole bodies (`BODY`, `stream: false`): the same field corruptions and raw junk as one body;
- `/metrics` (`METRICS`, one entry per scrape): garbage, NaN, +Inf, huge values, counters that go down (a reset);
- `/version` (`VERSION`, one entry per GET) and `/v1/models` (`MODELS`, chosen by a URL prefix `/models-<i>`, since
  a run must first get past the probe: without the prefix the list is valid).

`served` records which entries were answered, so a test can check that every one of them was.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MODEL = "hostile-model"
MB = 1024 * 1024


# --- what an answer does ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Send:
    data: bytes


@dataclass(frozen=True)
class Flood:
    """Write `piece` again and again, `total` bytes in all (or until the client hangs up): an endless line."""

    piece: bytes
    total: int


@dataclass(frozen=True)
class Pause:
    s: float


@dataclass(frozen=True)
class Cut:
    """Drop the TCP connection here."""


@dataclass(frozen=True)
class Raw:
    """Bytes written straight to the socket instead of an HTTP response, then the connection closed: broken
    HTTP itself (a status line that is not one, a short body, bad chunked framing, a huge header)."""

    data: bytes


Step = Send | Flood | Pause | Cut | Raw


@dataclass(frozen=True)
class Answer:
    status: int = 200
    content_type: str | None = "text/event-stream"
    steps: tuple[Step, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Broken:
    """One catalogue entry: where it applies, what is broken, at which position, and the answer it builds."""

    endpoint: str  # stream | body | metrics | version | models
    kind: str
    position: str
    build: Callable[[str], Answer]  # api ("completions" | "chat") -> the answer

    @property
    def name(self) -> str:
        return f"{self.endpoint}:{self.kind}@{self.position}"


# --- junk ----------------------------------------------------------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000
JUNK_VALUES: dict[str, Any] = {
    "null": None,
    "true": True,
    "negative": -1,
    "fraction": 2.5,
    "1e308": 1e308,
    "10^30": 10**30,
    "nan": float("nan"),
    "inf": float("inf"),
    "string": "12",
    "list": [1, [2]],
    "object": {"a": {"b": 1}},
    "lone-surrogate": "\ud800x",
    "nul": "a\x00b",
}
# fields of a chunk or body, by api: a dotted path into it
FIELDS: dict[str, dict[str, str]] = {
    "usage.completion_tokens": {"completions": "usage.completion_tokens", "chat": "usage.completion_tokens"},
    "usage.prompt_tokens": {"completions": "usage.prompt_tokens", "chat": "usage.prompt_tokens"},
    "usage": {"completions": "usage", "chat": "usage"},
    "choices": {"completions": "choices", "chat": "choices"},
    "choice": {"completions": "choices.0", "chat": "choices.0"},
    "text": {"completions": "choices.0.text", "chat": "choices.0.@msg.content"},
    "finish_reason": {"completions": "choices.0.finish_reason", "chat": "choices.0.finish_reason"},
    "logprobs": {"completions": "choices.0.logprobs", "chat": "choices.0.logprobs"},
    "timings.draft_n": {"completions": "timings.draft_n", "chat": "timings.draft_n"},
    "spec_decode": {"completions": "usage.speculab_spec_decode.drafts", "chat": "usage.speculab_spec_decode.drafts"},
    "vllm_metrics": {"completions": "metrics.speculative_decoding", "chat": "metrics.speculative_decoding"},
    "meta_info": {"completions": "meta_info.spec_verify_ct", "chat": "meta_info.spec_verify_ct"},
    "error": {"completions": "error", "chat": "error"},
}


def _set(obj: dict[str, Any], path: str, value: Any, msg: str) -> dict[str, Any]:
    """A copy of `obj` with the dotted `path` set to `value` (made where missing); `@msg` is delta or message."""
    obj = json.loads(json.dumps(obj))
    keys = [msg if k == "@msg" else k for k in path.split(".")]
    cur: Any = obj
    for k in keys[:-1]:
        if isinstance(cur, list):
            while len(cur) <= int(k):  # the usage chunk's empty choices gain the choice being broken
                cur.append({})
            cur = cur[int(k)]
        else:
            cur = cur.setdefault(k, {})
            if not isinstance(cur, (dict, list)):
                return obj
    if isinstance(cur, list):
        while len(cur) <= int(keys[-1]):
            cur.append({})
        cur[int(keys[-1])] = value
    else:
        cur[keys[-1]] = value
    return obj


def _json(obj: Any) -> bytes:
    # lone surrogates must reach the wire as \\ud800 escapes, as a buggy server would send them
    return json.dumps(obj, ensure_ascii=True).encode()


def sse(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else _json(obj)) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def chunk(api: str, text: str, cum: int, finish: str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if api == "chat":
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return {"object": "chunk", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": cum}}


def usage_chunk() -> dict[str, Any]:
    return {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}


POSITIONS = ("first", "middle", "last", "usage")


def good_part(api: str, pos: str) -> dict[str, Any]:
    """The chunk a good three-chunk stream sends at `pos`."""
    return {
        "first": lambda: chunk(api, "ab", 1),
        "middle": lambda: chunk(api, "cd", 2),
        "last": lambda: chunk(api, "ef", 3, "length"),
        "usage": usage_chunk,
    }[pos]()


def _stream(api: str, replace: dict[str, tuple[Step, ...]]) -> tuple[Step, ...]:
    """The steps of a good three-chunk stream, with the chunk at each position in `replace` replaced."""
    steps: list[Step] = []
    for pos in POSITIONS:
        steps += replace.get(pos) or (Send(sse(good_part(api, pos))),)
    return (*steps, Send(DONE))


def body(api: str) -> dict[str, Any]:
    key = {"message": {"role": "assistant", "content": "abcdef"}} if api == "chat" else {"text": "abcdef"}
    return {
        "object": "completion",
        "choices": [{"index": 0, **key, "finish_reason": "length"}],
        "usage": usage_chunk()["usage"],
    }


def _raw_kinds(good: bytes) -> dict[str, tuple[Step, ...]]:
    """Raw replacements of one chunk's bytes; `good` is that chunk's SSE bytes."""
    payload = good[len(b"data: ") : -2]
    return {
        "not-json": (Send(b"data: {nope\n\n"),),
        "truncated-json": (Send(b"data: " + payload[: len(payload) // 2] + b"\n\n"),),
        "invalid-utf8": (Send(good.replace(b'"', b'"\xff\xfe', 1)),),
        "nul-bytes": (Send(b"data: \x00\x00{\x00\n\n"),),
        "deep-nesting": (Send(b"data: " + DEEP.encode() + b"\n\n"),),
        "huge-digits": (Send(b'data: {"choices": [], "usage": {"completion_tokens": 1' + b"0" * 6000 + b"}}\n\n"),),
        "non-object": (Send(b"data: [1, 2, 3]\n\n"),),
        "event-error": (Send(b"event: error\ndata: boom\n\n"),),
        "error-object": (Send(sse({"error": {"message": "x" * 10_000, "code": [1]}})),),
        "no-blank-line": (Send(good[:-1]),),
        "cr-endings": (Send(good.replace(b"\n", b"\r")),),
        "html-line": (Send(b"<html><body>502 Bad Gateway</body></html>\n\n"),),
        "binary": (Send(bytes(range(256)) * 4),),
        "endless-line": (Send(b"data: "), Flood(b"x" * 65536, 6 * MB)),
        "endless-event": (Flood(b"data: " + b"y" * 1000 + b"\n", 6 * MB),),
        "cut": (Cut(),),
        "end": (Send(b""),),  # the stream stops here: no [DONE]
        "pause": (Pause(0.02), Send(good)),
        "done-early": (Send(DONE),),
        "comment-flood": (Flood(b": keep-alive\n", 2 * MB), Send(good)),
    }


def _stream_catalogue() -> list[Broken]:
    out: list[Broken] = []
    for fname, paths in FIELDS.items():
        for vname, value in JUNK_VALUES.items():
            for pos in POSITIONS:

                def build(api: str, p=paths, v=value, pos=pos) -> Answer:
                    broken = _set(good_part(api, pos), p[api], v, "delta")
                    return Answer(steps=_stream(api, {pos: (Send(sse(broken)),)}))

                out.append(Broken("stream", f"{fname}={vname}", pos, build))
    for kind in _raw_kinds(b"data: {}\n\n"):
        for pos in POSITIONS:

            def build_raw(api: str, kind=kind, pos=pos) -> Answer:
                return Answer(steps=_stream(api, {pos: _raw_kinds(sse(good_part(api, pos)))[kind]}))

            out.append(Broken("stream", kind, pos, build_raw))
    out += [Broken("stream", kind, "whole", build) for kind, build in _whole_answers().items()]
    return out


def _whole_answers() -> dict[str, Callable[[str], Answer]]:
    """Answers to a stream request that are not a stream at all."""
    html = b"<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>"
    return {
        "html-200": lambda api: Answer(200, "text/html", (Send(html),)),
        "html-500": lambda api: Answer(500, "text/html", (Send(html),)),
        "json-200": lambda api: Answer(200, "application/json", (Send(_json(body(api))),)),
        "json-error-200": lambda api: Answer(200, "application/json", (Send(b'{"error": {"message": "nope"}}'),)),
        "xml-200": lambda api: Answer(200, "application/xml", (Send(b"<error>nope</error>"),)),
        "plain-garbage": lambda api: Answer(200, "text/plain", (Send(b"hello\nworld\n"),)),
        "no-content-type": lambda api: Answer(200, None, (Send(b"\x00\x01\x02"),)),
        "empty-200": lambda api: Answer(200, "text/event-stream", ()),
        "empty-502": lambda api: Answer(502, "text/plain", ()),
        "429-json": lambda api: Answer(429, "application/json", (Send(b'{"error": {"message": "slow down"}}'),)),
        "401": lambda api: Answer(401, "application/json", (Send(b'{"detail": "no"}'),)),
        "huge-error-body": lambda api: Answer(500, "text/plain", (Flood(b"e" * 65536, 8 * MB),)),
        "endless-html": lambda api: Answer(200, "text/html", (Flood(b"<p>" * 20000, 8 * MB),)),
        "cut-at-once": lambda api: Answer(200, "text/event-stream", (Cut(),)),
        "stall-past-timeout": lambda api: Answer(200, "text/event-stream", (Pause(4.0),)),
        "deep-json-error-200": lambda api: Answer(200, "application/json", (Send(DEEP.encode()),)),
        "redirect-loop": lambda api: Answer(307, "text/plain", (), (("Location", "/v1/completions"),)),
        **{f"raw-{kind}": (lambda api, d=data: Answer(steps=(Raw(d),))) for kind, data in RAW_HTTP.items()},
    }


HTTP_200 = b"HTTP/1.1 200 OK\r\n"
RAW_HTTP = {
    "bad-status-line": b"HTTP/1.1 abc\r\n\r\n",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n",
    "short-body": HTTP_200 + b"Content-Type: text/event-stream\r\nContent-Length: 500\r\n\r\ndata: {}\n\n",
    "bad-chunked": HTTP_200 + b"Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    "huge-header": HTTP_200 + b"X-Junk: " + b"a" * 20000 + b"\r\n\r\n",
    "gzip-lie": HTTP_200 + b"Content-Type: text/event-stream\r\nContent-Encoding: gzip\r\n\r\nnot gzip at all",
    "nul-header": HTTP_200 + b"Content-\x00Type: text/event-stream\r\n\r\n",
}


def _body_catalogue() -> list[Broken]:
    out: list[Broken] = []
    for fname, paths in FIELDS.items():
        for vname, value in JUNK_VALUES.items():

            def build(api: str, p=paths, v=value) -> Answer:
                return Answer(200, "application/json", (Send(_json(_set(body(api), p[api], v, "message"))),))

            out.append(Broken("body", f"{fname}={vname}", "body", build))
    raw = {
        "not-json": b"{nope",
        "truncated": b'{"choices": [{"text": "ab',
        "invalid-utf8": b'{"choices": [{"text": "\xff\xfe", "finish_reason": "stop"}]}',
        "nul": b"\x00" * 100,
        "deep-nesting": DEEP.encode(),
        "huge-digits": b'{"choices": [], "usage": {"completion_tokens": 1' + b"0" * 6000 + b"}}",
        "array": b"[1, 2]",
        "null": b"null",
        "empty": b"",
        "html": b"<html>oops</html>",
    }
    for kind, data in raw.items():
        out.append(Broken("body", kind, "body", lambda api, d=data: Answer(200, "application/json", (Send(d),))))
    out.append(Broken("body", "endless-body", "body", lambda api: Answer(200, "application/json", (
        Send(b'{"choices": [{"text": "'), Flood(b"z" * 65536, 70 * MB)))))  # fmt: skip
    out.append(Broken("body", "cut", "body", lambda api: Answer(200, "application/json", (Send(b'{"ch'), Cut()))))
    out += [Broken("body", f"raw-{k}", "body", lambda api, d=d: Answer(steps=(Raw(d),))) for k, d in RAW_HTTP.items()]
    return out


# --- /metrics, /version, /v1/models --------------------------------------------------------------------------
def metrics_text(drafts: float, tokens: float | str = 8, accepted: float | str = 5) -> str:
    return (
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        f"vllm:spec_decode_num_drafts_total {drafts}\n"
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        f"vllm:spec_decode_num_draft_tokens_total {tokens}\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running 1\n"
    )


def _metrics_catalogue() -> list[Broken]:
    texts: dict[str, bytes | Answer] = {
        "valid": metrics_text(4).encode(),
        "reset": metrics_text(1, 2, 1).encode(),  # counters lower than the valid entry's: the server restarted
        "nan": metrics_text(float("nan")).encode(),
        "inf": metrics_text(4, "+Inf").encode(),
        "1e308": metrics_text(1e308, 1e308, "1e308").encode(),
        "negative": metrics_text(-5, -1, -1).encode(),
        "accepted-over-drafted": metrics_text(40, 80, 900).encode(),
        "garbage": b"this is not { prometheus",
        "html": b"<html><body>login required</body></html>",
        "json": b'{"metrics": []}',
        "bad-label": b'vllm:num_requests_running{model="a} 1\n',
        "no-value": b"vllm:num_requests_running\n",
        "two-values": b"vllm:num_requests_running 1 2 3 4\n",
        "invalid-utf8": b'vllm:num_requests_running{m="\xff\xfe"} 1\n',
        "nul": b"vllm:num_\x00requests 1\n",
        "empty": b"",
        "duplicate-type": b"# TYPE a counter\n# TYPE a gauge\na 1\n",
        "deep-labels": b"x{" + b",".join(b'l%d="v"' % i for i in range(5000)) + b"} 1\n",
        "huge": Answer(200, "text/plain", (Flood(b"a_total 1\n" * 1000, 40 * MB),)),
        "500": Answer(500, "text/plain", (Send(b"down"),)),
        "cut": Answer(200, "text/plain", (Send(b"vllm:num_req"), Cut())),
        "redirect": Answer(302, "text/plain", (), (("Location", "/metrics"),)),
    }
    out = []
    for kind, t in texts.items():
        ans = t if isinstance(t, Answer) else Answer(200, "text/plain; version=0.0.4", (Send(t),))
        out.append(Broken("metrics", kind, "scrape", lambda api, a=ans: a))
    return out


def _version_catalogue() -> list[Broken]:
    bodies: dict[str, bytes | Answer] = {
        "valid": b'{"version": "0.0.0-hostile"}',
        "html": b"<html>hi</html>",
        "deep": DEEP.encode(),
        "huge-digits": b'{"version": 1' + b"0" * 6000 + b"}",
        "invalid-utf8": b'{"version": "\xff"}',
        "lone-surrogate": b'{"version": "\\ud800"}',
        "list": b"[1, 2, 3]",
        "number": b"1e400",
        "big-object": _json({f"k{i}": "v" * 100 for i in range(2000)}),
        "nul": b"\x00\x00",
        "huge": Answer(200, "application/json", (Flood(b"[" * 65536, 12 * MB),)),
        "500": Answer(500, "text/html", (Send(b"<html>err</html>"),)),
        "cut": Answer(200, "application/json", (Send(b'{"ver'), Cut())),
    }
    return _probe_answers("version", bodies)


def _probe_answers(endpoint: str, bodies: dict[str, bytes | Answer]) -> list[Broken]:
    """One Broken per body for an endpoint read once at the start (the probe): a bare body is a 200 JSON answer."""
    out = []
    for kind, b in bodies.items():
        ans = b if isinstance(b, Answer) else Answer(200, "application/json", (Send(b),))
        out.append(Broken(endpoint, kind, "probe", lambda api, a=ans: a))
    return out


def _card(**over: Any) -> dict[str, Any]:
    return {"id": MODEL, "object": "model", "max_model_len": 512, **over}


def _models_catalogue() -> list[Broken]:
    lists: dict[str, bytes | Answer] = {
        "valid": _json({"object": "list", "data": [_card()]}),
        "html": b"<html>proxy</html>",
        "not-a-list": b'{"data": "hostile-model"}',
        "array": b"[1]",
        "no-data": b"{}",
        "id-number": _json({"data": [{"id": 7}]}),
        "id-object": _json({"data": [{"id": {"a": 1}}]}),
        "entries-not-objects": _json({"data": [1, "x", None]}),
        "deep": DEEP.encode(),
        "huge-digits": b'{"data": [{"id": "hostile-model", "max_model_len": 1' + b"0" * 6000 + b"}]}",
        "invalid-utf8": b'{"data": [{"id": "hostile-\xff"}]}',
        "lone-surrogate": b'{"data": [{"id": "hostile-model"}, {"id": "\\ud800"}]}',
        "huge-context": _json({"data": [_card(max_model_len=10**30)]}),
        "context-string": _json({"data": [_card(max_model_len="512")]}),
        "big-card": _json({"data": [_card(extra=["x" * 100] * 1000)]}),
        "root-junk": _json({"data": [_card(root={"x": "a\nb: c"}, owned_by=["vllm"])]}),
        "id-newline": _json({"data": [_card(id="a\nb: c # d")]}),
        "many-models": _json({"data": [_card(id=f"m{i}") for i in range(20_000)]}),
        "nul": b"\x00",
        "empty": b"",
        "huge": Answer(200, "application/json", (Flood(b" " * 65536, 12 * MB),)),
        "500": Answer(500, "text/html", (Send(b"<html>err</html>"),)),
        "401": Answer(401, "application/json", (Send(b'{"error": "key"}'),)),
        "cut": Answer(200, "application/json", (Send(b'{"da'), Cut())),
    }
    return _probe_answers("models", lists)


STREAM = _stream_catalogue()
BODY = _body_catalogue()
METRICS = _metrics_catalogue()
VERSION = _version_catalogue()
MODELS = _models_catalogue()
CATALOGUE = STREAM + BODY + METRICS + VERSION + MODELS


# --- the server ------------------------------------------------------------------------------------------------
@dataclass
class HostileServer:
    """Each request gets the next entry of its endpoint's catalogue, round robin."""

    served: set[str] = field(default_factory=set)
    _next: dict[str, Iterator[Broken]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, cat in (("stream", STREAM), ("body", BODY), ("metrics", METRICS), ("version", VERSION)):
            self._next[name] = itertools.cycle(cat)

    def take(self, endpoint: str) -> Broken:
        entry = next(self._next[endpoint])
        self.served.add(entry.name)
        return entry

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * MB)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        prefix = path.split("/v1/")[0] if "/v1/" in path else ""
        if path.endswith("/v1/models"):
            entry = self._models(prefix)
        elif path.endswith("/version"):
            entry = self.take("version")
        elif path.endswith("/metrics"):
            entry = self.take("metrics")
        elif path.endswith(("/v1/completions", "/v1/chat/completions")) and request.method == "POST":
            try:
                req = await request.json()
            except ValueError:
                req = {}
            entry = self.take("stream" if isinstance(req, dict) and req.get("stream") else "body")
        else:
            return web.Response(status=404, text="not found")
        api = "chat" if path.endswith("/chat/completions") else "completions"
        return await self._play(request, entry.build(api))

    def _models(self, prefix: str) -> Broken:
        # "/models-<i>" before /v1 picks a broken list; without it, the valid one
        tail = prefix.rsplit("/", 1)[-1]
        entry = MODELS[int(tail.removeprefix("models-"))] if tail.startswith("models-") else MODELS[0]
        self.served.add(entry.name)
        return entry

    async def _play(self, request: web.Request, ans: Answer) -> web.StreamResponse:
        if ans.steps and isinstance(ans.steps[0], Raw):
            assert request.transport is not None
            request.transport.write(ans.steps[0].data)
            await asyncio.sleep(0.01)  # let the bytes leave before the connection closes
            request.transport.close()
            return web.Response()  # never sent: the connection is gone
        headers = dict(ans.headers)
        if ans.content_type is not None:
            headers["Content-Type"] = ans.content_type
        resp = web.StreamResponse(status=ans.status, headers=headers)
        await resp.prepare(request)
        try:
            for step in ans.steps:
                if isinstance(step, Send):
                    await resp.write(step.data)
                elif isinstance(step, Flood):
                    # 64 KB writes, yielding between them: one flood must not starve the other connections
                    block = step.piece * max(1, 65536 // len(step.piece))
                    for _ in range(max(1, step.total // len(block))):
                        await resp.write(block)
                        await asyncio.sleep(0)
                elif isinstance(step, Pause):
                    await asyncio.sleep(step.s)
                elif isinstance(step, Cut):
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
            await resp.write_eof()
        except (ConnectionError, RuntimeError):  # the client hung up (it read enough): nothing more to send
            pass
        return resp


@contextlib.contextmanager
def hostile_server_in_thread() -> Iterator[tuple[str, HostileServer]]:
    """Serve from a background thread with its own loop; yields (base URL, server) for sync tests."""
    server = HostileServer()
    ready: Future[tuple[str, asyncio.AbstractEventLoop, asyncio.Event]] = Future()

    async def main() -> None:
        runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        stop = asyncio.Event()
        ready.set_result((f"http://127.0.0.1:{runner.addresses[0][1]}", asyncio.get_running_loop(), stop))
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(main()), name="hostile-server", daemon=True)
    thread.start()
    url, loop, stop = ready.result(timeout=30)
    try:
        yield url, server
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
