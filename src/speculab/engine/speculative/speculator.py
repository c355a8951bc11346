"""Speculative decoding as the engine calls it: a proposer's drafts in, exactly verified tokens out.

The engine asks `propose` for drafts, runs one target forward in which each decode row is [last token, drafts],
and hands the logits to `verify`, which turns them into each request's distribution p exactly as plain
decoding would (`request_probs`: min_tokens bans, temperature, top-k, top-p), runs `verify()` against the
proposer's q, and counts drafts with vLLM's semantics: a draft is one verification step of one request
that had at least one draft token; accepted tokens exclude the target's own (corrected or bonus) token.

How many tokens a step drafts: num_speculative_tokens, unless the step has more decode rows than
`disable_by_batch_size` (vLLM's option: then it drafts none), or an `AdaptivePolicy` chooses k in 0..K from
recent acceptance and measured costs (speculative/adaptive.py). A step in which no row drafts samples exactly as plain
decoding does (the same `request_probs`, `sample` and generators), without the verifier's machinery; its time
still teaches the policy what a plain step costs. With `forced` (forced.py: a cost probe, not the target's
distribution) a step proposes and scores as always, but which drafts are kept is drawn to the given rates; the
counters count what was kept, as always. The policy times the proposer (propose) and the target's forward plus
verification (from propose's return to verify's end) with an injected clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from speculab.engine.sampling import ban_tokens, request_probs, sample
from speculab.engine.sequence import Sequence
from speculab.engine.speculative.adaptive import CATCH_UP_WIDTH, AdaptivePolicy, calibration_rows
from speculab.engine.speculative.forced import ForcedAcceptance, forced_accepts, verify_forced
from speculab.engine.speculative.proposers.proposer import Proposal, Proposer
from speculab.engine.speculative.verify import draw_uniforms, verify


@dataclass(slots=True)
class SpecCounters:
    """Engine-wide totals since start (Prometheus counters read them at scrape time)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)  # [k]: drafts whose token at position i was accepted
    steps_by_k: list[int] = field(default_factory=list)  # [k + 1]: decode steps by the number of drafts chosen
    skipped_by_batch_size: int = 0  # steps with more decode rows than disable_by_batch_size
    skipped_by_adaptive: int = 0  # steps where the adaptive policy chose k = 0


@dataclass(slots=True)
class _Pending:
    seqs: list[Sequence]
    proposal: Proposal | None  # None: the step drafts nothing
    asked: list[int]  # drafts each row was asked for this step
    k: int
    proposer_s: float
    proposed_at: float


