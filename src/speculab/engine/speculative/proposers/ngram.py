"""Prompt lookup: draft the tokens that followed the latest earlier occurrence of the sequence's last n tokens.

For n from prompt_lookup_max down to prompt_lookup_min, find the most recent earlier position where the last
n tokens (prompt + generated so far) occurred, and propose the tokens that followed it. Input-grounded text
(summaries, code edits, extraction, RAG answers) copies spans of its prompt, and such drafts are accepted.

Per request the proposer keeps the tokens in a growing numpy buffer and appends only what is new each step,
so a step costs one vectorised scan of the sequence per n (O(L)), never Python work per position.
A match may overlap the suffix itself (periodic text such as "ab ab ab"); the continuation then copies
from the tokens it has just proposed, like an LZ77 back-reference, so periodic text gets full-length drafts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from speculab.engine.speculative.proposers.proposer import DraftSource, Proposal


def find_continuation(tokens: np.ndarray, n_max: int, n_min: int, k: int) -> np.ndarray:
    """Up to k tokens [<= k] that followed the most recent earlier match of the last n tokens (longest n first)."""
    length = len(tokens)
    if k <= 0:
        return tokens[:0]
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        suffix = tokens[length - n :]
        # Candidate starts i in 0..L-n-1, so that at least one token follows the match (i + n <= L - 1).
        starts = np.flatnonzero(tokens[: length - n] == suffix[0])
        for j in range(1, n):
            if starts.size == 0:
                break
            starts = starts[tokens[starts + j] == suffix[j]]
        if starts.size == 0:
            continue
        begin = int(starts[-1]) + n  # first continuation token, the most recent match
        avail = length - begin
        if avail >= k:
            return tokens[begin : begin + k].copy()
        # The match overlaps the suffix: extend periodically, each new token copying the one `period` back.
        period = avail
        out = np.empty(k, dtype=tokens.dtype)
        out[:avail] = tokens[begin:]
        for i in range(avail, k):
            out[i] = out[i - period]
        return out
    return tokens[:0]


@dataclass(slots=True)
class _History:
    """A request's tokens in a growing buffer; only the first `length` entries are valid."""

    buf: np.ndarray = field(default_factory=lambda: np.empty(256, dtype=np.int64))
    length: int = 0

    def sync(self, prompt: Sequence[int], output: Sequence[int]) -> np.ndarray:
        """Append tokens this history has not seen (committed tokens never change) and return the valid view."""
        total = len(prompt) + len(output)
        if total > len(self.buf):
            grown = np.empty(max(total, 2 * len(self.buf)), dtype=np.int64)
            grown[: self.length] = self.buf[: self.length]
            self.buf = grown
        if self.length < len(prompt):
            self.buf[self.length : len(prompt)] = prompt[self.length :]
            self.length = len(prompt)
        start = self.length - len(prompt)
        if start < len(output):
            self.buf[self.length : total] = output[start:]
            self.length = total
        return self.buf[: self.length]


class NgramProposer:
    """Prompt-lookup proposer; q is one-hot, so `Proposal.probs` is None."""

    def __init__(self, num_speculative_tokens: int, prompt_lookup_max: int, prompt_lookup_min: int):
        if not 1 <= prompt_lookup_min <= prompt_lookup_max:
            raise ValueError("need 1 <= prompt_lookup_min <= prompt_lookup_max")
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be at least 1")
        self._k = num_speculative_tokens
        self.prompt_lookup_max = prompt_lookup_max
        self.prompt_lookup_min = prompt_lookup_min
        self._histories: dict[str, _History] = {}

    @property
    def num_speculative_tokens(self) -> int:
        return self._k

    def propose(self, rows: Sequence[DraftSource], max_drafts: Sequence[int]) -> Proposal:
        tokens = torch.full((len(rows), self._k), -1, dtype=torch.long)
        lens = torch.zeros(len(rows), dtype=torch.long)
        for b, (row, cap) in enumerate(zip(rows, max_drafts, strict=True)):
            history = self._histories.setdefault(row.request_id, _History())
            seq = history.sync(row.prompt_ids, row.output_ids)
            draft = find_continuation(seq, self.prompt_lookup_max, self.prompt_lookup_min, min(self._k, cap))
            tokens[b, : len(draft)] = torch.from_numpy(draft)
            lens[b] = len(draft)
        return Proposal(tokens=tokens, lens=lens, probs=None)

    def release(self, request_id: str) -> None:
        self._histories.pop(request_id, None)
