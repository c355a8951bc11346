"""One request's life inside the engine: its sampling parameters, its tokens, and where it stops.

A `Sequence` owns everything that decides *what* is emitted: appending a generated token checks, in
order, max_tokens, eos / stop token ids (honouring min_tokens and ignore_eos) and stop strings, and
holds back text that could still become a stop string so that no streamed text ever runs past a stop.
Appending several tokens at once (speculative decoding) goes through the same per-token loop, so the
cut lands exactly where plain decoding would put it.

The KV cache length is `num_cached`: the number of leading tokens whose keys and values are in the
sequence's cache slot. Rolling back rejected draft tokens is `truncate(n)`; stale cache columns are
overwritten before anything reads them.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Protocol

import torch


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class FinishReason(str, enum.Enum):
    STOP = "stop"  # eos, a stop token id or a stop string
    LENGTH = "length"  # max_tokens or the model's context
    ABORT = "abort"  # the client went away or the request was cancelled
    ERROR = "error"  # the engine failed while running this request (a bug); the others carry on


# Temperatures in (0, GREEDY_TEMPERATURE) are treated as 0 (greedy), as vLLM does below its 1e-5 epsilon: logits
# divided by a tiny temperature overflow float32 (1e-38 turns every logit into +-inf and softmax into NaN), and
# long before that the distribution is one-hot at the argmax to float32 precision, which is what greedy picks.
GREEDY_TEMPERATURE = 1e-5
INT64_MAX = 2**63 - 1


class Detokenizer(Protocol):
    """Incremental token -> text; the concatenation of pushes and flush equals the full decode."""

    def push(self, ids: list[int]) -> str: ...

    def flush(self) -> str: ...


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-request sampling and stopping. temperature 0 = greedy; top_k 0 = off; logprobs = top-N alternatives.

    A temperature below GREEDY_TEMPERATURE is stored as 0: every reader (sampling, speculative verification)
    then sees the same greedy request.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    min_tokens: int = 0
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    logprobs: int | None = None  # None = no logprobs; 0 = chosen token only; N = plus N alternatives

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if 0 < self.temperature < GREEDY_TEMPERATURE:
            object.__setattr__(self, "temperature", 0.0)
        if not 0 < self.top_p <= 1:  # False for NaN too
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.top_k <= INT64_MAX:  # top_k becomes an int64 tensor
            raise ValueError(f"top_k must be in [0, 2**63) (0 = off), got {self.top_k}")
        if any(not 0 <= t <= INT64_MAX for t in self.stop_token_ids):
            raise ValueError("stop_token_ids must be non-negative token ids")
        if self.min_tokens < 0 or self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens must be in [0, max_tokens], got {self.min_tokens}")
        if any(not s for s in self.stop):
            raise ValueError("stop strings must be non-empty")
        if self.seed is not None and not -(2**63) <= self.seed < 2**64:
            raise ValueError("seed must fit in 64 bits")
        if self.logprobs is not None and self.logprobs < 0:
            raise ValueError(f"logprobs must be >= 0, got {self.logprobs}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """The chosen token's log-probability and the top alternatives (token id, logprob), most likely first."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(slots=True)
