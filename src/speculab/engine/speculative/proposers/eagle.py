"""EAGLE proposer: an EAGLE head drafts k tokens per row from the target's own hidden states.

Which feature feeds which position. Committed tokens t_0 .. t_n (t_n is the last, not yet in the target's KV
cache); the target has computed final-norm hidden states h_0 .. h_{n-1} (prefill chunks and verification rows
hand them over through `record_target_hidden`, for the positions whose target KV the engine keeps). Head cache
entry i is (embed(t_{i+1}), h_i) at position i, for i = 0 .. n-1; the entry at n-1 predicts f_n ~ h_n, whose
logits give draft d_1 (the token after t_n). Draft j + 1 comes from entry n + j - 1 = (embed(d_j), f_{n+j-1}),
the head's own prediction standing in for the target feature it has not computed yet.

After verification accepts a of the k drafts, the target has computed h_n .. h_{n+a} at the accepted positions
(and the corrected or bonus token t_{n+a+1} follows): the next `propose` computes entries n .. n+a from those
true features, overwriting the speculative entries n .. n+k-2 that were built from predictions. So the head's
cache holds target features below `head_len` and nothing else is ever trusted; rolling back rejected drafts is
using head_len (as the draft model's cache uses a shorter length). The cache is slot-mirrored: a request uses
slot s in the target's cache and in the head's.

Prefill needs nothing special: the prompt's features arrive with the prefill chunks and the first `propose`
catches the head up over the whole prompt in one forward (entry P-1 uses the first generated token). Steps that
did not speculate (the batch was too large, or the adaptive policy chose k = 0) still record features, so the
next catch-up covers them. Shapes: B rows, K = num_speculative_tokens, V = vocabulary, H = hidden size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from speculab.engine.model import BatchInput, CausalLM, KVCache, consecutive_start
from speculab.engine.speculative.proposers.drafting import assemble_proposal, draft_tokens, timed
from speculab.engine.speculative.proposers.eagle_head import EagleHead
from speculab.engine.speculative.proposers.proposer import DraftSource, Proposal


@dataclass(slots=True)
class _HeadState:
    """One request in the head's cache: entries [0, head_len) came from target features; `pending` follow."""

    head_len: int = 0
    pending: list[torch.Tensor] = field(default_factory=list)  # [n_i, H] features of positions head_len, ...
    num_pending: int = 0
    last: torch.Tensor | None = None  # [H] the feature of entry head_len - 1, to redo it if nothing new arrived

    @property
    def feature_end(self) -> int:
        """Positions [0, feature_end) have target features (in the cache or pending)."""
        return self.head_len + self.num_pending

    def add(self, start: int, hidden: torch.Tensor) -> None:
        """Features [n, H] of positions start .. start + n - 1; an earlier start means the target rolled back."""
        end = self.feature_end
        if start > end:
            raise RuntimeError(f"EAGLE proposer: target features jump from position {end} to {start}")
        if start < end:
            if start >= self.head_len:
                keep, kept = start - self.head_len, []
                for chunk in self.pending:
                    if keep > 0:
                        kept.append(chunk[:keep])
                        keep -= min(keep, chunk.shape[0])
                self.pending, self.num_pending = kept, start - self.head_len
            else:
                self.pending, self.num_pending, self.head_len, self.last = [], 0, start, None
        self.pending.append(hidden)
        self.num_pending += hidden.shape[0]


