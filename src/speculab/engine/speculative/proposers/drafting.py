"""What autoregressive proposers (a draft model, an EAGLE head) share: k drafts, one batched forward per draft.

Each draft turns the proposer's logits into q with the request's temperature / top-k / top-p (`processed_probs`,
the processing the target's p gets), draws the draft token from q with the request's own generator (greedy rows
take the argmax and draw nothing), and feeds it back through the proposer's `step`. Only rows still drafting
draw, so how far a request's generator advances depends on that request alone, never on its batch.
An all-greedy batch never builds q: each draft is the argmax, so q is one-hot at it, which is what a Proposal
without probs means. Shapes: A active rows, K = num_speculative_tokens, V = the target's vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from speculab.engine.sampling import processed_probs
from speculab.engine.speculative.proposers.proposer import DraftSource, Proposal
from speculab.engine.speculative.verify import sample_inverse_cdf

# (draft tokens x_j [A], j, live [A] bool: rows that draft j + 1 as well) -> logits [A, V] for draft j + 1
DraftStep = Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]


def sample_drafts(
    q: torch.Tensor,  # [A, V]
    rows: Sequence[DraftSource],
    greedy: list[bool],
    live: list[bool],
    generator: torch.Generator,  # for requests without a seed of their own
) -> torch.Tensor:
    """One draft token per row [A] from q, each sampled live row drawing one uniform from its own generator."""
    u = torch.full((len(rows),), 0.5, dtype=torch.float64)
    for b, row in enumerate(rows):
        if live[b] and not greedy[b]:
            gen = row.generator or generator
            u[b] = torch.rand(1, generator=gen, device=gen.device, dtype=torch.float64).item()
    sampled = sample_inverse_cdf(q, u.to(q.device))
    return torch.where(torch.tensor(greedy, device=q.device), q.argmax(-1), sampled)


def draft_tokens(
    first_logits: torch.Tensor,  # [A, V] float32: the proposer's logits for each row's first draft
    step: DraftStep,
    rows: Sequence[DraftSource],
    caps: list[int],  # [A] drafts wanted per row, 1..k
    k: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Drafts [A, K] (row a's first caps[a] are real) and q [A, K, V], or None when every row is greedy."""
    dev = first_logits.device
    a, v = first_logits.shape
    temperature = torch.tensor([float(r.params.temperature) for r in rows], device=dev)
    top_p = torch.tensor([float(r.params.top_p) for r in rows], device=dev)
    top_k = torch.tensor([int(r.params.top_k) for r in rows], device=dev)
    greedy = [float(r.params.temperature) <= 0 for r in rows]
    all_greedy = all(greedy)
    caps_t = torch.tensor(caps, device=dev)
    drafted = torch.full((a, k), -1, dtype=torch.long, device=dev)
    q_all = None if all_greedy else torch.zeros((a, k, v), device=dev)
    logits = first_logits
    for j in range(k):
        if all_greedy:
            x = logits.argmax(-1)
        else:
            q = processed_probs(logits, temperature, top_p, top_k)  # [A, V]
            x = sample_drafts(q, rows, greedy, [j < cap for cap in caps], generator)
            q_all[:, j] = q  # type: ignore[index]
        drafted[:, j] = x
        if j == k - 1 or j + 1 >= max(caps):
            break
        logits = step(x, j, j + 1 < caps_t)
    return drafted, q_all


def timed(fn: Callable[[], None], device: torch.device, clock: Callable[[], float]) -> float:
    """Seconds `fn` took, kernels included (CUDA runs asynchronously: wait for them before reading the clock)."""
    t0 = clock()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return clock() - t0


def assemble_proposal(
    batch_size: int,
    k: int,
    active: list[int],  # [A] batch index of each active row
    caps: list[int],  # [A]
    drafted: torch.Tensor,  # [A, K]
    q_all: torch.Tensor | None,  # [A, K, V]
    device: torch.device,
    backlog_s: float = 0.0,
) -> Proposal:
    """The padded Proposal for the whole batch: inactive rows propose nothing."""
    tokens = torch.full((batch_size, k), -1, dtype=torch.long, device=device)
    lens = torch.zeros(batch_size, dtype=torch.long)
    probs = None if q_all is None else torch.zeros((batch_size, k, q_all.shape[-1]), device=device)
    for i, (b, cap) in enumerate(zip(active, caps, strict=True)):
        tokens[b, :cap] = drafted[i, :cap]
        if probs is not None and q_all is not None:
            probs[b, :cap] = q_all[i, :cap]
        lens[b] = cap
    return Proposal(tokens=tokens, lens=lens.to(device), probs=probs, backlog_s=backlog_s)