class SpecStats:
    """Per-request speculation counters (a draft = one verification step of this request)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    forced: bool = False  # the accept decisions were forced to given rates (speculative/forced.py): a cost probe
    # steps that accepted draft position j (0-based), as the engine-wide `accepted_per_pos` counter, per request
    accepted_per_position: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """A finished request's phases in seconds, on the engine's clock: queued -> prefill -> decode."""

    queue_s: float  # arrival -> a cache slot was assigned
    prefill_s: float  # slot assigned -> first token (the whole prompt, chunks included)
    decode_s: float  # first token -> last token


@dataclass(slots=True)
class SequenceOutput:
    """What one engine step produced for one request. Several tokens per step are normal under speculation."""

    request_id: str
    new_token_ids: list[int]
    text: str  # newly streamable text (never past a stop string)
    logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: FinishReason | None
    num_prompt_tokens: int
    num_output_tokens: int
    spec: SpecStats | None = None
    phases: PhaseTimes | None = None  # on the final output of a request that produced tokens
    error: str | None = None  # finish_reason ERROR: what went wrong (the request failed; it has no result)


@dataclass(eq=False)
class Sequence:
    """A request's tokens, state and stopping logic. Identity-compared; the engine mutates it in place."""

    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    eos_token_ids: frozenset[int] = frozenset()
    detokenizer: Detokenizer | None = None
    arrival_s: float = 0.0

    status: SequenceStatus = SequenceStatus.WAITING
    finish_reason: FinishReason | None = None
    output_ids: list[int] = field(default_factory=list)
    slot: int | None = None
    num_cached: int = 0  # leading tokens whose KV is in the slot
    generator: torch.Generator | None = None  # per-request RNG when a seed is given
    spec: SpecStats = field(default_factory=SpecStats)
    scheduled_s: float | None = None  # when a cache slot was assigned
    first_token_s: float | None = None
    last_token_s: float | None = None
    error: str | None = None  # set by fail()

    # text bookkeeping for stop strings: `text` is everything decoded so far (cut at a stop), `sent` how
    # much of it has been handed out.
    text: str = ""
    sent: int = 0
    _stop_string_hit: bool = False
    # tokens and logprobs not yet reported in an event
    _pending_ids: list[int] = field(default_factory=list)
    _pending_logprobs: list[TokenLogprob] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("prompt must contain at least one token")
        if self.params.seed is not None and self.generator is None:
            self.generator = torch.Generator().manual_seed(self.params.seed)

    # --- sizes -------------------------------------------------------------------------------------
    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def in_prefill(self) -> bool:
        """True until the whole prompt is in the cache (its last position yields the first output token)."""
        return self.num_cached < len(self.prompt_ids)

    @property
    def remaining_tokens(self) -> int:
        """Tokens this sequence may still generate under max_tokens."""
        return self.params.max_tokens - len(self.output_ids)

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def truncate(self, n: int) -> None:
        """Roll the KV cache back to its first n tokens (rejected draft tokens); nothing else changes."""
        if not 0 <= n <= self.num_cached:
            raise ValueError(f"cannot truncate a cache of {self.num_cached} tokens to {n}")
        self.num_cached = n

    # --- stopping ----------------------------------------------------------------------------------
    def banned_token_ids(self, num_output_tokens: int | None = None) -> list[int]:
        """Tokens that may not be sampled at an output index (< min_tokens: eos and stop token ids)."""
        n = len(self.output_ids) if num_output_tokens is None else num_output_tokens
        if n >= self.params.min_tokens:
            return []
        return sorted((set() if self.params.ignore_eos else set(self.eos_token_ids)) | set(self.params.stop_token_ids))

    def append(self, token_ids: list[int], logprobs: list[TokenLogprob] | None = None, now_s: float = 0.0) -> int:
        """Append generated tokens in order, stopping exactly where plain decoding would; returns how many were kept.

        Tokens after a stop (eos, stop id, stop string, max_tokens) are dropped: with speculation a
        verified run may run past the stop, and those tokens must never be seen.
        """
        if self.is_finished:
            return 0
        kept = 0
        for i, tok in enumerate(token_ids):
            self.output_ids.append(tok)
            self._pending_ids.append(tok)
            if logprobs is not None:
                self._pending_logprobs.append(logprobs[i])
            kept += 1
            reason = self._check_stop(tok)
            if reason is not None:
                self.finish(reason)
                break
        if kept:
            if self.first_token_s is None:
                self.first_token_s = now_s
            self.last_token_s = now_s
        return kept

    def _check_stop(self, tok: int) -> FinishReason | None:
        p = self.params
        past_min = len(self.output_ids) >= p.min_tokens
        if past_min and ((tok in self.eos_token_ids and not p.ignore_eos) or tok in p.stop_token_ids):
            return FinishReason.STOP  # the stop token itself is counted but never rendered as text
        if self.detokenizer is not None:
            before = len(self.text)
            self.text += self.detokenizer.push([tok])
            if past_min and self._cut_at_stop_string(before):
                return FinishReason.STOP
        if len(self.output_ids) >= p.max_tokens:
            return FinishReason.LENGTH
        return None

    def _cut_at_stop_string(self, before: int) -> bool:
        """Cut `text` at the first stop string that ends after position `before`; True if one was found."""
        if not self.params.stop:
            return False
        # A stop string can only newly appear in a window that reaches into the new text.
        start = max(0, before - max(len(s) for s in self.params.stop) + 1)
        hits = [i for i in (self.text.find(s, start) for s in self.params.stop) if i >= 0]
        if not hits:
            return False
        self.text = self.text[: min(hits)]
        self._stop_string_hit = True
        return True

    def finish(self, reason: FinishReason) -> None:
        if self.is_finished:
            return
        # Text still held inside the detokenizer (an incomplete UTF-8 sequence) is real output, unless a
        # stop string cut the text: everything after the stop is discarded. Released text may complete a
        # stop string; it is cut there too, so no output ever contains a stop string.
        if self.detokenizer is not None and not self._stop_string_hit:
            before = len(self.text)
            self.text += self.detokenizer.flush()
            past_min = len(self.output_ids) >= self.params.min_tokens
            if reason is not FinishReason.ABORT and past_min and self._cut_at_stop_string(before):
                reason = FinishReason.STOP
        self.status = SequenceStatus.FINISHED
        self.finish_reason = reason

    def fail(self, error: str) -> None:
        """Finish with FinishReason.ERROR. Nothing else runs (not even the detokenizer: it may be what failed)."""
        if self.is_finished:
            return
        self.error = error
        self.status = SequenceStatus.FINISHED
        self.finish_reason = FinishReason.ERROR

    def take_output(self) -> SequenceOutput:
        """The event for everything not yet reported; streamable text stops short of a possible stop string."""
        if self.is_finished:
            end = len(self.text)
        else:
            hold = max((len(s) for s in self.params.stop), default=1) - 1
            end = max(self.sent, len(self.text) - hold)
        text, self.sent = self.text[self.sent : end], end
        ids, self._pending_ids = self._pending_ids, []
        lps = None
        if self.params.logprobs is not None:
            lps, self._pending_logprobs = self._pending_logprobs, []
        return SequenceOutput(
            request_id=self.request_id,
            new_token_ids=ids,
            text=text,
            logprobs=lps,
            finished=self.is_finished,
            finish_reason=self.finish_reason,
            num_prompt_tokens=self.num_prompt_tokens,
            num_output_tokens=self.num_output_tokens,
            spec=self.spec if self.spec.num_drafts else None,
            phases=self._phases() if self.is_finished else None,
            error=self.error,
        )

    def _phases(self) -> PhaseTimes | None:
        if self.scheduled_s is None or self.first_token_s is None or self.last_token_s is None:
            return None
        return PhaseTimes(
            queue_s=self.scheduled_s - self.arrival_s,
            prefill_s=self.first_token_s - self.scheduled_s,
            decode_s=self.last_token_s - self.first_token_s,
        )
