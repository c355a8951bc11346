"""A small model that shares the target's vocabulary drafts k tokens per step, autoregressively and batched.

The draft keeps its own KV cache with the same slots as the target's (a request uses slot s in both). Per
request it remembers how many leading tokens of the sequence are committed in its cache and which draft
tokens it wrote after them. Each `propose`:
  1. rolls back to the longest prefix of its cache that is still the committed sequence (drafts the target
     accepted stay; rejected ones are dropped by simply using a shorter length),
  2. catches up: one forward over the committed tokens it has not seen (the whole prompt the first time;
     afterwards the target's corrected or bonus token, plus the last accepted draft when all were accepted),
  3. drafts k tokens, one batched forward per token, sampling each from q = processed_probs of its logits
     with the request's temperature / top-k / top-p and the request's generator, and returns q for
     exact rejection sampling (the loop shared with the EAGLE proposer, `speculative/drafting.py`).
Shapes: B rows, K = num_speculative_tokens, V = target vocabulary, S = tokens per row in a forward.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from speculab.engine.model import BatchInput, CausalLM, KVCache, consecutive_start
from speculab.engine.speculative.proposers.drafting import assemble_proposal, draft_tokens, timed
from speculab.engine.speculative.proposers.proposer import DraftSource, Proposal
from speculab.errors import UserError


class DraftVocabularyError(UserError):
    """The draft model cannot propose tokens for this target: their vocabularies differ."""


def _tokenizer_vocab(model_dir: Path) -> dict[str, int] | None:
    """token -> id from tokenizer.json (model vocabulary plus added tokens), or None without one."""
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab = dict(data.get("model", {}).get("vocab", {}) or {})
    for tok in data.get("added_tokens", []) or []:
        vocab[tok["content"]] = tok["id"]
    return vocab


def check_same_vocabulary(target_dir: Path, draft_dir: Path, target_vocab_size: int, draft_vocab_size: int) -> None:
    """Raise DraftVocabularyError unless the draft's tokens mean the same as the target's.

    Tokenizers are compared token by token when both directories have tokenizer.json. Embedding tables may
    be padded to different sizes (Qwen2 does this) as long as the tokenizers agree; without tokenizers the
    vocabulary sizes must be equal.
    """
    target_vocab, draft_vocab = _tokenizer_vocab(target_dir), _tokenizer_vocab(draft_dir)
    if target_vocab is not None and draft_vocab is not None:
        if target_vocab != draft_vocab:
            differing = sorted(set(target_vocab.items()) ^ set(draft_vocab.items()), key=lambda kv: kv[1])[:3]
            raise DraftVocabularyError(
                f"draft model {draft_dir} does not share the target's tokenizer ({len(draft_vocab)} vs "
                f"{len(target_vocab)} tokens; first differences {differing}); use a draft trained with the "
                "target's tokenizer"
            )
        if max(target_vocab.values(), default=-1) >= min(target_vocab_size, draft_vocab_size):
            raise DraftVocabularyError(
                f"draft model {draft_dir} has vocab_size {draft_vocab_size}, too small for the tokenizer's "
                f"{len(target_vocab)} tokens"
            )
        return
    if target_vocab_size != draft_vocab_size:
        raise DraftVocabularyError(
            f"draft model {draft_dir} has vocab_size {draft_vocab_size} but the target has {target_vocab_size}; "
            "speculative decoding needs a draft with the target's vocabulary"
        )


@dataclass(slots=True)
class _DraftState:
    """What the draft cache holds for one request: `committed` sequence tokens, then `tail` draft tokens."""

    committed: int = 0
    tail: list[int] = field(default_factory=list)


def _token_at(row: DraftSource, i: int) -> int:
    n_prompt = len(row.prompt_ids)
    return row.prompt_ids[i] if i < n_prompt else row.output_ids[i - n_prompt]


class DraftModelProposer:
    """Drafts with a small CausalLM; returns its processed probabilities q for exact verification."""

    def __init__(
        self,
        model: CausalLM,
        num_speculative_tokens: int,
        num_slots: int,
        max_len: int,
        target_vocab_size: int,
        seed: int = 0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be at least 1")
        self.model = model
        self._k = num_speculative_tokens
        self.target_vocab_size = target_vocab_size
        param = next(model.parameters())
        self.device = param.device
        self.cache = KVCache(model.config, num_slots, max_len, dtype=param.dtype, device=param.device)
        self._states: dict[str, _DraftState] = {}
        self.clock = clock  # times the backlog catch-ups (Proposal.backlog_s)
        # Requests without a seed of their own draw their drafts from this one.
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def num_speculative_tokens(self) -> int:
        return self._k

    def release(self, request_id: str) -> None:
        self._states.pop(request_id, None)

    # --- one step -----------------------------------------------------------------------------------
    def _valid_prefix(self, row: DraftSource, state: _DraftState, length: int) -> int:
        """Cache positions that still hold the committed sequence: the committed part plus matching drafts."""
        valid = state.committed
        for tok in state.tail:
            if valid >= length or _token_at(row, valid) != tok:
                break
            valid += 1
        # At least the last committed token is fed again: its logits give the first draft's distribution.
        return min(valid, length - 1)

    def _to_vocab(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft logits [N, V_draft] -> [N, V_target]: drop padding rows the target lacks, never draft them."""
        v = self.target_vocab_size
        if logits.shape[-1] >= v:
            return logits[:, :v]
        pad = torch.full((logits.shape[0], v - logits.shape[-1]), float("-inf"), device=logits.device)
        return torch.cat([logits, pad], dim=-1)

    def _catch_up(self, rows: list[DraftSource], starts: list[int], lengths: list[int]) -> tuple[torch.Tensor, float]:
        """Feed each row's committed tokens [start, length) into the cache; logits [B, V] at each row's last one,
        and the seconds spent on the long catch-ups (the backlog: see Proposal).

        Rows whose catch-up is short (the usual 1-2 tokens) share one padded forward; long catch-ups (new
        requests' prompts) share another, so that a prompt never pads the short rows to its length.
        """
        out = torch.empty((len(rows), self.target_vocab_size), device=self.device)
        short = [i for i, (s, n) in enumerate(zip(starts, lengths, strict=True)) if n - s <= self._k + 1]
        long = [i for i in range(len(rows)) if i not in set(short)]

        def run(group: list[int]) -> None:
            width = max(lengths[i] - starts[i] for i in group)
            tokens = torch.zeros((len(group), width), dtype=torch.long)
            positions = torch.full((len(group), width), -1, dtype=torch.long)
            for r, i in enumerate(group):
                n = lengths[i] - starts[i]
                tokens[r, :n] = torch.tensor([_token_at(rows[i], p) for p in range(starts[i], lengths[i])])
                positions[r, :n] = torch.arange(starts[i], lengths[i])
            last = torch.tensor([r * width + lengths[i] - starts[i] - 1 for r, i in enumerate(group)])
            group_slots = [rows[i].slot for i in group]
            batch = BatchInput(
                tokens=tokens.to(self.device),
                positions=positions.to(self.device),
                slots=torch.tensor(group_slots, device=self.device),
                kv_len=max(lengths[i] for i in group),
                slot_start=consecutive_start(group_slots),
            )
            out[torch.tensor(group, device=self.device)] = self._to_vocab(
                self.model(batch, self.cache, logits_rows=last.to(self.device))
            )

        if short:
            run(short)
        backlog_s = timed(lambda: run(long), self.device, self.clock) if long else 0.0
        return out, backlog_s

    @torch.inference_mode()
    def propose(self, rows: Sequence[DraftSource], max_drafts: Sequence[int]) -> Proposal:
        b_all, k = len(rows), self._k
        active = [b for b in range(b_all) if min(k, max_drafts[b]) > 0]
        if not active:  # no drafts: q is never read
            return assemble_proposal(b_all, k, [], [], torch.empty(0, k), None, self.device)
        act_rows = [rows[b] for b in active]
        caps = [min(k, max_drafts[b]) for b in active]
        lengths = [len(r.prompt_ids) + len(r.output_ids) for r in act_rows]
        states = [self._states.setdefault(r.request_id, _DraftState()) for r in act_rows]
        starts = [self._valid_prefix(r, s, n) for r, s, n in zip(act_rows, states, lengths, strict=True)]
        slot_list = [r.slot for r in act_rows]
        slots, slot_start = torch.tensor(slot_list, device=self.device), consecutive_start(slot_list)
        length_t = torch.tensor(lengths, device=self.device)

        def step(x: torch.Tensor, j: int, live: torch.Tensor) -> torch.Tensor:
            # Feed x_j at position L + j for rows that still draft; the others write the scratch column.
            positions = torch.where(live, length_t + j, -1)[:, None]  # [A, 1]
            batch = BatchInput(
                tokens=x[:, None], positions=positions, slots=slots, kv_len=max(lengths) + j + 1, slot_start=slot_start
            )
            return self._to_vocab(self.model(batch, self.cache)[:, 0])

        logits, backlog_s = self._catch_up(act_rows, starts, lengths)  # [A, V]
        drafted, q_all = draft_tokens(logits, step, act_rows, caps, k, self.generator)
        drafted_host = drafted.tolist()  # one device sync for the bookkeeping below
        for i, cap in enumerate(caps):
            # The cache now holds the committed sequence and the drafts fed back (all but the last).
            states[i].committed = lengths[i]
            states[i].tail = drafted_host[i][: cap - 1]
        return assemble_proposal(b_all, k, active, caps, drafted, q_all, self.device, backlog_s)
