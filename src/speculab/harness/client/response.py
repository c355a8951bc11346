"""A response as recorded: what it said (a whole body, or a stream's chunks summed) -> its `RequestRecord`.

The one place a request's record is built, streamed or not, so both kinds keep the same fields the same way:
the server's usage counts, the engines' own per-response fields (`extra`, `speculation`), the conversation turn and the
context it was sent with. A finish reason that means the server gave up is an error here too.
"""

from __future__ import annotations

import math
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
from speculab.protocol.chunks import Delta, as_count


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
    extra |= engine_extras(said.timings, said.metrics, said.meta_info, said.spec_details)
    if said.choice_extras is not None:  # an engine's own choice fields, bounded by the wire layer
        extra["choice"] = said.choice_extras
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
        speculation=speculation_from_response(
            said.usage, said.timings, said.metrics, said.meta_info, said.spec_details, said.choice_extras
        ),
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


def engine_extras(
    timings: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    meta_info: dict[str, Any] | None,
    spec_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The engines' own per-response fields, raw, for `RequestRecord.extra`: llama.cpp `timings` (draft counts and
    `cache_n`, its prefix-cache hit), vLLM `metrics`, SGLang's `meta_info` scalars and its
    `sglext.spec_tokens_details` (its accept rate and length as the server computed them, beside the counts)."""
    extra: dict[str, Any] = {}
    if timings is not None:
        extra["timings"] = checked_scalars(timings)
    if metrics is not None:
        extra["metrics"] = metrics
    kept = kept_meta_info(meta_info)
    if kept is not None:
        extra["meta_info"] = checked_scalars(kept)
    if spec_details is not None:
        extra["spec_tokens_details"] = checked_scalars(spec_details)  # its histograms (lists) listed as dropped
    return extra


def checked_scalars(fields: dict[str, Any]) -> dict[str, Any]:
    """An engine's per-response scalars as later sums read them: a field named like a count (`*_n`, `*_ct`,
    `*_tokens`, ...) that is not one is dropped, and so is every non-finite or oversized number and every nested
    value, so acceptance and prefix-cache sums never meet a string, a NaN or 1e308. What was dropped is listed
    under `"dropped"`, so a record says the server sent something it could not use."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, v in fields.items():
        if _is_count_name(str(key)):
            if as_count(v) is not None:
                kept[key] = as_count(v)
            else:
                dropped.append(str(key)[:80])
        elif (isinstance(v, str) and len(v) <= 200) or _finite_number(v):
            kept[key] = v
        else:
            dropped.append(str(key)[:80])
    if dropped:
        kept["dropped"] = dropped
    return kept


def _is_count_name(key: str) -> bool:
    return key.endswith(("_n", "_ct", "_tokens", "_accepted", "_num", "_drafts")) or "draft_n" in key


def _finite_number(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return abs(v) <= 2**53
    return isinstance(v, float) and math.isfinite(v) and abs(v) <= 1e15


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
