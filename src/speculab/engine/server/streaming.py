"""Engine outputs -> OpenAI responses: whole responses and server-sent-event streams, for both endpoints.

One `Rendering` per request knows its endpoint (completions or chat), its options (logprobs, usage on
every chunk, trailing usage chunk) and accumulates what it has sent. Every SSE event ends with a blank
line; a stream ends with `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from speculab.engine.sequence import SequenceOutput, TokenLogprob
from speculab.protocol import openai as oa

UsageExtra = Callable[[SequenceOutput], dict[str, Any] | None]


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


def default_usage_extra(out: SequenceOutput) -> dict[str, Any] | None:
    """Per-request speculation counters in usage (extension field, docs/speculative.md), when speculation ran."""
    if out.spec is None:
        return None
    stats: dict[str, Any] = {
        "drafts": out.spec.num_drafts,
        "draft_tokens": out.spec.num_draft_tokens,
        "accepted_tokens": out.spec.num_accepted_tokens,
        # steps that accepted position j, j = 0.. the last accepted (vLLM's per-position counter, per request)
        "accepted_per_position": list(out.spec.accepted_per_position),
    }
    if out.spec.forced:  # accepted by a draw to given rates, not by the target (--forced-acceptance-rates)
        stats["forced"] = True
    return {"speculab_spec_decode": stats}


@dataclass
class Rendering:
    chat: bool
    request_id: str
    model: str
    created: int
    token_text: Callable[[int], str]
    want_logprobs: bool = False
    include_usage: bool = False
    continuous_usage: bool = False
    usage_extra: UsageExtra = default_usage_extra
    text: list[str] = field(default_factory=list)
    logprobs: list[oa.TokenLP] = field(default_factory=list)
    last: SequenceOutput | None = None

    def _lps(self, lps: list[TokenLogprob] | None) -> list[oa.TokenLP]:
        if not self.want_logprobs or not lps:
            return []
        tt = self.token_text
        return [(tt(lp.token_id), lp.logprob, [(tt(t), v) for t, v in lp.top]) for lp in lps]

    def _usage(self, out: SequenceOutput) -> dict[str, Any]:
        return oa.usage(out.num_prompt_tokens, out.num_output_tokens, self.usage_extra(out))

    def _lp_obj(self, tokens: list[oa.TokenLP], offset: int) -> dict[str, Any] | None:
        if not self.want_logprobs:
            return None
        return oa.chat_logprobs(tokens) if self.chat else oa.completion_logprobs(tokens, offset)

    @property
    def object_name(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"

    # --- streaming -----------------------------------------------------------------------------------
    def first_chunk(self) -> bytes | None:
        """Chat streams open with the assistant role, as OpenAI's do."""
        if not self.chat:
            return None
        u = oa.usage(0, 0) if self.continuous_usage else None
        return sse(
            oa.chat_chunk(
                self.request_id, self.model, self.created, {"role": "assistant", "content": ""}, None, None, u
            )
        )

    def chunk(self, out: SequenceOutput) -> bytes | None:
        """The SSE event for one engine output, or None when it carries nothing to send yet."""
        self.last = out
        lps = self._lps(out.logprobs)
        offset = sum(len(t) for t in self.text)
        self.text.append(out.text)
        self.logprobs += lps
        reason = out.finish_reason.value if out.finished and out.finish_reason is not None else None
        if not out.text and not lps and reason is None:
            return None  # text held back (a possible stop string or an incomplete character)
        u = self._usage(out) if self.continuous_usage else None
        lp = self._lp_obj(lps, offset)
        if self.chat:
            delta = {"content": out.text} if out.text or reason is None else {}
            return sse(oa.chat_chunk(self.request_id, self.model, self.created, delta, reason, lp, u))
        return sse(oa.completion_chunk(self.request_id, self.model, self.created, out.text, reason, lp, u))

    def closing(self) -> bytes:
        """Trailing usage chunk (if asked) and [DONE]."""
        tail = b""
        if self.include_usage and self.last is not None:
            tail += sse(
                oa.usage_chunk(self.request_id, self.model, self.created, self.object_name, self._usage(self.last))
            )
        return tail + sse("[DONE]")

    # --- whole response ------------------------------------------------------------------------------
    def response(self) -> dict[str, Any]:
        out = self.last
        assert out is not None
        text = "".join(self.text)
        reason = out.finish_reason.value if out.finish_reason is not None else None
        lp = self._lp_obj(self.logprobs, 0)
        build = oa.chat_response if self.chat else oa.completion_response
        return build(self.request_id, self.model, self.created, text, reason, self._usage(out), lp)


async def stream_events(
    rendering: Rendering,
    outputs: AsyncIterator[SequenceOutput],
    on_output: Callable[[SequenceOutput], None],
    on_error: Callable[[Exception], None] = lambda _: None,
) -> AsyncIterator[bytes]:
    """SSE bytes for a request's outputs; a failure mid-stream becomes an error event, then [DONE]."""
    first = rendering.first_chunk()
    if first is not None:
        yield first
    try:
        async for out in outputs:
            on_output(out)
            data = rendering.chunk(out)
            if data is not None:
                yield data
    except Exception as e:  # the engine failed this request: tell the client in-band, the status is already sent
        on_error(e)
        yield sse(json.dumps(oa.error_body(f"generation failed: {e}", type="server_error"), ensure_ascii=True))
        yield sse("[DONE]")
        return
    yield rendering.closing()