class EagleProposer:
    """Drafts with an EagleHead over the target's features; returns q for exact verification (as a draft model)."""

    wants_target_hidden = True

    def __init__(
        self,
        head: EagleHead,
        target: CausalLM,
        num_speculative_tokens: int,
        num_slots: int,
        max_len: int,
        seed: int = 0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be at least 1")
        self.head = head
        self.clock = clock  # times the backlog catch-ups (Proposal.backlog_s)
        self.embed = target.model.embed_tokens
        # vLLM's rule: the head's own LM head when its checkpoint has one, the target's otherwise
        self.lm_head = head.lm_head if head.lm_head is not None else target.lm_head
        self.vocab_size = target.config.vocab_size
        # A draft vocabulary scores N of the V tokens: the LM head's rows for them ([N, H], copied once).
        self._draft_ids = head.draft_token_ids()
        weight = self.lm_head.weight
        if self._draft_ids is not None and weight.shape[0] != self._draft_ids.numel():
            weight = weight[self._draft_ids]
        self._lm_weight = weight.detach().contiguous()
        self._k = num_speculative_tokens
        param = next(head.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.cache = KVCache(head.config, num_slots, max_len, dtype=param.dtype, device=param.device)
        self._states: dict[str, _HeadState] = {}
        self.generator = torch.Generator().manual_seed(seed)  # drafts of requests without a seed of their own

    @property
    def num_speculative_tokens(self) -> int:
        return self._k

    def release(self, request_id: str) -> None:
        self._states.pop(request_id, None)

    def calibration_draft(self, rows: int, width: int = 1) -> int:
        """One head forward over `width` entries for each of `rows` rows on head slots 0.. (all free before
        serving), and the draft LM head at the last: width 1 is one draft, a wider one a catch-up. The adaptive
        policy times both at start, so that its first choice at a batch size already knows what a draft costs there
        and what resuming after a run of skipped steps will cost (a try at 16 rows after 32 skipped steps catches up
        over 16 prompts: 100 ms on the demo pair's long prompts). The entries it writes, from position 64, are
        overwritten by a request's catch-up before anything attends to them, as the engine's own calibration.
        Returns the entries it ran (the width is capped by the cache's length)."""
        width = max(1, min(width, self.cache.max_len))
        start = max(0, min(64, self.cache.max_len - width))
        slot_list = list(range(rows))
        tokens = torch.zeros((rows, width), dtype=torch.long, device=self.device)
        positions = (start + torch.arange(width, device=self.device)).expand(rows, width)
        slots = torch.tensor(slot_list, device=self.device)
        batch = BatchInput(tokens, positions, slots, kv_len=start + width, slot_start=consecutive_start(slot_list))
        feature = torch.zeros((rows, width, self.head.config.hidden_size), dtype=self.dtype, device=self.device)
        with torch.inference_mode():
            self._logits(self.head(self.embed(tokens), feature, batch, self.cache)[:, -1])
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return rows * width

    def backlog_tokens(self, rows: Sequence[DraftSource]) -> int:
        """Entries a propose call for these rows would first catch up over in its long forward (see _catch_up):
        what resuming speculation now costs, beyond drafting."""
        total = 0
        for r in rows:
            state = self._states.get(r.request_id)
            if state is not None and state.num_pending > self._k + 1:
                total += state.num_pending
        return total

    def record_target_hidden(
        self,
        request_ids: Sequence[str],
        starts: Sequence[int],  # [B] position of each row's first recorded feature
        hidden: torch.Tensor,  # [B, S, H] the target's final-norm hidden states of one forward
        counts: Sequence[int],  # [B] leading positions of each row whose target KV is kept
    ) -> None:
        """Keep the features of the positions the target just computed and committed."""
        for i, (rid, start, n) in enumerate(zip(request_ids, starts, counts, strict=True)):
            if n > 0:
                self._states.setdefault(rid, _HeadState()).add(start, hidden[i, :n])

    # --- one step -----------------------------------------------------------------------------------
    def _logits(self, features: torch.Tensor) -> torch.Tensor:
        """Draft logits [A, V] float32 from predicted features [A, H]; -inf outside a draft vocabulary."""
        logits = F.linear(features, self._lm_weight).float()  # [A, N]
        if self._draft_ids is None:
            return logits
        full = torch.full((features.shape[0], self.vocab_size), float("-inf"), device=features.device)
        full[:, self._draft_ids] = logits
        return full

    def _entries(self, row: DraftSource, state: _HeadState) -> tuple[int, torch.Tensor, list[int]]:
        """The catch-up for one row: first position, features [n, H] and tokens [n] (t_{i+1} for entry i)."""
        tokens = [*row.prompt_ids, *row.output_ids]
        end = state.feature_end
        if end != len(tokens) - 1:
            raise RuntimeError(
                f"EAGLE proposer: request {row.request_id} has target features for {end} positions but "
                f"{len(tokens)} committed tokens; the engine must record the target's hidden states"
            )
        if state.num_pending:
            start, feats = state.head_len, torch.cat(state.pending)
        else:  # proposing again with nothing new: redo the last entry, whose output is the first draft's
            if state.last is None:
                raise RuntimeError(f"EAGLE proposer: request {row.request_id} has no target features")
            start, feats = end - 1, state.last[None]
        return start, feats, tokens[start + 1 : end + 1]

    def _catch_up(self, rows: list[DraftSource], states: list[_HeadState]) -> tuple[torch.Tensor, list[int], float]:
        """Entries from target features for every row: the predicted feature [A, H] at each row's last one, each
        row's feature end, and the seconds spent on long catch-ups (the backlog: see Proposal).

        Rows with the usual few new positions share one padded forward; rows catching up over a prompt (or steps
        that did not speculate) share another, so a prompt never pads the short rows to its length.
        """
        work = [self._entries(r, s) for r, s in zip(rows, states, strict=True)]
        ends = [start + len(toks) for start, _, toks in work]
        out = torch.empty((len(rows), self.head.config.hidden_size), device=self.device, dtype=self.dtype)
        short = [i for i, (_, _, toks) in enumerate(work) if len(toks) <= self._k + 1]
        long = [i for i in range(len(rows)) if i not in set(short)]

        def run(group: list[int]) -> None:
            width = max(len(work[i][2]) for i in group)
            tokens = torch.zeros((len(group), width), dtype=torch.long)
            positions = torch.full((len(group), width), -1, dtype=torch.long)
            feats = torch.zeros((len(group), width, self.head.config.hidden_size), dtype=self.dtype, device=self.device)
            for r, i in enumerate(group):
                start, f, toks = work[i]
                tokens[r, : len(toks)] = torch.tensor(toks)
                positions[r, : len(toks)] = torch.arange(start, start + len(toks))
                feats[r, : len(toks)] = f.to(self.dtype)
            slot_list = [rows[i].slot for i in group]
            batch = BatchInput(
                tokens=tokens.to(self.device),
                positions=positions.to(self.device),
                slots=torch.tensor(slot_list, device=self.device),
                kv_len=max(ends[i] for i in group),
                slot_start=consecutive_start(slot_list),
            )
            predicted = self.head(self.embed(batch.tokens), feats, batch, self.cache)  # [G, W, H]
            last = torch.tensor([len(work[i][2]) - 1 for i in group], device=self.device)
            out[torch.tensor(group, device=self.device)] = predicted[torch.arange(len(group)), last]

        if short:
            run(short)
        backlog_s = timed(lambda: run(long), self.device, self.clock) if long else 0.0
        for (_, f, _), s, end in zip(work, states, ends, strict=True):
            s.head_len, s.last, s.pending, s.num_pending = end, f[-1], [], 0
        return out, ends, backlog_s

    @torch.inference_mode()
    def propose(self, rows: Sequence[DraftSource], max_drafts: Sequence[int]) -> Proposal:
        b_all, k = len(rows), self._k
        active = [b for b in range(b_all) if min(k, max_drafts[b]) > 0]
        if not active:  # no drafts: q is never read, and pending features wait for the next catch-up
            return assemble_proposal(b_all, k, [], [], torch.empty(0, k), None, self.device)
        act_rows = [rows[b] for b in active]
        caps = [min(k, max_drafts[b]) for b in active]
        states = [self._states.setdefault(r.request_id, _HeadState()) for r in act_rows]
        feature, ends, backlog_s = self._catch_up(act_rows, states)  # [A, H]: f_n per row
        slot_list = [r.slot for r in act_rows]
        slots, slot_start = torch.tensor(slot_list, device=self.device), consecutive_start(slot_list)
        end_t = torch.tensor(ends, device=self.device)
        state = {"feature": feature}

        def step(x: torch.Tensor, j: int, live: torch.Tensor) -> torch.Tensor:
            # Entry n + j = (embed(x_j), f_{n+j}) for rows that still draft; the others write the scratch column.
            positions = torch.where(live, end_t + j, -1)[:, None]  # [A, 1]
            batch = BatchInput(x[:, None], positions, slots, kv_len=max(ends) + j + 1, slot_start=slot_start)
            state["feature"] = self.head(self.embed(batch.tokens), state["feature"][:, None], batch, self.cache)[:, 0]
            return self._logits(state["feature"])

        drafted, q_all = draft_tokens(self._logits(feature), step, act_rows, caps, k, self.generator)
        return assemble_proposal(b_all, k, active, caps, drafted, q_all, self.device, backlog_s)
