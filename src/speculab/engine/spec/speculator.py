"""Speculative decoding as the engine calls it: a proposer's drafts in, exactly verified tokens out.

The engine asks `propose` for drafts, runs one target forward per decode row over [last token, drafts],
and hands the logits to `verify`, which turns them into each request's distribution p exactly as plain
decoding would (`request_probs`: min_tokens bans, temperature, top-k, top-p), runs `verify()` against the
proposer's q, and counts drafts with vLLM's semantics: a draft is one verification step of one request
that had at least one draft token; accepted tokens exclude the target's own (corrected or bonus) token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from speculab.engine.sampling import ban_tokens, request_probs
from speculab.engine.sequence import Sequence
from speculab.engine.spec.proposer import Proposal, Proposer
from speculab.engine.spec.verify import draw_uniforms, verify


@dataclass(slots=True)
class SpecCounters:
    """Engine-wide totals since start (Prometheus counters read them at scrape time)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)  # [k]: drafts whose token at position i was accepted


class Speculator:
    """Implements the engine's `SpeculationHook` with any `Proposer` and exact verification."""

    def __init__(self, proposer: Proposer):
        self.proposer = proposer
        self.num_speculative_tokens = proposer.num_speculative_tokens
        self.counters = SpecCounters(accepted_per_pos=[0] * proposer.num_speculative_tokens)
        self._pending: tuple[list[Sequence], Proposal] | None = None

    def propose(self, seqs: list[Sequence], max_drafts: list[int]) -> list[list[int]]:
        proposal = self.proposer.propose(seqs, max_drafts)
        self._pending = (seqs, proposal)
        lens = proposal.lens.tolist()
        return [row[:n] for row, n in zip(proposal.tokens.tolist(), lens, strict=True)]

    def verify(
        self,
        seqs: list[Sequence],
        drafts: list[list[int]],
        target_logits: torch.Tensor,  # [B, 1 + K, V] float32; position j scores the token after draft j
        generator: torch.Generator,
    ) -> list[list[int]]:
        if self._pending is None or len(self._pending[0]) != len(seqs):
            raise RuntimeError("verify() must follow propose() for the same sequences")
        proposal = self._pending[1]
        self._pending = None
        b, width, v = target_logits.shape
        k = width - 1
        dev = target_logits.device
        lens = torch.tensor([len(d) for d in drafts], dtype=torch.long)
        draft_tokens = torch.full((b, k), -1, dtype=torch.long)
        for i, d in enumerate(drafts):
            draft_tokens[i, : len(d)] = torch.tensor(d, dtype=torch.long)

        # p for every scored position, with the output index each token would get (min_tokens bans depend on it).
        flat_seqs = [s for s in seqs for _ in range(width)]
        out_index = [s.num_output_tokens + j for s in seqs for j in range(width)]
        greedy = [s.params.greedy for s in seqs]
        flat = target_logits.reshape(b * width, v)
        if all(greedy):
            # verify() reads only the argmax of an all-greedy batch, and a greedy p is one-hot at the argmax of the
            # banned logits: those stand in for p, without the softmax over the vocabulary at every position
            p = ban_tokens(flat, flat_seqs, out_index).view(b, width, v)
        else:
            p = request_probs(flat, flat_seqs, out_index).view(b, width, v)
        q = None if proposal.probs is None else proposal.probs[:, :k].to(dev)
        uniforms = draw_uniforms([s.generator or generator for s in seqs], lens.tolist(), greedy, width, dev)
        result = verify(draft_tokens, lens, p, q, torch.tensor(greedy), uniforms)
        emitted = result.emitted()
        self._count(seqs, lens.tolist(), result.num_accepted.tolist())
        return emitted

    def _count(self, seqs: list[Sequence], lens: list[int], accepted: list[int]) -> None:
        c = self.counters
        for s, n, a in zip(seqs, lens, accepted, strict=True):
            if n == 0:
                continue  # no draft this step: vLLM counts a draft only when tokens were proposed
            s.spec.num_drafts += 1
            s.spec.num_draft_tokens += n
            s.spec.num_accepted_tokens += a
            c.num_drafts += 1
            c.num_draft_tokens += n
            c.num_accepted_tokens += a
            for pos in range(a):
                c.accepted_per_pos[pos] += 1

    def release(self, seq: Sequence) -> None:
        self.proposer.release(seq.request_id)
