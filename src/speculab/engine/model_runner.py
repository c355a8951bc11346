"""Model runner: ragged rows of tokens in, logits out, KV cache written.

A row is one sequence's new tokens at consecutive absolute positions in its cache slot: a prefill
chunk, a decode token, or a decode token followed by draft tokens (speculative verification). Rows of
different lengths are right-padded; padding has position -1 and writes to the cache's scratch column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from speculab.engine.model import BatchInput, CausalLM, KVCache, consecutive_start


@dataclass(frozen=True, slots=True)
class Row:
    slot: int
    tokens: list[int]  # new tokens, len >= 1
    start: int  # absolute position of tokens[0] (= tokens already cached for this sequence)


@dataclass(frozen=True, slots=True)
class RunOutput:
    logits: torch.Tensor | None  # [B, V] (last) or [B, S, V] (all), float32; None when not asked for
    hidden: torch.Tensor | None  # [B, S, hidden] final-norm states in the model's dtype; None when not asked for


class ModelRunner:
    """Owns the model and its preallocated KV cache ([L, slots, Hkv, max_len + 1, D])."""

    def __init__(self, model: CausalLM, num_slots: int, max_len: int):
        self.model = model
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype
        self.cache = KVCache(model.config, num_slots, max_len, self.dtype, self.device)
        self.vocab_size = model.config.vocab_size

    def _batch(self, rows: list[Row]) -> BatchInput:
        s = max(len(r.tokens) for r in rows)
        tokens, positions = [], []
        for r in rows:
            n = len(r.tokens)
            if r.start + n > self.cache.max_len:
                raise ValueError(f"row writes position {r.start + n - 1}, past the cache's {self.cache.max_len}")
            tokens.append(r.tokens + [0] * (s - n))
            positions.append(list(range(r.start, r.start + n)) + [-1] * (s - n))
        kv_len = max(r.start + len(r.tokens) for r in rows)
        slots = [r.slot for r in rows]
        # Built on the host in one call each, then one copy per tensor to the device.
        dev = self.device
        return BatchInput(
            torch.tensor(tokens, dtype=torch.long).to(dev),
            torch.tensor(positions, dtype=torch.long).to(dev),
            torch.tensor(slots, dtype=torch.long).to(dev),
            kv_len,
            consecutive_start(slots),
        )

    @torch.inference_mode()
    def forward(self, rows: list[Row], logits: Literal["none", "last", "all"], hidden: bool = False) -> RunOutput:
        """Write rows into the cache; logits at each row's last token ([B, V]), at every position ([B, S, V]) or
        none; with `hidden`, also the final-norm hidden states [B, S, hidden] (what an EAGLE head drafts from)."""
        batch = self._batch(rows)
        h = self.model.hidden_states(batch, self.cache)  # [B, S, hidden]
        out = None
        if logits == "last":
            s = batch.tokens.shape[1]
            last = torch.tensor([i * s + len(r.tokens) - 1 for i, r in enumerate(rows)], device=self.device)
            out = self.model.logits(h.reshape(-1, h.shape[-1])[last])  # [B, V]
        elif logits == "all":
            out = self.model.logits(h)  # [B, S, V]
        return RunOutput(out, h if hidden else None)

    def last_logits(self, rows: list[Row]) -> torch.Tensor:
        """Logits [B, V] (float32) at each row's last token; the vocabulary projection runs only there."""
        return self.forward(rows, "last").logits  # type: ignore[return-value]

    def all_logits(self, rows: list[Row]) -> torch.Tensor:
        """Logits [B, S, V] (float32) at every position of every row (padding rows hold garbage)."""
        return self.forward(rows, "all").logits  # type: ignore[return-value]

    def write(self, rows: list[Row]) -> None:
        """Write rows into the cache without computing any logits (prefill chunks that do not end a prompt)."""
        self.forward(rows, "none")
