"""A validated OpenAI request -> what the engine runs: prompt token ids within the limits, and SamplingParams.

The schema (speculab.protocol.openai) has already checked types, finiteness, 64-bit ranges and Unicode; this
module checks what depends on the model: the prompt-token limit, top_k against the vocabulary; the engine's own
`validate` (called on admission) checks token ids against the vocabulary and max_tokens against the context.

Tokenizing and chat templating run in a worker thread, never on the event loop: the tokenizer releases the
GIL while it encodes, so other clients are served meanwhile. Before the tokenizer sees a text, a cheap lower
bound on its token count (`min_tokens`, sound by construction: token_bound.py) refuses one that cannot fit, so
a prompt far over the limit costs a linear scan, not seconds of tokenizing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from speculab.engine.sequence import SamplingParams
from speculab.errors import UserError
from speculab.protocol import openai as oa

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


class ServerTokenizer(Protocol):
    eos_token_ids: frozenset[int]

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]: ...

    def min_tokens(self, text: str) -> int:
        """A lower bound on len(encode(text)) that costs no more than a pass over the text (0 if unknown)."""
        ...

    def apply_chat_template(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> str: ...

    def token_text(self, token_id: int) -> str: ...


@dataclass(frozen=True, slots=True)
class PromptLimits:
    max_prompt_tokens: int  # at most the context minus one (a prompt must leave room for one output token)
    max_model_len: int
    vocab_size: int


def _too_long(n: int, limits: PromptLimits, param: str, *, at_least: bool = False) -> oa.ApiError:
    size = f"at least {n}" if at_least else str(n)
    # name the server setting that set the limit, as one: the client cannot change it, whoever runs the server can
    if limits.max_prompt_tokens < limits.max_model_len - 1:
        why = "the server setting --max-prompt-tokens"
    else:
        why = (
            f"the server setting --max-model-len {limits.max_model_len}, the context: prompt + output, one output "
            "token at least"
        )
    return oa.ApiError(
        400,
        f"prompt has {size} tokens; the limit is {limits.max_prompt_tokens} ({why}); send a shorter prompt, or "
        "restart the server with a larger value",
        param=param,
        code="context_length_exceeded",
    )


def _encode_text(tokenizer: ServerTokenizer, text: str, limits: PromptLimits, param: str, special: bool) -> list[int]:
    floor = tokenizer.min_tokens(text)
    if floor > limits.max_prompt_tokens:
        raise _too_long(floor, limits, param, at_least=True)
    ids = tokenizer.encode(text, add_special_tokens=special)
    if len(ids) > limits.max_prompt_tokens:
        raise _too_long(len(ids), limits, param)
    return ids


async def completion_prompt(tokenizer: ServerTokenizer, req: oa.CompletionRequest, limits: PromptLimits) -> list[int]:
    p = req.prompt
    if not isinstance(p, str):  # token ids: the engine checks them against the vocabulary
        ids = list(p)  # type: ignore[arg-type]
        if len(ids) > limits.max_prompt_tokens:
            raise _too_long(len(ids), limits, "prompt")
        return ids  # type: ignore[return-value]
    return await asyncio.to_thread(_encode_text, tokenizer, p, limits, "prompt", True)


async def chat_prompt(tokenizer: ServerTokenizer, req: oa.ChatCompletionRequest, limits: PromptLimits) -> list[int]:
    def render() -> list[int]:
        try:
            text = tokenizer.apply_chat_template(req.message_dicts(), add_generation_prompt=req.add_generation_prompt)
        except UserError as e:  # no template, or the template refused these messages
            raise oa.ApiError(400, str(e), param="messages") from None
        return _encode_text(tokenizer, text, limits, "messages", False)  # templates add BOS themselves

    return await asyncio.to_thread(render)


def sampling_params(
    req: oa.CompletionRequest | oa.ChatCompletionRequest, max_tokens: int, logprobs: int | None, vocab_size: int
) -> SamplingParams:
    """SamplingParams, or ApiError 400 naming the problem (min_tokens > max_tokens, ...)."""
    top_k = req.top_k or 0
    if top_k < 0 or top_k >= vocab_size:  # -1 (vLLM's "off") and any k covering the vocabulary mean no top-k
        top_k = 0
    try:
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            top_k=top_k,
            seed=req.seed,
            min_tokens=req.min_tokens,
            ignore_eos=req.ignore_eos,
            stop=tuple(req.stop_list),
            stop_token_ids=tuple(req.stop_token_ids or ()),
            logprobs=logprobs,
        )
    except ValueError as e:
        raise oa.ApiError(400, str(e)) from None


def completion_max_tokens(req: oa.CompletionRequest) -> int:
    return req.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS


def chat_max_tokens(req: oa.ChatCompletionRequest, num_prompt_tokens: int, max_model_len: int) -> int:
    """The output limit asked for, or whatever fits in the context (OpenAI's chat default)."""
    limit = req.output_limit
    return limit if limit is not None else max(max_model_len - num_prompt_tokens, 1)
