"""A response as recorded: what it said (a whole body, or a stream's chunks summed) -> its `RequestRecord`.

The one place a request's record is built, streamed or not, so both kinds keep the same fields the same way:
the server's usage counts, the engine's own per-response fields (`extra`, `speculation`: read by the engine's adapter,
handed in as a `ResponseReader`; the client knows no engine), the conversation turn and the context it was sent with.
A finish reason that means the server gave up is an error here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speculab.harness.records import (
    ChunkEvent,
    ErrorCategory,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
    ResponseReading,
    TokenCountSource,
)
from speculab.protocol.chunks import Delta, EngineFields, as_count

# What reads a response's engine fields: the adapter of the engine the run talks to (`adapters.response_reader`),
# passed down with the endpoint, since the client may not import the servers it measures.
ResponseReader = Callable[[EngineFields], ResponseReading]


def read_nothing(said: EngineFields) -> ResponseReading:
    """A client told of no engine reads none of a response's engine fields."""
    return ResponseReading()


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
    read: ResponseReader = read_nothing,
) -> RequestRecord:
    """The record of one request from what its response said: `error` is the request's final error (None: ok),
    `logprobs` the token logprobs when they were requested; `chunks`, their token counts' source and the trailing
    usage chunk's arrival (seconds) only for a streamed response; `read` the engine's reading of its own fields."""
    extra: dict[str, Any] = {}
    if usage_chunk_s is not None:
        extra["usage_chunk_s"] = usage_chunk_s
    if said.reasoning:
        extra["reasoning_text"] = said.reasoning
    reading = read(said.engine_said)
    extra |= reading.kept
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
        speculation=consistent(reading.speculation) if reading.speculation is not None else None,
        logprobs=logprobs,
        extra=extra,
        conversation_id=spec.conversation_id,
        turn=spec.turn,
        context_sha256=spec.context_sha256() if spec.turn is not None else None,
    )


def usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    if not usage:
        return None
    return as_count(usage.get(key))


def consistent(spec: dict[str, Any]) -> dict[str, Any]:
    """More accepted than drafted tokens, or a position accepted more often than there were steps, is a buggy
    exporter, whichever engine's: those counts are not reported (None), rather than an acceptance rate above 1."""
    accepted, drafted, steps = spec.get("accepted_tokens"), spec.get("draft_tokens"), spec.get("drafts")
    if accepted is not None and drafted is not None and accepted > drafted:
        spec = {**spec, "accepted_tokens": None, "draft_tokens": None}
    per_pos = spec.get("accepted_per_position")
    if per_pos is not None and steps is not None and any(p > steps for p in per_pos):
        spec = {k: v for k, v in spec.items() if k != "accepted_per_position"}
    return spec


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
