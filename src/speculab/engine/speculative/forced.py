"""Forced acceptance: the accept decision drawn to given rates instead of by rejection sampling (a cost probe).

vLLM's `rejection_sample_method: "synthetic"` with `synthetic_acceptance_rates`, in the reference engine. The rates
are per-position UNCONDITIONAL: p_j = P(the first j+1 drafted tokens are all accepted), non-increasing, in [0, 1];
a position past the last given rate has rate 0. A step still does all of a real speculative step's work (the
proposer drafts, the target scores K+1 positions); only which drafts are kept is forced: draft j is accepted with the
conditional rate c_j = p_j / p_(j-1) (p_(-1) = 1) while every draft before it was, and the step then emits the
accepted drafts and the target's own token at the first rejected position (after the last draft, the bonus token).

Why: the engine's cost per step depends on how many tokens a step keeps, not on which; forcing acceptance measures
that cost at an acceptance of one's choosing on any prompts. The output is NOT the target's distribution (a forced
draft is kept whatever the target thought of it): never serve it, never judge quality by it.

`forced_accepts` and `verify_forced` are pure functions of their tensors; the accept tests' uniforms come from one
seeded generator of the speculator's (`ForcedAcceptance.seed`), the emitted token's from the request's own, as
in exact verification. Shapes: B rows, K max draft tokens, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from speculab.engine.speculative.verify import VerifyResult, sample_inverse_cdf
from speculab.errors import UserError

FLAG = "--forced-acceptance-rates"
_EXAMPLE = f"e.g. {FLAG} 0.8,0.6,0.4"


@dataclass(frozen=True, slots=True)
class ForcedAcceptance:
    """Per-position unconditional acceptance rates (vLLM's `synthetic_acceptance_rates`) and the accept draws' seed."""

    rates: tuple[float, ...]  # p_j, non-increasing in [0, 1]; positions past the end: 0
    seed: int = 0

    def conditional(self, k: int) -> tuple[float, ...]:
        """c_j = p_j / p_(j-1) for j < k (p_(-1) = 1): the chance draft j is kept given every draft before it was
        (vLLM's `unconditional_to_conditional_rates`; a position after a rate of 0 is never reached: 0)."""
        p = [*self.rates[:k], *[0.0] * max(0, k - len(self.rates))]
        return tuple(pj / prev if prev > 0 else 0.0 for pj, prev in zip(p, [1.0, *p], strict=False))


def parse_forced_rates(text: str) -> tuple[float, ...]:
    """`0.8,0.6,0.4` -> (0.8, 0.6, 0.4): numbers in [0, 1], non-increasing, at least one; a UserError otherwise."""
    parts = [s.strip() for s in text.split(",")]
    if not text.strip() or any(not s for s in parts):
        raise UserError(f"{FLAG} takes comma-separated rates, one per draft position ({_EXAMPLE}), got {text!r}")
    try:
        rates = tuple(float(s) for s in parts)
    except ValueError:
        raise UserError(f"{FLAG}: {text!r} is not a list of numbers ({_EXAMPLE})") from None
    return check_forced_rates(rates)


def check_forced_rates(rates: tuple[float, ...], k: int | None = None) -> tuple[float, ...]:
    """The rates if they are vLLM's synthetic rates for k drafts (at most k of them), else a one-line UserError."""
    bad = next((r for r in rates if not (math.isfinite(r) and 0.0 <= r <= 1.0)), None)
    if bad is not None:
        raise UserError(f"{FLAG}: every rate must be between 0 and 1, got {bad:g}")
    rise = next((j for j in range(1, len(rates)) if rates[j] > rates[j - 1]), None)
    if rise is not None:
        raise UserError(
            f"{FLAG}: the rates are unconditional (P(the first j+1 drafts all accepted)) and cannot rise, but position "
            f"{rise} has {rates[rise]:g} after {rates[rise - 1]:g}; give them non-increasing ({_EXAMPLE})"
        )
    if k is not None and len(rates) > k:
        raise UserError(
            f"{FLAG}: {len(rates)} rates for num_speculative_tokens {k}; give at most {k} (missing positions are 0)"
        )
    return rates


def forced_accepts(
    draft_lens: torch.Tensor,  # [B] int64 in 0..K
    conditional: torch.Tensor,  # [K] float64, c_j
    uniforms: torch.Tensor,  # [B, K] in [0, 1)
) -> torch.Tensor:
    """How many drafts each row keeps [B]: draft j is kept when u_j < c_j and every draft before it was (vLLM's
    synthetic test); a row never keeps more than it drafted."""
    k = uniforms.shape[1]
    in_draft = torch.arange(k, device=uniforms.device)[None, :] < draft_lens[:, None]  # [B, K]
    ok = (uniforms < conditional[None, :]) & in_draft
    return ok.long().cumprod(-1).sum(-1)


def verify_forced(
    draft_tokens: torch.Tensor,  # [B, K] int64, padding beyond draft_lens is ignored
    draft_lens: torch.Tensor,  # [B] int64 in 0..K
    target_probs: torch.Tensor,  # [B, K+1, V] processed target distributions (greedy rows: only the argmax is read)
    greedy: torch.Tensor,  # [B] bool
    num_accepted: torch.Tensor,  # [B] from forced_accepts
    uniforms: torch.Tensor,  # [B, K+1] from verify.draw_uniforms (column draft_lens[b]: the emitted token's)
) -> VerifyResult:
    """The forced prefix of each row's drafts and then the target's own token at the first position not kept: its
    argmax (greedy) or a draw from p at that position (sampled), as plain decoding after that prefix would give."""
    b, k = draft_tokens.shape
    dev = target_probs.device
    draft_lens, num_accepted, greedy = draft_lens.to(dev), num_accepted.to(dev), greedy.to(dev)
    rows = torch.arange(b, device=dev)
    p_j = target_probs[rows, num_accepted]  # [B, V] the distribution at the first position not kept
    final = p_j.argmax(-1)
    if not bool(greedy.all()):
        sampled = sample_inverse_cdf(p_j.double(), uniforms.to(dev)[rows, draft_lens])
        final = torch.where(greedy, final, sampled)
    kept = torch.arange(k, device=dev)[None, :] < num_accepted[:, None]
    tokens = torch.full((b, k + 1), -1, dtype=torch.long, device=dev)
    tokens[:, :k] = torch.where(kept, draft_tokens.to(dev), -1)
    tokens.scatter_(1, num_accepted.unsqueeze(-1), final.unsqueeze(-1))
    return VerifyResult(num_accepted=num_accepted, tokens=tokens)
