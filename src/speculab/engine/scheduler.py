"""Continuous batching: who runs this step, and with how many tokens.

Every step, first-come first-served:
1. every running sequence past its prompt gets a decode row of `decode_width` tokens (1 for plain
   decoding; 1 + draft tokens under speculation) - decodes never wait behind prefills;
2. what is left of the per-step token budget goes to prompts: first those partly prefilled, then new
   requests from the waiting queue while a cache slot is free. A prompt longer than the remaining
   budget is prefilled in chunks over several steps (chunked prefill), so one long prompt cannot
   stall everyone else's decoding.

Each sequence owns one KV cache slot from admission to finish or abort; freeing it makes it reusable at once.
The waiting queue is bounded: past the bound `add` raises `QueueFull` (the server answers 429).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from speculab.engine.sequence import FinishReason, Sequence, SequenceStatus


class QueueFull(RuntimeError):
    """The waiting queue is at its bound; retry later."""


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    max_num_seqs: int = 8  # concurrent sequences = KV cache slots
    max_model_len: int = 2048  # prompt + output tokens per sequence
    max_num_batched_tokens: int = 2048  # token budget per step (decode rows + prefill chunks)
    max_waiting: int = 256  # bound on the waiting queue

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be at least 1")
        if self.max_model_len < 2:
            raise ValueError("max_model_len must be at least 2")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError("max_num_batched_tokens must be at least max_num_seqs (one decode token per sequence)")
        if self.max_waiting < 0:
            raise ValueError("max_waiting must be >= 0")


@dataclass(frozen=True, slots=True)
class PrefillChunk:
    """Prompt tokens [start, start + length) of `seq`, written at those absolute positions."""

    seq: Sequence
    start: int
    length: int

    @property
    def completes_prompt(self) -> bool:
        return self.start + self.length == self.seq.num_prompt_tokens


@dataclass(frozen=True, slots=True)
class SchedulerOutput:
    decode: list[Sequence]
    prefill: list[PrefillChunk]

    @property
    def empty(self) -> bool:
        return not self.decode and not self.prefill


class Scheduler:
    def __init__(self, cfg: SchedulerConfig):
        self.cfg = cfg
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admission order
        self.free_slots: list[int] = list(range(cfg.max_num_seqs - 1, -1, -1))  # pop() hands out slot 0 first

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, seq: Sequence) -> None:
        # Queued requests that a free slot will take at the next step are not really waiting.
        if len(self.waiting) - len(self.free_slots) >= self.cfg.max_waiting:
            raise QueueFull(f"{len(self.waiting)} requests already waiting")
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def schedule(self, decode_width: int = 1) -> SchedulerOutput:
        """Pick this step's decode rows and prefill chunks within the token budget."""
        budget = self.cfg.max_num_batched_tokens
        decode = [s for s in self.running if not s.in_prefill]
        budget -= len(decode) * decode_width
        prefill: list[PrefillChunk] = []
        for seq in self.running:
            if budget <= 0:
                break
            if seq.in_prefill:
                n = min(seq.num_prompt_tokens - seq.num_cached, budget)
                prefill.append(PrefillChunk(seq, seq.num_cached, n))
                budget -= n
        while budget > 0 and self.waiting and self.free_slots:
            seq = self.waiting.popleft()
            seq.slot = self.free_slots.pop()
            seq.status = SequenceStatus.RUNNING
            seq.num_cached = 0
            self.running.append(seq)
            n = min(seq.num_prompt_tokens, budget)
            prefill.append(PrefillChunk(seq, 0, n))
            budget -= n
        return SchedulerOutput(decode, prefill)

    def free(self, seq: Sequence) -> None:
        """Drop a finished sequence from the running set and hand its slot back."""
        if seq in self.running:
            self.running.remove(seq)
        if seq.slot is not None:
            self.free_slots.append(seq.slot)
            seq.slot = None

    def abort(self, request_id: str) -> Sequence | None:
        """Finish a request wherever it is (waiting or running) and free its slot; None if unknown."""
        for seq in self.waiting:
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                seq.finish(FinishReason.ABORT)
                return seq
        for seq in self.running:
            if seq.request_id == request_id:
                seq.finish(FinishReason.ABORT)
                self.free(seq)
                return seq
        return None

    def kv_usage(self) -> float:
        """Fraction of all cache positions holding a live sequence's tokens."""
        used = sum(s.num_cached for s in self.running)
        return used / (self.cfg.max_num_seqs * self.cfg.max_model_len)
