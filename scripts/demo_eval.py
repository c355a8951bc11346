"""Acceptance of the demo draft and of n-gram prompt lookup, measured two ways.

1. Teacher-forced on held-out text: at every position of held-out windows, does the proposer's next token equal
   the target's argmax there? For the draft this is the per-token greedy agreement alpha; the i.i.d. expected
   tokens per target step for k drafts is (1 - alpha^(k+1)) / (1 - alpha).
2. Exact greedy speculative decoding, simulated: the target greedily continues held-out prompts; along that
   trajectory a greedy draft's k proposals are accepted exactly up to the first position where the draft's argmax
   (given the accepted prefix, which is the target's own output) differs, so teacher-forcing the draft on the
   trajectory reproduces every verification step. Prompt lookup is replayed step by step on the same
   trajectories. Counts follow vLLM's metrics: a draft is one verification step that had proposals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from demo_train import autocast, train_logits

from speculab.engine.model import CausalLM


class NgramIndex:
    """Prompt lookup over a growing token sequence: the most recent earlier occurrence of the longest suffix n-gram.

    The index holds every n-gram (min_n <= n <= max_n) that ends before the current end, so a lookup never
    matches the suffix itself; appending a token first registers the n-grams that end at the old end.
    """

    def __init__(self, max_n: int = 4, min_n: int = 2):
        self.max_n, self.min_n = max_n, min_n
        self.tokens: list[int] = []
        self.last_end: dict[tuple[int, ...], int] = {}

    def extend(self, tokens: Sequence[int]) -> None:
        for t in tokens:
            self.append(t)

    def append(self, token: int) -> None:
        end = len(self.tokens)
        for n in range(self.min_n, self.max_n + 1):
            if end >= n:
                self.last_end[tuple(self.tokens[end - n : end])] = end
        self.tokens.append(token)

    def propose(self, k: int) -> list[int]:
        """Up to k tokens that followed the latest earlier occurrence of the longest matching suffix; [] if none."""
        end = len(self.tokens)
        for n in range(self.max_n, self.min_n - 1, -1):
            if end < n:
                continue
            prev_end = self.last_end.get(tuple(self.tokens[end - n : end]))
            if prev_end is not None:
                return self.tokens[prev_end : prev_end + k]
        return []


@dataclass(frozen=True)
class SpecStats:
    """Greedy speculative decoding replayed over target trajectories, with k = num_speculative_tokens."""

    num_speculative_tokens: int
    target_steps: int  # verification (target forward) steps
    tokens_generated: int
    num_drafts: int  # steps that had at least one proposed token
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: list[int]

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / max(self.num_draft_tokens, 1)

    @property
    def mean_acceptance_length(self) -> float:
        """vLLM's definition: 1 + accepted tokens per draft (the bonus/corrected token counts as one)."""
        return 1 + self.num_accepted_tokens / max(self.num_drafts, 1)

    @property
    def tokens_per_target_step(self) -> float:
        return self.tokens_generated / max(self.target_steps, 1)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(
            acceptance_rate=self.acceptance_rate,
            mean_acceptance_length=self.mean_acceptance_length,
            tokens_per_target_step=self.tokens_per_target_step,
        )
        return d


def leading_matches(proposal: Sequence[int], truth: Sequence[int]) -> int:
    n = 0
    for p, t in zip(proposal, truth, strict=False):
        if p != t:
            break
        n += 1
    return n


def replay_draft(matches: Sequence[bool], k: int) -> tuple[int, int, list[int]]:
    """Steps, accepted tokens and accepted-per-position for a draft whose teacher-forced agreement is `matches`."""
    t = steps = accepted = 0
    per_pos = [0] * k
    n = len(matches)
    while t < n:
        a = 0
        while a < k and t + a < n and matches[t + a]:
            a += 1
        for i in range(a):
            per_pos[i] += 1
        steps += 1
        accepted += a
        t += a + 1
    return steps, accepted, per_pos


def replay_ngram(prompt: Sequence[int], generated: Sequence[int], k: int, max_n: int, min_n: int) -> SpecStats:
    index = NgramIndex(max_n, min_n)
    index.extend(prompt)
    t = steps = drafts = draft_tokens = accepted = 0
    per_pos = [0] * k
    while t < len(generated):
        proposal = index.propose(k)
        a = leading_matches(proposal, generated[t:])
        if proposal:
            drafts += 1
            draft_tokens += len(proposal)
        for i in range(a):
            per_pos[i] += 1
        accepted += a
        steps += 1
        index.extend(generated[t : t + a + 1])
        t += a + 1
    return SpecStats(k, steps, len(generated), drafts, draft_tokens, accepted, per_pos)


def merge(stats: Sequence[SpecStats]) -> SpecStats:
    k = stats[0].num_speculative_tokens
    per_pos = [sum(s.accepted_per_pos[i] for s in stats) for i in range(k)]
    return SpecStats(
        k,
        sum(s.target_steps for s in stats),
        sum(s.tokens_generated for s in stats),
        sum(s.num_drafts for s in stats),
        sum(s.num_draft_tokens for s in stats),
        sum(s.num_accepted_tokens for s in stats),
        per_pos,
    )


