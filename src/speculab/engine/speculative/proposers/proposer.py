"""The interface every proposer (n-gram lookup, draft model, EAGLE head) offers the engine, through the `Speculator`.

Each step the engine hands the proposer the running sequences it wants drafts for and, per row, the most
drafts it may verify (bounded by max_tokens and the context). The proposer returns a padded batch of draft
tokens, their count per row and, when it has them, its own probabilities q for exact rejection sampling.

Proposers keep per-request state (an n-gram index, a draft KV cache, an EAGLE head's cache) but never need to be
told what was accepted: a sequence's committed tokens only ever grow, so each `propose` call syncs the proposer from
the tokens it is given (accepted drafts, the corrected or bonus token, anything decoded without speculation), and a
draft model or EAGLE head rolls its cache back to the longest prefix it holds that is still committed. The one hook
every proposer needs is `release` when a request finishes or is aborted; an EAGLE proposer also takes the target's
hidden states (`record_target_hidden`, which the engine calls through the speculator when `wants_target_hidden`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch


class DraftParams(Protocol):
    """The sampling parameters a draft model or EAGLE head applies to its logits (as the target does to its own)."""

    @property
    def temperature(self) -> float: ...

    @property
    def top_p(self) -> float: ...

    @property
    def top_k(self) -> int: ...


class DraftSource(Protocol):
    """What a proposer reads from a running request; the engine's `Sequence` satisfies it as is."""

    @property
    def request_id(self) -> str: ...

    @property
    def prompt_ids(self) -> list[int]: ...

    @property
    def output_ids(self) -> list[int]: ...

    @property
    def slot(self) -> int | None: ...

    @property
    def generator(self) -> torch.Generator | None: ...

    @property
    def params(self) -> DraftParams: ...


@dataclass(frozen=True, slots=True)
class Proposal:
    """Draft tokens for a batch: row b proposes tokens[b, :lens[b]]; the rest is -1 padding.

    probs is the proposer's distribution q at each drafted position [B, K, V] (float32, the same
    temperature/top-k/top-p processing as the target's p), or None when q is one-hot at the draft.
    Tensors live on the CPU for n-gram lookup and on the draft model's (or EAGLE head's) device otherwise.
    backlog_s is the time the call spent catching up on a backlog (a new prompt, steps that did not speculate)
    rather than drafting: it is paid whenever speculation resumes, so the adaptive policy leaves it out of what
    drafting costs.
    """

    tokens: torch.Tensor  # [B, K] int64
    lens: torch.Tensor  # [B] int64
    probs: torch.Tensor | None = None  # [B, K, V]
    backlog_s: float = 0.0


class Proposer(Protocol):
    """Proposes up to `num_speculative_tokens` tokens per running sequence."""

    @property
    def num_speculative_tokens(self) -> int: ...

    def propose(self, rows: Sequence[DraftSource], max_drafts: Sequence[int]) -> Proposal:
        """Draft at most min(num_speculative_tokens, max_drafts[b]) tokens for each row."""
        ...

    def release(self, request_id: str) -> None:
        """Forget a finished or aborted request (its n-gram index, its draft cache position)."""
        ...
