"""Client-side reading of OpenAI responses: stream chunks and whole bodies -> one normalized `Delta`.

Covers `/v1/completions` (`choices[0].text`) and `/v1/chat/completions` (`choices[0].delta.content` when
streaming, `choices[0].message.content` otherwise). Lenient about what servers add, strict about what we
need: a body that is not a JSON object, or whose `choices` is not a list of objects, is `MalformedChunk`.
Only choice 0 is read: the harness always asks for n=1.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ApiKind = Literal["completions", "chat"]


class MalformedChunk(ValueError):
    """The payload is not valid JSON or not shaped like an OpenAI response."""


# No response has a billion tokens: a count past this is garbage (a buggy fork, a counter gone wild), and
# taking it would overflow the float arrays the metrics are folded into (1e308 tokens once ended a bench).
MAX_COUNT = 10**9
USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def as_count(v: Any) -> int | None:
    """`v` as a token/step count: an integer (or integral float) in 0..MAX_COUNT, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (v.is_integer() and 0 <= v <= MAX_COUNT):
        return None
    return int(v) if 0 <= v <= MAX_COUNT else None


@dataclass(frozen=True, slots=True)
class ErrorObject:
    """An OpenAI-style `{"error": {...}}` object, found in a stream or a body."""

    message: str
    type: str | None = None
    code: str | int | None = None


@dataclass(frozen=True, slots=True)
class Delta:
    """What one chunk (or one whole non-streamed body) says."""

    text: str = ""  # generated answer text (content)
    reasoning: str = ""  # generated reasoning text (reasoning_content / reasoning), kept apart from the answer
    usage: dict[str, Any] | None = None  # the chunk's usage object (cumulative when continuous)
    finish_reason: str | None = None
    logprobs: tuple[dict[str, Any], ...] | None = None  # one entry per token: {"token", "logprob", "top"}
    error: ErrorObject | None = None
    has_choices: bool = False  # False for a usage-only chunk (choices == [])
    # the body's (or chunk's) top-level fields outside the OpenAI schema, and choice 0's: an engine's own (llama.cpp's
    # `timings`, vLLM's `metrics`, SGLang's `sglext` and `meta_info`, TensorRT-LLM's `speculative_decoding`, ...),
    # raw and bounded (`engine_fields`); read by the engine's adapter (`engine_said`), never here
    extras: dict[str, Any] | None = None
    choice_extras: dict[str, Any] | None = None

    @property
    def carries_text(self) -> bool:
        """True when the chunk holds generated text: only such chunks count for TTFT, gaps and E2E."""
        return bool(self.text or self.reasoning)

    @property
    def completion_tokens(self) -> int | None:
        """usage.completion_tokens if this chunk carries usage."""
        if self.usage is None:
            return None
        return as_count(self.usage.get("completion_tokens"))

    @property
    def n_logprob_tokens(self) -> int | None:
        return None if self.logprobs is None else len(self.logprobs)

    @property
    def engine_said(self) -> EngineFields:
        """What this response said beyond the OpenAI schema, for the engine's adapter to read."""
        return EngineFields(self.usage, self.extras or {}, self.choice_extras or {})


@dataclass(frozen=True, slots=True)
class EngineFields:
    """What a response said beyond the OpenAI schema, as the wire layer kept it (raw, bounded): its usage object
    (which an engine may extend: speculab's `speculab_spec_decode`), its top-level fields and choice 0's outside the
    schema. Only an engine's adapter knows what they mean (`EngineAdapter.read_response`)."""

    usage: Mapping[str, Any] | None = None
    top: Mapping[str, Any] = field(default_factory=dict)
    choice: Mapping[str, Any] = field(default_factory=dict)


# Deeper than any OpenAI body nests (a chat chunk with top logprobs is 5 levels): past it a body is garbage, and
# the writers that recurse over what is kept of it (requests.jsonl, manifest.json) must never meet it.
MAX_DEPTH = 32
_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # JSON may escape half of a UTF-16 pair, which no file can hold


