"""Client-side reading of OpenAI responses: stream chunks and whole bodies -> one normalized `Delta`.

Covers `/v1/completions` (`choices[0].text`) and `/v1/chat/completions` (`choices[0].delta.content` when
streaming, `choices[0].message.content` otherwise). Lenient about what servers add, strict about what we
need: a body that is not a JSON object, or whose `choices` is not a list of objects, is `MalformedChunk`.
Only choice 0 is read: the harness always asks for n=1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

ApiKind = Literal["completions", "chat"]


class MalformedChunk(ValueError):
    """The payload is not valid JSON or not shaped like an OpenAI response."""


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
    timings: dict[str, Any] | None = None  # llama.cpp per-response timings (draft_n, draft_n_accepted, ...)
    metrics: dict[str, Any] | None = None  # vLLM per-request metrics (speculative_decoding, timing), final chunk/body
    meta_info: dict[str, Any] | None = None  # SGLang meta_info (spec_verify_ct, ...): choices[0] or top level

    @property
    def carries_text(self) -> bool:
        """True when the chunk holds generated text: only such chunks count for TTFT, gaps and E2E."""
        return bool(self.text or self.reasoning)

    @property
    def completion_tokens(self) -> int | None:
        """usage.completion_tokens if this chunk carries usage."""
        if self.usage is None:
            return None
        v = self.usage.get("completion_tokens")
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    @property
    def n_logprob_tokens(self) -> int | None:
        return None if self.logprobs is None else len(self.logprobs)


def parse_json(data: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise MalformedChunk(f"not JSON: {e.msg} in {_clip(data)!r}") from None
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
        obj = json.loads(body)
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    err = _error(obj)
    if err is None and "detail" in obj:  # FastAPI's default error shape
        err = ErrorObject(message=str(obj["detail"]))
    return err


def _parse(obj: dict[str, Any], api: ApiKind, *, stream: bool) -> Delta:
    err = _error(obj)
    if err is not None:
        return Delta(error=err)
    usage = obj.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise MalformedChunk(f"usage is {type(usage).__name__}, expected an object")
    timings = _object(obj, "timings")
    metrics = _object(obj, "metrics")
    meta_info = _object(obj, "meta_info")
    choices = obj.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise MalformedChunk("choices is not a list of objects")
    if not choices:
        if usage is None and not stream:
            raise MalformedChunk("response has neither choices nor usage")
        return Delta(usage=usage, has_choices=False, timings=timings, metrics=metrics, meta_info=meta_info)
    c0 = choices[0]
    text, reasoning = _choice_text(c0, api, stream=stream)
    return Delta(
        text=text,
        reasoning=reasoning,
        usage=usage,
        finish_reason=c0.get("finish_reason") or None,
        logprobs=_logprobs(c0.get("logprobs"), api),
        has_choices=True,
        timings=timings,
        metrics=metrics,
        meta_info=_object(c0, "meta_info") or meta_info,
    )


def _object(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    """obj[key] when it is a JSON object (engines' extension fields: kept as they are), else None."""
    v = obj.get(key)
    return v if isinstance(v, dict) else None


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
            top = {t.get("token"): t.get("logprob") for t in e.get("top_logprobs") or () if isinstance(t, dict)}
            out.append({"token": e.get("token"), "logprob": e.get("logprob"), "top": top})
        return tuple(out)
    tokens = lp.get("tokens")
    if isinstance(tokens, list):  # completions
        lps = lp.get("token_logprobs") or [None] * len(tokens)
        tops = lp.get("top_logprobs") or [None] * len(tokens)
        return tuple(
            {"token": t, "logprob": lps[i] if i < len(lps) else None, "top": (tops[i] if i < len(tops) else None) or {}}
            for i, t in enumerate(tokens)
        )
    return None


def _error(obj: dict[str, Any]) -> ErrorObject | None:
    err = obj.get("error")
    if err is None:
        # vLLM's streamed error chunks and some proxies put the fields at the top level
        if obj.get("object") == "error" and "message" in obj:
            return ErrorObject(str(obj["message"]), obj.get("type"), obj.get("code"))
        return None
    if isinstance(err, dict):
        return ErrorObject(str(err.get("message", "")), err.get("type"), err.get("code"))
    return ErrorObject(str(err))


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[:n] + "..."
