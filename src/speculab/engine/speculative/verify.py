"""Exact verification of drafted tokens against the target: greedy and speculative (rejection) sampling.

A row proposes draft tokens x_1..x_n (n may differ per row; the batch is padded to K). The target scored
the row's last committed token followed by the drafts in one forward, giving K+1 distributions:
p_1 (for x_1) .. p_n (for x_n) and p_{n+1} (for the token after the last draft). The draft's own
distributions q_1..q_n are given in full (a draft model, an EAGLE head) or implied one-hot (n-gram lookup, and any
batch whose rows are all greedy).

Greedy rows accept while x_i equals argmax p_i and then emit argmax p at the first disagreement (or at n+1).
Sampled rows accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection they emit a
token from normalise(max(0, p_i - q_i)); when all n drafts are accepted they emit a bonus token from p_{n+1}.
Each emitted token is then distributed exactly as p given its prefix (Leviathan et al. 2023, Chen et al. 2023).

`verify()` is a pure function of its tensors: randomness enters only as uniforms [B, K+1], which
`draw_uniforms()` takes from each request's own generator, so a request's output depends on its seed alone,
never on which other requests share the batch. Shapes: B rows, K max draft tokens, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """Per row: how many drafts were accepted and the tokens to append (accepted drafts, then one more)."""

    num_accepted: torch.Tensor  # [B] int64 in 0..draft_lens[b]
    tokens: torch.Tensor  # [B, K+1] int64; row b's first num_accepted[b] + 1 entries are emitted, the rest -1

    def emitted(self) -> list[list[int]]:
        """The tokens each row appends, as host lists (one device sync)."""
        counts = (self.num_accepted + 1).tolist()
        return [row[:n] for row, n in zip(self.tokens.tolist(), counts, strict=True)]


def draw_uniforms(
    generators: Sequence[torch.Generator | None],
    draft_lens: Sequence[int],
    greedy: Sequence[bool],
    num_columns: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Uniforms [B, num_columns] in [0, 1): n accept tests then one draw for the emitted token, per row.

    A sampled row takes exactly draft_lens[b] + 1 numbers from its own generator (None: torch's global
    one), so how far its stream advances depends on that request alone. Greedy rows take none.
    Columns beyond a row's draws are 0.5 and never read.
    """
    out = torch.full((len(draft_lens), num_columns), 0.5, dtype=torch.float64)
    for b, (gen, n, is_greedy) in enumerate(zip(generators, draft_lens, greedy, strict=True)):
        if is_greedy:
            continue
        gen_device = gen.device if gen is not None else torch.device("cpu")
        u = torch.rand(int(n) + 1, generator=gen, device=gen_device, dtype=torch.float64)
        out[b, : int(n) + 1] = u.cpu()
    return out.to(device)


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One token per row [N] from probs [N, V] (rows sum to > 0, not necessarily 1) using uniforms u [N].

    float64 cumulative sums; a token with zero probability is never returned (a tie in the cdf moves the
    search past it, and the clamp lands on the last token with positive mass).
    """
    p = probs.double()
    cdf = p.cumsum(-1)  # [N, V]
    target = (u.double() * cdf[:, -1]).unsqueeze(-1)  # [N, 1]
    idx = torch.searchsorted(cdf, target, right=True).squeeze(-1)  # first index with cdf > target
    vocab = torch.arange(p.shape[-1], device=p.device)
    last_positive = torch.where(p > 0, vocab, -1).amax(-1)
    return torch.minimum(idx, last_positive)


def verify(
    draft_tokens: torch.Tensor,  # [B, K] int64, padding beyond draft_lens is ignored
    draft_lens: torch.Tensor,  # [B] int64 in 0..K
    target_probs: torch.Tensor,  # [B, K+1, V] processed target distributions (temperature/top-k/top-p applied);
    # when every row is greedy only its argmax is read, so scores with the same argmax may stand in
    draft_probs: torch.Tensor | None,  # [B, K, V] processed draft distributions, or None: q is one-hot at the draft
    greedy: torch.Tensor,  # [B] bool
    uniforms: torch.Tensor,  # [B, K+1] from draw_uniforms (ignored for greedy rows)
) -> VerifyResult:
    """Accept a prefix of each row's drafts and choose the next token; exact for greedy and for sampling."""
    b, k = draft_tokens.shape
    dev = target_probs.device
    draft_tokens = draft_tokens.to(dev)
    draft_lens = draft_lens.to(dev)
    greedy = greedy.to(dev)
    uniforms = uniforms.to(dev)
    cols = torch.arange(k, device=dev)
    in_draft = cols[None, :] < draft_lens[:, None]  # [B, K]
    safe_drafts = torch.where(in_draft, draft_tokens, 0)  # padding may hold -1; keep gathers in range

    rows = torch.arange(b, device=dev)
    argmax = target_probs.argmax(-1)  # [B, K+1] the greedy choice at every position
    greedy_ok = safe_drafts == argmax[:, :k]
    if bool(greedy.all()):  # fast path, no probabilities needed beyond the argmax
        num_accepted = (greedy_ok & in_draft).long().cumprod(-1).sum(-1)  # [B]
        final = argmax[rows, num_accepted]
    else:
        num_accepted, final = _sampled(
            safe_drafts, draft_lens, in_draft, target_probs, draft_probs, greedy, greedy_ok, argmax, uniforms
        )

    tokens = torch.full((b, k + 1), -1, dtype=torch.long, device=dev)
    accepted_cols = cols[None, :] < num_accepted[:, None]
    tokens[:, :k] = torch.where(accepted_cols, safe_drafts, -1)
    tokens.scatter_(1, num_accepted.unsqueeze(-1), final.unsqueeze(-1))
    return VerifyResult(num_accepted=num_accepted, tokens=tokens)