def loads_untrusted(data: str, *, check_depth: bool = True) -> Any:
    """JSON from a server: parsed, lone surrogates replaced, at most MAX_DEPTH deep (unless the caller keeps none
    of it raw and checks what it keeps: `check_depth=False`, the stream's hot path), or `MalformedChunk`."""
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as e:
        raise MalformedChunk(f"not JSON: {e.msg} in {_clip(data)!r}") from None
    except RecursionError:  # json's C decoder recurses once per level: a server can nest past the stack
        raise MalformedChunk("JSON nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise MalformedChunk(f"not JSON we can read: {_clip(str(e), 80)}") from None
    # Both checks are cheap to skip: a document cannot nest deeper than it has brackets, and nearly every chunk has
    # no surrogate escape. Walking a chunk with top logprobs costs five times its parse, hence check_depth.
    deep = check_depth and data.count("{") + data.count("[") > MAX_DEPTH
    if deep or ("\\u" in data and _LONE_SURROGATE.search(data)):
        obj = _clean(obj, 0)
    return obj


def _clean(v: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise MalformedChunk(f"JSON nested more than {MAX_DEPTH} deep")
    if isinstance(v, str):
        return v.encode("utf-8", "replace").decode("utf-8")
    if isinstance(v, list):
        return [_clean(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {_clean(k, depth + 1): _clean(x, depth + 1) for k, x in v.items()}
    return v


def parse_json(data: str) -> dict[str, Any]:
    """A chunk or body: a JSON object. Its depth is not checked here: `_parse` keeps no nested value raw but an
    engine's fields, whose depth `engine_fields` checks."""
    obj = loads_untrusted(data, check_depth=False)
    if not isinstance(obj, dict):
        raise MalformedChunk(f"expected a JSON object, got {type(obj).__name__}: {_clip(data)!r}")
    return obj


def parse_stream_chunk(data: str, api: ApiKind) -> Delta:
    """One SSE `data:` payload of a streamed response (not `[DONE]`)."""
    return _parse(parse_json(data), api, stream=True)


def parse_body(body: str | bytes, api: ApiKind) -> Delta:
    """A whole non-streamed response body."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    return _parse(parse_json(body), api, stream=False)


def error_from_body(body: str | bytes) -> ErrorObject | None:
    """The error object of an error response, if the body is an OpenAI-style (or FastAPI-style) error."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    try:
        obj = loads_untrusted(body)
    except MalformedChunk:
        return None
    if not isinstance(obj, dict):
        return None
    err = _error(obj)
    if err is None and "detail" in obj:  # FastAPI's default error shape
        err = ErrorObject(message=one_line(str(obj["detail"])))
    return err


def _parse(obj: dict[str, Any], api: ApiKind, *, stream: bool) -> Delta:
    err = _error(obj)
    if err is not None:
        return Delta(error=err)
    usage = _usage(obj.get("usage"))
    extras = engine_fields(obj, _TOP_KEYS)
    choices = obj.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise MalformedChunk("choices is not a list of objects")
    if not choices:
        if usage is None and not stream:
            raise MalformedChunk("response has neither choices nor usage")
        return Delta(usage=usage, has_choices=False, extras=extras)
    c0 = choices[0]
    text, reasoning = _choice_text(c0, api, stream=stream)
    finish = c0.get("finish_reason") or None
    if finish is not None and not isinstance(finish, str):
        raise MalformedChunk(f"choices[0].finish_reason is {type(finish).__name__}, expected a string")
    return Delta(
        text=text,
        reasoning=reasoning,
        usage=usage,
        finish_reason=finish,
        logprobs=_logprobs(c0.get("logprobs"), api),
        has_choices=True,
        extras=extras,
        choice_extras=engine_fields(c0, _CHOICE_KEYS),
    )


def _usage(usage: Any) -> dict[str, Any] | None:
    """The usage object, its counts checked: TPOT and throughput divide by them, so a count that is not one
    (a string, negative, 1e308, NaN) makes the whole response malformed rather than a number nobody can trust."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise MalformedChunk(f"usage is {type(usage).__name__}, expected an object")
    for key in USAGE_COUNTS:
        v = usage.get(key)
        if v is not None and as_count(v) is None:
            raise MalformedChunk(f"usage.{key} is {_clip(repr(v), 40)}, not a token count (0..{MAX_COUNT:.0e})")
    return usage


# What an OpenAI body, chunk and choice carry: everything else on them is an engine's (`Delta.extras`,
# `Delta.choice_extras`). `error` is read on its own (`_error`).
_TOP_KEYS = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier", "error"}
)
_CHOICE_KEYS = frozenset({"index", "text", "message", "delta", "logprobs", "finish_reason"})
# An engine's extra fields are untrusted: at most this many, each an object of at most this much JSON, or a number.
MAX_ENGINE_FIELDS = 16
MAX_ENGINE_FIELD_CHARS = 16_384
# An object over the size is not dropped whole: its members that fit are kept, this many levels down (its counts
# survive a large neighbour, SGLang's per-token logprobs beside its step count); deeper, it is dropped.
_FIT_LEVELS = 2


def engine_fields(obj: dict[str, Any], standard: frozenset[str]) -> dict[str, Any] | None:
    """`obj`'s fields outside `standard` that an engine adds, kept raw but bounded: JSON objects (their depth checked,
    at most MAX_ENGINE_FIELD_CHARS of JSON, else their members that fit) and finite numbers, at most
    MAX_ENGINE_FIELDS; None when there are none. Nothing here knows an engine: its adapter reads what it names."""
    kept: dict[str, Any] = {}
    for key, v in obj.items():
        if key in standard or len(kept) >= MAX_ENGINE_FIELDS:
            continue
        if isinstance(v, dict):
            v = _fitted(_clean(v, 2), _FIT_LEVELS)
            if v is None:
                continue
        elif not _bounded_number(v):
            continue
        kept[str(key)[:80]] = v
    return kept or None


def _fitted(v: Any, levels: int) -> Any:
    """`v` when its JSON fits MAX_ENGINE_FIELD_CHARS; an object that does not, its members that fit (`levels` deep),
    if any; else None."""
    if len(json.dumps(v)) <= MAX_ENGINE_FIELD_CHARS:
        return v
    if not isinstance(v, dict) or levels == 0:
        return None
    members = ((k, _fitted(x, levels - 1)) for k, x in v.items())
    return {k: x for k, x in members if x is not None} or None


def _bounded_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    return (isinstance(v, int) and abs(v) <= 2**53) or (isinstance(v, float) and math.isfinite(v))


def _choice_text(c: dict[str, Any], api: ApiKind, *, stream: bool) -> tuple[str, str]:
    if api == "completions":
        return _str(c.get("text"), "choices[0].text"), ""
    msg = c.get("delta" if stream else "message")
    if msg is None:
        # some servers put the final finish_reason chunk without a delta
        return "", ""
    if not isinstance(msg, dict):
        raise MalformedChunk(f"choices[0].{'delta' if stream else 'message'} is not an object")
    reasoning = msg.get("reasoning_content")
    if reasoning is None:
        reasoning = msg.get("reasoning")
    return _str(msg.get("content"), "content"), _str(reasoning, "reasoning_content")


def _str(v: Any, what: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise MalformedChunk(f"{what} is {type(v).__name__}, expected a string")
    return v


def _logprobs(lp: Any, api: ApiKind) -> tuple[dict[str, Any], ...] | None:
    """Per-token logprobs in one shape: completions use parallel lists, chat a list of objects."""
    if not isinstance(lp, dict):
        return None
    if isinstance(lp.get("content"), list):  # chat
        out = []
        for e in lp["content"]:
            if not isinstance(e, dict):
                raise MalformedChunk("logprobs.content entry is not an object")
            tops = e.get("top_logprobs")
            top = {
                t["token"]: _logprob(t.get("logprob"))
                for t in (tops if isinstance(tops, list) else ())
                if isinstance(t, dict) and isinstance(t.get("token"), str)
            }
            out.append({"token": _token(e.get("token")), "logprob": _logprob(e.get("logprob")), "top": top})
        return tuple(out)
    tokens = lp.get("tokens")
    if isinstance(tokens, list):  # completions
        # parallel lists as the server sent them: a field of the wrong type is read as absent, never indexed
        lps = _list(lp.get("token_logprobs"))
        tops = _list(lp.get("top_logprobs"))
        return tuple(
            {
                "token": _token(t),
                "logprob": _logprob(lps[i]) if i < len(lps) else None,
                "top": (tops[i] if i < len(tops) and isinstance(tops[i], dict) else None) or {},
            }
            for i, t in enumerate(tokens)
        )
    return None


def _logprob(v: Any) -> float | None:
    """A log-probability is a finite number <= 0 (a little slack for rounding); anything else is unknown."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:  # an integer too large for a float
        return None
    return f if math.isfinite(f) and f <= 1e-6 else None


def _token(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _error(obj: dict[str, Any]) -> ErrorObject | None:
    err = obj.get("error")
    if err is None:
        # vLLM's streamed error chunks and some proxies put the fields at the top level
        if obj.get("object") == "error" and "message" in obj:
            return ErrorObject(one_line(str(obj["message"])), _label(obj.get("type")), _label(obj.get("code")))
        return None
    if isinstance(err, dict):
        return ErrorObject(one_line(str(err.get("message", ""))), _label(err.get("type")), _label(err.get("code")))
    return ErrorObject(one_line(str(err)))


def _label(v: Any) -> Any:
    """An error's type or code as a server sent it, if it is a short string or an integer (else None)."""
    if isinstance(v, str):
        return v[:100]
    return v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**9 else None


def one_line(text: str, n: int = 500) -> str:
    """A server's message as a request's error: whitespace runs (newlines too) as one space, at most n characters,
    so that every message a warning or an error line quotes stays on one line."""
    return _clip(" ".join(text[: n * 4].split()), n)


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[:n] + "..."
