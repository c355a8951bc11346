"""The mock server's requests: bodies validated at the edge (unknown fields accepted and ignored, as servers do),
OpenAI-style errors with the right status, and one generation's parsed request and schedule (`Job`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from speculab.mock.script import (
    MockConfig,
    plan_output,
    render_chat,
)
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


class RequestError(Exception):
    """A bad request, turned into an OpenAI-style error response by the handler."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None):
        super().__init__(message)
        self.response = error_response(status, message, "invalid_request_error", code, param)


def one_line(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"]) or "body"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------------------------
# One generation: the parsed request and its schedule


@dataclass(slots=True)
class Job:
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


def parse_job(cfg: MockConfig, body: Any, chat: bool, rid: int) -> Job:
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object", "invalid_body")
    try:
        req: _ChatBody | _CompletionBody = (
            _ChatBody.model_validate(body) if chat else _CompletionBody.model_validate(body)
        )
    except ValidationError as e:
        raise RequestError(400, f"invalid request: {one_line(e)}", "invalid_request") from None
    model = req.model or cfg.models[0]
    if model not in cfg.models:
        served = ", ".join(cfg.models)
        raise RequestError(
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
                raise RequestError(400, "the mock serves one prompt per request", "batch_not_supported", "prompt")
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            if len(prompt) != 1:
                raise RequestError(400, "the mock serves one prompt per request", "batch_not_supported", "prompt")
            prompt = prompt[0]
        if isinstance(prompt, list):  # token ids: one token each
            words = [str(t) for t in prompt]
            prompt_text = " ".join(words)
        else:
            prompt_text, words = prompt, prompt.split()
        max_tokens, top = req.max_tokens, req.logprobs
    n_prompt = len(words)
    if n_prompt == 0:
        raise RequestError(400, "the prompt is empty", "empty_prompt", "messages" if chat else "prompt")
    if n_prompt + (max_tokens or 1) > cfg.max_model_len:
        raise RequestError(
            400,
            f"This model's maximum context length is {cfg.max_model_len} tokens. However, you requested "
            f"{n_prompt + (max_tokens or 0)} tokens ({n_prompt} in the prompt, {max_tokens or 0} in the completion).",
            "context_length_exceeded",
            "max_tokens" if max_tokens else "prompt",
        )
    n_tokens, reason = plan_output(cfg, n_prompt, max_tokens, req.min_tokens, req.ignore_eos)
    opts = req.stream_options
    include_usage = bool(opts and opts.include_usage)
    return Job(
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
