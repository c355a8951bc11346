"""`StreamState`: a streamed response's bytes with their arrival times in, one `RequestRecord` out; clock-free.

The rules it pins (the scripted-clock unit tests drive it directly, so they are the ones production uses):
- only chunks that carry generated text become `ChunkEvent`s (TTFT, gaps and E2E use them); a trailing
  usage-only chunk is read for its usage and its arrival kept in `extra["usage_chunk_s"]`, but never extends E2E;
- an error object inside the stream, a non-JSON payload, or a stream that ends before `[DONE]` is a failure;
- per-chunk token counts come from the best source: continuous usage stats -> logprobs -> a local tokenizer ->
  one per chunk (flagged); `completion_tokens` is the server's usage when it gives one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speculab.harness.client.endpoint import ApiKind, TokenCounter
from speculab.harness.client.response import ResponseReader, build_record, finish_error, read_nothing
from speculab.harness.records import (
    ChunkEvent,
    ErrorCategory,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
    TokenCountSource,
)
from speculab.protocol.chunks import Delta, MalformedChunk, error_from_body, one_line, parse_stream_chunk
from speculab.protocol.sse import LineTooLong, SSEDecoder


@dataclass(slots=True)
class _PendingChunk:
    t_s: float
    text: str
    cum_tokens: int | None  # usage.completion_tokens carried by this chunk (cumulative), if any
    n_logprobs: int | None


class StreamState:
    """Consumes a streamed response's bytes with their arrival times; knows nothing about sockets or clocks."""

    def __init__(
        self,
        api: ApiKind,
        *,
        logprobs_requested: bool = False,
        count_tokens: TokenCounter | None = None,
        read: ResponseReader = read_nothing,
    ):
        self.api = api
        self.read = read  # the engine's adapter reading its own fields (client.response)
        self.logprobs_requested = logprobs_requested
        self.count_tokens = count_tokens
        self._dec = SSEDecoder()
        self._chunks: list[_PendingChunk] = []
        self._answer: list[str] = []
        self._reasoning: list[str] = []
        self._logprobs: list[dict[str, Any]] = []
        self._untexted_logprob_tokens = 0  # tokens of text-less chunks since the last text chunk (credited to the next)
        self.usage: dict[str, Any] | None = None
        self.usage_chunk_s: float | None = None
        self.finish_reason: str | None = None
        # an engine's own fields, top-level and choice 0's, the latest of each kept: an engine may send one on its
        # final chunk only, or in a chunk of its own (with no choices) before the usage chunk
        self.extras: dict[str, Any] | None = None
        self.choice_extras: dict[str, Any] | None = None
        self.error: ErrorInfo | None = None
        self.done = False  # [DONE] seen
        self.n_events = 0

    @property
    def finished(self) -> bool:
        """No more bytes are needed: [DONE] arrived or the stream already failed."""
        return self.done or self.error is not None

    def feed(self, piece: bytes, t_s: float) -> bool:
        """One network read that arrived at t_s. Returns `finished`."""
        try:
            events = self._dec.feed(piece)
        except LineTooLong as e:
            self.error = ErrorInfo(ErrorCategory.MALFORMED, f"malformed stream: {e}")
            return True
        for ev in events:
            self.n_events += 1
            if ev.is_done:
                self.done = True
                break
            if ev.event == "error":
                err = error_from_body(ev.data)
                self.error = ErrorInfo(ErrorCategory.ERROR_EVENT, err.message if err else one_line(ev.data))
                break
            try:
                delta = parse_stream_chunk(ev.data, self.api)
            except MalformedChunk as e:
                self.error = ErrorInfo(ErrorCategory.MALFORMED, f"malformed stream chunk: {e}")
                break
            self._apply(delta, t_s)
            if self.error is not None:
                break
        return self.finished

    def _apply(self, d: Delta, t_s: float) -> None:
        if d.error is not None:
            self.error = ErrorInfo(ErrorCategory.ERROR_EVENT, d.error.message or "error event in stream")
            return
        if d.usage is not None:
            self.usage = d.usage
            if not d.has_choices:
                self.usage_chunk_s = t_s
        if d.extras is not None:  # a field an engine sends on one chunk only is not lost to later ones
            self.extras = {**(self.extras or {}), **d.extras}
        if d.choice_extras is not None:
            self.choice_extras = {**(self.choice_extras or {}), **d.choice_extras}
        if d.finish_reason:
            self.finish_reason = d.finish_reason
        if d.logprobs:
            self._logprobs.extend(d.logprobs)
        if d.carries_text:
            self._answer.append(d.text)
            self._reasoning.append(d.reasoning)
            n_lp = d.n_logprob_tokens
            if n_lp is not None:
                # a token whose text is held back (a partial UTF-8 character, a special token) arrives in a
                # text-less chunk; like continuous usage, its count goes to the next chunk that carries text
                n_lp += self._untexted_logprob_tokens
                self._untexted_logprob_tokens = 0
            self._chunks.append(_PendingChunk(t_s, d.reasoning + d.text, d.completion_tokens, n_lp))
        elif d.logprobs:
            self._untexted_logprob_tokens += len(d.logprobs)

    def eof(self) -> None:
        """The server closed the stream. Without [DONE] (or at least a finish_reason and no cut event) the
        response is incomplete: dropped mid-stream."""
        if self.finished:
            return
        if self._dec.pending or self.finish_reason is None:
            what = "in the middle of an event" if self._dec.pending else "before [DONE]"
            self.error = ErrorInfo(ErrorCategory.DROPPED, f"stream ended {what} after {self.n_events} events")

    def _chunk_counts(self) -> tuple[list[int | None], TokenCountSource]:
        cs = self._chunks
        if not cs:
            return [], TokenCountSource.NONE
        if all(c.cum_tokens is not None for c in cs):
            counts: list[int | None] = []
            prev = 0
            for c in cs:
                assert c.cum_tokens is not None
                counts.append(max(c.cum_tokens - prev, 0))
                prev = c.cum_tokens
            return counts, TokenCountSource.CONTINUOUS_USAGE
        if self.logprobs_requested and all(c.n_logprobs is not None for c in cs):
            return [c.n_logprobs for c in cs], TokenCountSource.LOGPROBS
        if self.count_tokens is not None:
            return [self.count_tokens(c.text) for c in cs], TokenCountSource.TOKENIZER
        return [1] * len(cs), TokenCountSource.ONE_PER_CHUNK

    def record(
        self,
        *,
        spec: RequestSpec,
        scheduled_s: float,
        sent_s: float,
        end_s: float,
        warmup: bool = False,
        error: ErrorInfo | None = None,
    ) -> RequestRecord:
        """The record of this request; `error` (transport failure) wins over what the stream said."""
        counts, source = self._chunk_counts()
        said = Delta(
            text="".join(self._answer),
            reasoning="".join(self._reasoning),
            usage=self.usage,
            finish_reason=self.finish_reason,
            extras=self.extras,
            choice_extras=self.choice_extras,
        )
        return build_record(
            spec,
            said,
            scheduled_s=scheduled_s,
            sent_s=sent_s,
            end_s=end_s,
            warmup=warmup,
            stream=True,
            error=error or self.error or finish_error(self.finish_reason),
            logprobs=tuple(self._logprobs) if self.logprobs_requested else None,
            chunks=tuple(ChunkEvent(c.t_s, c.text, n) for c, n in zip(self._chunks, counts, strict=True)),
            token_count_source=source,
            usage_chunk_s=self.usage_chunk_s,
            read=self.read,
        )