class Speculator:
    """Implements the engine's `SpeculationHook` with any `Proposer` and exact verification."""

    def __init__(
        self,
        proposer: Proposer,
        *,
        disable_by_batch_size: int | None = None,
        adaptive: AdaptivePolicy | None = None,
        clock: Callable[[], float] = time.perf_counter,  # the policy's; time.thread_time gives CPU cost on a CPU
        forced: ForcedAcceptance | None = None,  # accept drafts to these rates instead of exactly (a cost probe)
    ):
        self.proposer = proposer
        self.num_speculative_tokens = k = proposer.num_speculative_tokens
        self.disable_by_batch_size = disable_by_batch_size
        self.adaptive = adaptive
        self.clock = clock
        self.counters = SpecCounters(accepted_per_pos=[0] * k, steps_by_k=[0] * (k + 1))
        self.forced = forced
        # the forced accept tests' own stream: a request's generator keeps the draws exact verification takes from it
        self._forced_generator: torch.Generator | None = None
        self._forced_conditional: torch.Tensor | None = None  # [k] c_j, float64
        if forced is not None:
            self._forced_generator = torch.Generator().manual_seed(forced.seed)
            self._forced_conditional = torch.tensor(forced.conditional(k), dtype=torch.float64)
        self._pending: _Pending | None = None
        self._backlog_tokens = 0  # what the proposer had to catch up over when this step's k was chosen

    def _step_k(self, seqs: list[Sequence]) -> int:
        """Drafts for this step: 0 past disable_by_batch_size, else the policy's choice, else k."""
        c = self.counters
        rows = len(seqs)
        if self.disable_by_batch_size is not None and rows > self.disable_by_batch_size:
            c.skipped_by_batch_size += 1
            return 0
        if self.adaptive is None:
            return self.num_speculative_tokens
        backlog = getattr(self.proposer, "backlog_tokens", None)
        pending = backlog(seqs) if callable(backlog) else 0
        self._backlog_tokens = pending
        k = self.adaptive.choose(rows, resume_s=self.adaptive.costs.catch_up(pending))
        c.skipped_by_adaptive += k == 0
        return k

    def propose(self, seqs: list[Sequence], max_drafts: list[int]) -> list[list[int]]:
        t0 = self.clock()
        k = self._step_k(seqs)
        self.counters.steps_by_k[k] += 1
        asked = [min(k, m) for m in max_drafts]
        if not any(asked):  # nothing to draft: the proposer is not even asked (an EAGLE head catches up later)
            t1 = self.clock()
            self._pending = _Pending(seqs, None, asked, 0, t1 - t0, t1)
            return [[] for _ in seqs]
        proposal = self.proposer.propose(seqs, asked)
        t1 = self.clock()
        self._pending = _Pending(seqs, proposal, asked, k, t1 - t0, t1)
        lens = proposal.lens.tolist()
        return [row[:n] for row, n in zip(proposal.tokens.tolist(), lens, strict=True)]

    def verify(
        self,
        seqs: list[Sequence],
        drafts: list[list[int]],
        target_logits: torch.Tensor,  # [B, 1 + K, V] float32; position j scores the token after draft j
        generator: torch.Generator,
    ) -> list[list[int]]:
        pending = self._pending
        if pending is None or len(pending.seqs) != len(seqs):
            raise RuntimeError("verify() must follow propose() for the same sequences")
        proposal = pending.proposal
        self._pending = None
        b, width, v = target_logits.shape
        if proposal is None or not any(drafts):
            emitted = self._plain(seqs, target_logits[:, 0], generator)
            self._observe(pending, b * width, [0] * b, [0] * b)
            return emitted
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
        if self.forced is None:
            result = verify(draft_tokens, lens, p, q, torch.tensor(greedy), uniforms)
        else:
            result = verify_forced(draft_tokens, lens, p, torch.tensor(greedy), self._forced_count(lens, k), uniforms)
        emitted = result.emitted()
        accepted = result.num_accepted.tolist()
        self._count(seqs, lens.tolist(), accepted)
        self._observe(pending, b * width, accepted, lens.tolist())  # rows are padded to the longest draft
        return emitted

    def _forced_count(self, lens: torch.Tensor, k: int) -> torch.Tensor:
        """Drafts each row keeps under forced acceptance [B]: k accept tests per row from the forced stream (a row
        with fewer drafts still takes k, so the stream does not depend on what the proposer found)."""
        assert self._forced_generator is not None and self._forced_conditional is not None
        u = torch.rand(len(lens), k, generator=self._forced_generator, dtype=torch.float64)
        return forced_accepts(lens, self._forced_conditional[:k], u)

    def _plain(self, seqs: list[Sequence], logits: torch.Tensor, generator: torch.Generator) -> list[list[int]]:
        """A step without drafts emits what plain decoding would, the same way (logits [B, V] at the last token)."""
        out_index = [s.num_output_tokens for s in seqs]
        if all(s.params.greedy for s in seqs):
            return [[t] for t in ban_tokens(logits, seqs, out_index).argmax(-1).tolist()]
        return [[t] for t in sample(request_probs(logits, seqs, out_index), seqs, generator)]

    def _observe(self, pending: _Pending, batch_tokens: int, accepted: list[int], proposed: list[int]) -> None:
        """Feed the adaptive policy this step's timings and the verifier's decisions.

        The target's cost is measured from propose's return to the end of verification: the forward over the
        batch's tokens and what verifying them costs, both growing with k.
        """
        if self.adaptive is None:
            return
        costs = self.adaptive.costs
        target_s = self.clock() - pending.proposed_at
        costs.observe_target(batch_tokens, target_s)
        self.adaptive.step_done(pending.proposer_s + target_s)
        backlog_s = pending.proposal.backlog_s if pending.proposal is not None else 0.0
        costs.observe_proposer(len(pending.seqs), pending.k, pending.proposer_s - backlog_s)
        if backlog_s > 0 and self._backlog_tokens > 0:
            costs.observe_catch_up(self._backlog_tokens, backlog_s)
        if pending.k:
            self.adaptive.observe(pending.asked, accepted, proposed)

    def _count(self, seqs: list[Sequence], lens: list[int], accepted: list[int]) -> None:
        c = self.counters
        for s, n, a in zip(seqs, lens, accepted, strict=True):
            if n == 0:
                continue  # no draft this step: vLLM counts a draft only when tokens were proposed
            s.spec.num_drafts += 1
            s.spec.num_draft_tokens += n
            s.spec.num_accepted_tokens += a
            s.spec.forced = self.forced is not None
            c.num_drafts += 1
            c.num_draft_tokens += n
            c.num_accepted_tokens += a
            for pos in range(a):
                c.accepted_per_pos[pos] += 1
            # this request's own per-position counts: acceptance intervals over prompts, not over steps
            per_pos = s.spec.accepted_per_position
            per_pos.extend([0] * (a - len(per_pos)))
            for pos in range(a):
                per_pos[pos] += 1

    def release(self, seq: Sequence) -> None:
        self.proposer.release(seq.request_id)

    def calibrate(self, run_forward: Callable[[int, int], None], max_rows: int) -> None:
        """Time the target's forward on a grid of batch shapes with this speculator's clock (the adaptive
        policy's cost table); without a policy, nothing."""
        if self.adaptive is None:
            return

        def time_forward(rows: int, width: int) -> float:
            t0 = self.clock()
            run_forward(rows, width)
            return self.clock() - t0

        self.adaptive.costs.calibrate(time_forward, max_rows, self.num_speculative_tokens + 1)
        # A proposer that can run one draft on dummy inputs (EAGLE's head) is priced now too, per batch size, as
        # the target is: its real drafts refine the figure (calibration_rows: the target's grid of rows).
        draft = getattr(self.proposer, "calibration_draft", None)
        if callable(draft):
            for rows in calibration_rows(max_rows):
                draft(rows)  # warm-up: the first forward at a shape pays allocation
                for _ in range(3):
                    t0 = self.clock()
                    draft(rows)
                    self.adaptive.costs.observe_proposer(rows, 1, self.clock() - t0)
            # and a catch-up's price per entry, from one forward as wide as a run of skipped steps leaves
            draft(max_rows, CATCH_UP_WIDTH)
            for _ in range(3):
                t0 = self.clock()
                entries = draft(max_rows, CATCH_UP_WIDTH)
                self.adaptive.costs.observe_catch_up(entries, self.clock() - t0)

    @property
    def wants_target_hidden(self) -> bool:
        """True when the proposer drafts from the target's hidden states (EAGLE); the engine then records them."""
        return bool(getattr(self.proposer, "wants_target_hidden", False))

    def record_target_hidden(
        self,
        seqs: list[Sequence],
        starts: list[int],  # [B] absolute position of hidden[b, 0]
        hidden: torch.Tensor,  # [B, S, H] final-norm hidden states of one target forward
        counts: list[int],  # [B] leading positions of each row whose target KV the engine keeps
    ) -> None:
        self.proposer.record_target_hidden([s.request_id for s in seqs], starts, hidden, counts)  # type: ignore[attr-defined]
