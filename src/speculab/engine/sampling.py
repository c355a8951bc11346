"""Turning logits into the distribution a request samples from.

One function serves plain decoding and speculative verification, so that temperature, top-k and
top-p are applied to the target's p and the draft's q in exactly the same way (exactness needs it).
"""

from __future__ import annotations

import torch


def processed_probs(
    logits: torch.Tensor,  # [N, V] float32
    temperature: torch.Tensor,  # [N]; 0 means greedy
    top_p: torch.Tensor,  # [N] in (0, 1]
    top_k: torch.Tensor,  # [N] int; 0 means no top-k
) -> torch.Tensor:
    """Probabilities [N, V] after temperature, top-k and top-p; greedy rows are one-hot at the argmax."""
    greedy = temperature <= 0
    t = torch.where(greedy, torch.ones_like(temperature), temperature)
    x = logits / t[:, None]
    v = x.shape[-1]
    k = torch.where(top_k > 0, top_k.clamp(max=v), torch.full_like(top_k, v))
    need_filter = bool(((k < v) | (top_p < 1.0)).any())
    if need_filter:
        sorted_x, order = x.sort(dim=-1, descending=True)  # [N, V]
        ranks = torch.arange(v, device=x.device)[None, :]
        drop = ranks >= k[:, None]
        probs_sorted = sorted_x.softmax(-1)
        # Keep the smallest prefix whose mass reaches top_p: drop a token if the mass before it already does.
        mass_before = probs_sorted.cumsum(-1) - probs_sorted
        drop |= mass_before >= top_p[:, None]
        drop[:, 0] = False  # the most likely token always survives
        sorted_x = sorted_x.masked_fill(drop, float("-inf"))
        x = torch.full_like(x, float("-inf")).scatter(-1, order, sorted_x)
    probs = x.softmax(-1)
    if bool(greedy.any()):
        onehot = torch.zeros_like(probs).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        probs = torch.where(greedy[:, None], onehot, probs)
    return probs
