"""The OpenAI wire format: request schemas, response and stream-chunk builders, the error body.

Shared by the engine's server and usable by any client; never imports torch. Requests are strict:
a field we do not know is refused with its name (a typo such as `max_token` must not silently fall
back to a default), except for harmless fields real clients send (`user`, `store`, `metadata`, ...),
which are accepted and ignored. Features the engine does not implement (n > 1, penalties, tools,
logit_bias, echo, suffix) are refused with a message that says so, never silently ignored.

What the schema alone can decide, it decides: every number is finite (no NaN or infinity), every integer fits
in 64 bits (token ids, counts and seeds reach torch as int64 tensors), token ids are non-negative, and every
string the server reads is valid Unicode (a lone UTF-16 surrogate such as "\\ud800" is legal JSON but cannot
be tokenized or encoded as UTF-8). Bounds that depend on the model (vocabulary, context) are checked by the
server against the model it serves.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_LOGPROBS = 20
MAX_STOP_STRINGS = 16
MAX_STOP_TOKEN_IDS = 1024  # more than any real use; a longer list is work on every generated token
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1


def valid_unicode(text: str) -> str:
    """`text` unchanged, or ValueError if it holds a lone surrogate (JSON allows "\\ud800"; UTF-8 does not)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"text contains a lone UTF-16 surrogate ({text[e.start]!a} at character {e.start}), "
                "which is not valid Unicode; send valid UTF-8 text"
            ) from None
    return text


