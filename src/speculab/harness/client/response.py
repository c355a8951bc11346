"""A response as recorded: what it said (a whole body, or a stream's chunks summed) -> its `RequestRecord`.

The one place a request's record is built, streamed or not, so both kinds keep the same fields the same way:
the server's usage counts, the engines' own per-response fields (`extra`, `speculation`), the conversation turn and the
context it was sent with. A finish reason that means the server gave up is an error here too.
"""

from __future__ import annotations

from typing import Any

from speculab.harness.client.speculation_fields import kept_meta_info, speculation_from_response
from speculab.harness.records import (
    ChunkEvent,
    ErrorCategory,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
    TokenCountSource,
)
from speculab.protocol.chunks import Delta


def build_record(
    spec: RequestSpec,
    said: Delta,
    *,
    scheduled_s: float,
    sent_s: float,
    end_s: float,
    warmup: bool,
    stream: bool,
    error: ErrorInfo | None,
    logprobs: tuple[dict[str, Any], ...] | None,
    chunks: tuple[ChunkEvent, ...] = (),
    token_count_source: TokenCountSource = TokenCountSource.NONE,
    usage_chunk_s: float | None = None,
) -> RequestRecord:
    """The record of one request from what its response said: `error` is the request's final error (None: ok),
    `logprobs` the token logprobs when they were requested; `chunks`, their token counts' source and the trailing
    usage chunk's arrival (seconds) only for a streamed response."""
    extra: dict[str, Any] = {}
    if usage_chunk_s is not None:
        extra["usage_chunk_s"] = usage_chunk_s
    if said.reasoning:
        extra["reasoning_text"] = said.reasoning
    extra |= engine_extras(said.timings, said.metrics, said.meta_info)
    return RequestRecord(
        index=spec.index,
        scheduled_s=scheduled_s,
        sent_s=sent_s,
        end_s=end_s,
        chunks=chunks,
        output_text=said.text,
        prompt_tokens=usage_int(said.usage, "prompt_tokens"),
        completion_tokens=usage_int(said.usage, "completion_tokens"),
        token_count_source=token_count_source,
        finish_reason=said.finish_reason,
        error=error,
        warmup=warmup,
        stream=stream,
        speculation=speculation_from_response(said.usage, said.timings, said.metrics, said.meta_info),
        logprobs=logprobs,
        extra=extra,
        conversation_id=spec.conversation_id,
        turn=spec.turn,
        context_sha256=spec.context_sha256() if spec.turn is not None else None,
    )


def usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    if not usage:
        return None
    v = usage.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def engine_extras(
    timings: dict[str, Any] | None, metrics: dict[str, Any] | None, meta_info: dict[str, Any] | None
) -> dict[str, Any]:
    """The engines' own per-response fields, raw, for `RequestRecord.extra`: llama.cpp `timings` (draft counts and
    `cache_n`, its prefix-cache hit), vLLM `metrics`, SGLang's `meta_info` scalars."""
    extra: dict[str, Any] = {}
    if timings is not None:
        extra["timings"] = timings
    if metrics is not None:
        extra["metrics"] = metrics
    kept = kept_meta_info(meta_info)
    if kept is not None:
        extra["meta_info"] = kept
    return extra


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