def _sampled(
    safe_drafts: torch.Tensor,  # [B, K]
    draft_lens: torch.Tensor,  # [B]
    in_draft: torch.Tensor,  # [B, K] bool
    target_probs: torch.Tensor,  # [B, K+1, V]
    draft_probs: torch.Tensor | None,  # [B, K, V]
    greedy: torch.Tensor,  # [B] bool
    greedy_ok: torch.Tensor,  # [B, K] bool
    argmax: torch.Tensor,  # [B, K+1]
    uniforms: torch.Tensor,  # [B, K+1]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rejection sampling for a batch with sampled rows: (num_accepted [B], the token after the prefix [B]).

    Only the gathered probabilities and the one distribution per row that is sampled from are taken to
    float64, never the whole [B, K+1, V] tensor.
    """
    b, k = safe_drafts.shape
    dev = target_probs.device
    rows = torch.arange(b, device=dev)
    p_draft = target_probs[:, :k].gather(-1, safe_drafts.unsqueeze(-1)).squeeze(-1).double()  # [B, K] p_i(x_i)
    if draft_probs is None:
        q_draft = torch.ones_like(p_draft)
    else:
        draft_probs = draft_probs.to(dev)
        q_draft = draft_probs.gather(-1, safe_drafts.unsqueeze(-1)).squeeze(-1).double()  # [B, K] q_i(x_i)

    # A proposer that drafts x with q(x) = 0 broke its contract; such a draft is rejected and the token at
    # that position is drawn from p itself, which keeps the position exact (no division by zero).
    q_zero = q_draft <= 0
    ratio = torch.where(q_zero, torch.zeros_like(p_draft), p_draft / q_draft.clamp_min(1e-300)).clamp(max=1.0)
    sampled_ok = uniforms[:, :k] < ratio  # u in [0, 1): ratio 1 always accepts, ratio 0 never does
    ok = torch.where(greedy[:, None], greedy_ok, sampled_ok) & in_draft  # [B, K]
    num_accepted = ok.long().cumprod(-1).sum(-1)  # [B] length of the accepted prefix

    # The distribution of the token emitted after the accepted prefix, at position j = num_accepted.
    j = num_accepted
    p_j = target_probs[rows, j].double()  # [B, V]
    rejected = j < draft_lens  # otherwise all drafts were accepted: bonus token from p_{n+1}
    jq = j.clamp(max=max(k - 1, 0))
    if k == 0:
        q_j = torch.zeros_like(p_j)
    elif draft_probs is None:
        q_j = torch.zeros_like(p_j).scatter_(-1, safe_drafts[rows, jq].unsqueeze(-1), 1.0)
    else:
        q_j = draft_probs[rows, jq].double()
    residual = (p_j - q_j).clamp_min(0.0)
    # p - q can vanish in floating point even though p(x) < q(x) made us reject (p and q equal up to
    # rounding): then the residual carries no information and p itself is the right distribution.
    q_was_zero = q_zero[rows, jq] if k > 0 else torch.zeros_like(rejected)
    use_residual = rejected & ~q_was_zero & (residual.sum(-1) > 1e-12)
    final_dist = torch.where(use_residual[:, None], residual, p_j)
    # The emitted token's own uniform is column n (after the n accept tests): reusing the rejecting test's
    # uniform would bias it, since given a rejection that number is no longer uniform on [0, 1).
    u_final = uniforms[rows, draft_lens]
    sampled_token = sample_inverse_cdf(final_dist, u_final)
    return num_accepted, torch.where(greedy, argmax[rows, j], sampled_token)