Text = Annotated[str, AfterValidator(valid_unicode)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
Count = Annotated[int, Field(ge=1, le=INT64_MAX)]  # max_tokens, n, best_of: at least 1
TokenId = Annotated[int, Field(ge=0, le=INT64_MAX)]  # the vocabulary bound is the model's, checked by the server


class ApiError(Exception):
    """An error the server reports to the client as OpenAI JSON with an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(
    message: str, *, type: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool = False
    continuous_usage_stats: bool = False  # vLLM extension: usage on every chunk


MIN_TEMPERATURE = 1e-5  # the smallest positive temperature served (vLLM's sampling epsilon)


class _Sampling(BaseModel):
    """Fields both endpoints share."""

    model_config = _STRICT

    model: Text
    max_tokens: Count | None = None
    # 0 = greedy; 0 < temperature < MIN_TEMPERATURE is refused (below it logits / temperature overflow float32:
    # 1e-38 made every probability NaN). The engine's SamplingParams treats such values as greedy for library use.
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1, le=INT64_MAX)  # -1 or 0 = off (vLLM accepts -1)
    seed: int | None = Field(default=None, ge=INT64_MIN, le=UINT64_MAX)
    stop: Text | list[Text] | None = None
    stop_token_ids: list[TokenId] | None = Field(default=None, max_length=MAX_STOP_TOKEN_IDS)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Count = 1
    min_tokens: int = Field(default=0, ge=0, le=INT64_MAX)
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    # Accepted and ignored: they do not change what is generated.
    user: Text | None = None
    store: bool | None = None
    metadata: dict[str, Any] | None = None
    service_tier: str | None = None

    @field_validator("temperature")
    @classmethod
    def _temperature_floor(cls, v: float | None) -> float | None:
        if v is not None and 0 < v < MIN_TEMPERATURE:
            raise ValueError(
                f"temperature {v:g} is too small to sample with: send 0 for greedy decoding, or at least "
                f"{MIN_TEMPERATURE:g}"
            )
        return v

    @field_validator("stop")
    @classmethod
    def _stop_non_empty(cls, v: str | list[str] | None) -> str | list[str] | None:
        items = [v] if isinstance(v, str) else (v or [])
        if any(s == "" for s in items):
            raise ValueError("stop strings must be non-empty")
        if len(items) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings")
        return v

    @model_validator(mode="after")
    def _unsupported(self) -> _Sampling:
        if self.n != 1:
            raise ValueError("n > 1 is not supported by this server; send n=1 (or omit it) and repeat the request")
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name) != 0:
                raise ValueError(f"{name} is not supported by this server; omit it or send 0")
        if self.repetition_penalty not in (None, 1.0):
            raise ValueError("repetition_penalty is not supported by this server; omit it or send 1.0")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported by this server; omit it")
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    @property
    def stop_list(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])


class CompletionRequest(_Sampling):
    prompt: Text | list[Text] | list[Int64] | list[list[Int64]]
    logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    echo: bool = False
    suffix: Text | None = None
    best_of: Count | None = None

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, v: Any) -> Any:
        if isinstance(v, list) and v and isinstance(v[0], (str, list)):
            if len(v) != 1:
                raise ValueError("batched prompts are not supported; send one prompt per request")
            v = v[0]
        if (isinstance(v, (str, list))) and len(v) == 0:
            raise ValueError("prompt is empty")
        return v

    @model_validator(mode="after")
    def _unsupported_completion(self) -> CompletionRequest:
        if self.echo:
            raise ValueError("echo is not supported by this server; omit it")
        if self.suffix:
            raise ValueError("suffix is not supported by this server; omit it")
        if self.best_of not in (None, 1):
            raise ValueError("best_of > 1 is not supported by this server; omit it")
        return self


class TextPart(BaseModel):
    model_config = _STRICT
    type: Literal["text"]
    text: Text


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: Literal["system", "developer", "user", "assistant"]
    content: Text | list[TextPart]
    name: Text | None = None

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: Count | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    add_generation_prompt: bool = True  # vLLM extension

    @model_validator(mode="after")
    def _unsupported_chat(self) -> ChatCompletionRequest:
        if self.tools:
            raise ValueError("tools are not supported by this server; omit tools and tool_choice")
        if self.tool_choice not in (None, "none"):
            raise ValueError("tool_choice is not supported by this server; omit it")
        if self.response_format and self.response_format.get("type") not in (None, "text"):
            raise ValueError("response_format other than text is not supported by this server")
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs=true")
        both = self.max_tokens is not None and self.max_completion_tokens is not None
        if both and self.max_tokens != self.max_completion_tokens:
            raise ValueError("max_tokens and max_completion_tokens disagree; send one of them")
        return self

    @property
    def output_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def message_dicts(self) -> list[dict[str, str]]:
        # "developer" is OpenAI's newer name for "system"; chat templates know "system".
        return [{"role": "system" if m.role == "developer" else m.role, "content": m.text()} for m in self.messages]


# --- responses -------------------------------------------------------------------------------------
def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now_s() -> int:
    return int(time.time())


def usage(prompt_tokens: int, completion_tokens: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """OpenAI usage; `extra` carries extension fields (speculative decoding adds its per-request acceptance)."""
    u: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if extra:
        u.update(extra)
    return u


# Logprobs arrive as (token text, logprob, [(alt text, alt logprob), ...]) per token, most likely alternative first.
TokenLP = tuple[str, float, list[tuple[str, float]]]


def completion_logprobs(tokens: list[TokenLP], text_offset0: int = 0) -> dict[str, Any]:
    """The legacy completions logprobs object: tokens, token_logprobs, top_logprobs, text_offset."""
    offsets, pos = [], text_offset0
    for text, _, _ in tokens:
        offsets.append(pos)
        pos += len(text)
    return {
        "tokens": [t for t, _, _ in tokens],
        "token_logprobs": [lp for _, lp, _ in tokens],
        "top_logprobs": [dict(top) for _, _, top in tokens],
        "text_offset": offsets,
    }


def chat_logprobs(tokens: list[TokenLP]) -> dict[str, Any]:
    """The chat logprobs object: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}."""

    def entry(text: str, lp: float) -> dict[str, Any]:
        return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}

    return {"content": [{**entry(t, lp), "top_logprobs": [entry(a, alp) for a, alp in top]} for t, lp, top in tokens]}


def _envelope(
    rid: str, object_: str, created: int, model: str, choices: list[dict[str, Any]], usage_: dict[str, Any] | None
) -> dict[str, Any]:
    """Every response and chunk shares this shape; `usage` is present only when given."""
    body: dict[str, Any] = {"id": rid, "object": object_, "created": created, "model": model, "choices": choices}
    if usage_ is not None:
        body["usage"] = usage_
    return body


def completion_response(
    rid: str,
    model: str,
    created: int,
    text: str,
    finish_reason: str | None,
    usage_: dict[str, Any],
    logprobs: dict[str, Any] | None,
) -> dict[str, Any]:
    # a whole completion has the shape of its one chunk, usage included
    return completion_chunk(rid, model, created, text, finish_reason, logprobs, usage_)


def completion_chunk(
    rid: str,
    model: str,
    created: int,
    text: str,
    finish_reason: str | None,
    logprobs: dict[str, Any] | None = None,
    usage_: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}
    return _envelope(rid, "text_completion", created, model, [choice], usage_)


def chat_response(
    rid: str,
    model: str,
    created: int,
    text: str,
    finish_reason: str | None,
    usage_: dict[str, Any],
    logprobs: dict[str, Any] | None,
) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason}
    return _envelope(rid, "chat.completion", created, model, [choice], usage_)


def chat_chunk(
    rid: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    finish_reason: str | None,
    logprobs: dict[str, Any] | None = None,
    usage_: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
    return _envelope(rid, "chat.completion.chunk", created, model, [choice], usage_)


def usage_chunk(rid: str, model: str, created: int, object_: str, usage_: dict[str, Any]) -> dict[str, Any]:
    """The trailing chunk of stream_options.include_usage: no choices, only usage."""
    return _envelope(rid, object_, created, model, [], usage_)


def models_list(
    names: list[str], created: int, owned_by: str = "speculab", max_model_len: int | None = None
) -> dict[str, Any]:
    data = []
    for name in names:
        m: dict[str, Any] = {"id": name, "object": "model", "created": created, "owned_by": owned_by}
        if max_model_len is not None:
            m["max_model_len"] = max_model_len
        data.append(m)
    return {"object": "list", "data": data}
