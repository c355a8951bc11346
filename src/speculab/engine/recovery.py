"""Containing failures: an exception while running one request fails that request, not the batch or the engine.

A step handles each group of rows (decode rows, then prefill chunks) in two parts:
- *compute* (propose, forward, sample, verify) changes no sequence's tokens; it writes KV only at positions past
  each row's cached prefix, draws from RNGs, and may bump speculation counters;
- *apply* (advance the cache length, append tokens) runs sequence by sequence inside `contained(seq)`, so an
  exception there is that sequence's own: it fails alone, and the sequences before and after it are unaffected.

An exception in compute comes from the whole batched call, so it names no request. `run_isolated` then restores
the group's sequences to the checkpoint taken before the call (cache length, per-request RNG, speculation
counters; the engine's RNG and token counters too) and retries the group one row at a time: a request fails
exactly when it fails on its own. The others carry on as if nothing happened: the KV they wrote past their cached
prefix is rewritten by the retry, and a seeded request draws the same tokens it would have drawn (a bad
neighbour cannot change its output). A fault that every row hits alone (a broken model) fails every row of the
group, which is the right attribution. Failures outside any group (the scheduler) are left to the caller, which
can `Engine.reset()`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch

from speculab.engine.sequence import Sequence


class EngineState(Protocol):
    """What a batched call may change on the engine besides its sequences (`Engine` has it): the sampling RNG and the
    token counters. A protocol, so this module needs nothing of engine.py, which calls it."""

    generator: torch.Generator
    num_prompt_tokens_total: int
    num_generation_tokens_total: int


log = logging.getLogger(__name__)

T = TypeVar("T")


def describe(exc: BaseException) -> str:
    """The one-line message a failed request reports."""
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def contained(seq: Sequence) -> Iterator[None]:
    """Run one sequence's share of a step; an exception fails that sequence (and is logged) instead of escaping."""
    try:
        yield
    except Exception as e:
        log.exception("request %s failed inside the engine step", seq.request_id)
        seq.fail(describe(e))


@dataclass(frozen=True, slots=True)
class _SeqState:
    seq: Sequence
    num_cached: int
    rng: torch.Tensor | None
    spec: tuple[int, int, int, tuple[int, ...]]

    @classmethod
    def of(cls, s: Sequence) -> _SeqState:
        spec = (
            s.spec.num_drafts,
            s.spec.num_draft_tokens,
            s.spec.num_accepted_tokens,
            tuple(s.spec.accepted_per_position),
        )
        return cls(s, s.num_cached, s.generator.get_state() if s.generator is not None else None, spec)

    def restore(self) -> None:
        s = self.seq
        s.num_cached = self.num_cached
        if self.rng is not None and s.generator is not None:
            s.generator.set_state(self.rng)
        s.spec.num_drafts, s.spec.num_draft_tokens, s.spec.num_accepted_tokens, per_pos = self.spec
        s.spec.accepted_per_position = list(per_pos)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a batched compute call may have changed before it raised (a few microseconds to take)."""

    seqs: tuple[_SeqState, ...]
    rng: torch.Tensor
    prompt_tokens: int
    generation_tokens: int

    @classmethod
    def take(cls, engine: EngineState, seqs: list[Sequence]) -> Checkpoint:
        return cls(
            tuple(_SeqState.of(s) for s in seqs),
            engine.generator.get_state(),
            engine.num_prompt_tokens_total,
            engine.num_generation_tokens_total,
        )

    def restore(self, engine: EngineState) -> None:
        for st in self.seqs:
            st.restore()
        engine.generator.set_state(self.rng)
        engine.num_prompt_tokens_total = self.prompt_tokens
        engine.num_generation_tokens_total = self.generation_tokens


def run_isolated(
    engine: EngineState,
    items: list[T],
    run: Callable[[list[T]], list[Sequence]],
    seq_of: Callable[[T], Sequence],
) -> list[Sequence]:
    """`run(items)` (the sequences it touched); if it raises, retry each item alone and fail those that raise."""
    checkpoint = Checkpoint.take(engine, [seq_of(i) for i in items])
    try:
        return run(items)
    except Exception as batch_error:
        if len(items) == 1:
            seq = seq_of(items[0])
            log.exception("request %s failed inside the engine step", seq.request_id)
            seq.fail(describe(batch_error))
            return [seq]
        log.warning(
            "a batched engine call failed (%s); retrying its %d rows one by one", describe(batch_error), len(items)
        )
    checkpoint.restore(engine)
    touched: list[Sequence] = []
    for item in items:
        seq = seq_of(item)
        try:
            touched += run([item])
        except Exception as e:
            log.exception("request %s failed inside the engine step", seq.request_id)
            seq.fail(describe(e))
            touched.append(seq)
    return touched