@torch.no_grad()
def argmax_tokens(model: CausalLM, tokens: torch.Tensor, device: torch.device, batch_size: int) -> torch.Tensor:
    """Greedy next-token predictions [n, S] for inputs [n, S]."""
    out = []
    for i in range(0, tokens.shape[0], batch_size):
        with autocast(device):
            out.append(train_logits(model, tokens[i : i + batch_size]).argmax(-1))
    return torch.cat(out)


@torch.no_grad()
def greedy_generate(model: CausalLM, prompts: torch.Tensor, new_tokens: int, device: torch.device) -> torch.Tensor:
    """[B, P] -> [B, new_tokens] greedy continuation (full recompute per token: simple and cache-free)."""
    seq = prompts
    for _ in range(new_tokens):
        with autocast(device):
            nxt = train_logits(model, seq)[:, -1].argmax(-1, keepdim=True)  # [B, 1]
        seq = torch.cat([seq, nxt], dim=1)
    return seq[:, prompts.shape[1] :]


def teacher_forced_ngram(windows: torch.Tensor, target_argmax: torch.Tensor, max_n: int, min_n: int) -> dict:
    """Per position of each window: prompt lookup's first proposed token (context = the window so far) vs target."""
    positions = proposals = hits = 0
    for row, pred in zip(windows.tolist(), target_argmax.tolist(), strict=True):
        index = NgramIndex(max_n, min_n)
        for tok, want in zip(row, pred, strict=True):
            index.append(tok)
            proposal = index.propose(1)
            positions += 1
            if proposal:
                proposals += 1
                hits += proposal[0] == want
    return {
        "positions": positions,
        "proposal_rate": proposals / positions,
        "hit_rate": hits / positions,  # fraction of all positions where lookup predicts the target's token
        "precision": hits / max(proposals, 1),  # among positions that had a proposal
    }


def expected_tokens_per_step_iid(alpha: float, k: int) -> float:
    """Tokens per target step if each draft token is accepted independently with probability alpha."""
    if alpha >= 1.0:
        return k + 1.0
    return (1 - alpha ** (k + 1)) / (1 - alpha)


@torch.no_grad()
def evaluate_acceptance(
    target: CausalLM,
    draft: CausalLM,
    heldout_windows: torch.Tensor,  # [n, S + 1] held-out token windows
    prompts: torch.Tensor,  # [B, P] held-out prompts for the greedy trajectories
    new_tokens: int,
    eos_id: int,
    device: torch.device,
    batch_size: int,
    k: int = 4,
    max_n: int = 4,
    min_n: int = 2,
) -> dict:
    inputs = heldout_windows[:, :-1]
    t_arg = argmax_tokens(target, inputs, device, batch_size)
    d_arg = argmax_tokens(draft, inputs, device, batch_size)
    alpha = (t_arg == d_arg).float().mean().item()
    labels = heldout_windows[:, 1:]
    teacher_forced = {
        "positions": inputs.numel(),
        "target_top1_accuracy": (t_arg == labels).float().mean().item(),
        "draft_top1_accuracy": (d_arg == labels).float().mean().item(),
        "draft_agreement_alpha": alpha,
        f"draft_expected_tokens_per_step_k{k}_iid": expected_tokens_per_step_iid(alpha, k),
        "ngram": teacher_forced_ngram(inputs.cpu(), t_arg.cpu(), max_n, min_n),
    }
    generated = greedy_generate(target, prompts, new_tokens, device)  # [B, G]
    seq = torch.cat([prompts, generated], dim=1)
    d_traj = argmax_tokens(draft, seq[:, :-1], device, batch_size)[:, prompts.shape[1] - 1 :]  # predicts generated
    draft_stats, ngram_stats = [], []
    for prompt, gen, d_pred in zip(prompts.tolist(), generated.tolist(), d_traj.tolist(), strict=True):
        if eos_id in gen:  # serving stops at eos; later tokens would never be generated
            cut = gen.index(eos_id) + 1
            gen, d_pred = gen[:cut], d_pred[:cut]
        steps, accepted, per_pos = replay_draft([d == g for d, g in zip(d_pred, gen, strict=True)], k)
        draft_stats.append(SpecStats(k, steps, len(gen), steps, steps * k, accepted, per_pos))
        ngram_stats.append(replay_ngram(prompt, gen, k, max_n, min_n))
    return {
        "teacher_forced_heldout": teacher_forced,
        "greedy_replay": {
            "prompts": prompts.shape[0],
            "prompt_tokens": prompts.shape[1],
            "max_new_tokens": new_tokens,
            "draft": merge(draft_stats).as_dict(),
            "ngram": {"prompt_lookup_max": max_n, "prompt_lookup_min": min_n, **merge(ngram_stats).as_dict()},
        },
    }
