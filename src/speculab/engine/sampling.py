"""From logits to tokens: each request's sampling distribution, the draw, and reported logprobs.

`processed_probs` applies temperature, top-k and top-p; `request_probs` is the one place where a request's
rules turn logits into the distribution it samples from (min_tokens bans, then `processed_probs`).
Speculative verification calls it for the target's p and the draft's q alike, so that both are transformed
exactly as plain decoding transforms them (exactness needs it).

Sampling happens on the CPU with each request's own `torch.Generator` when it has a seed: a seeded
request draws the same tokens whether it runs alone or in a batch, on any device.
"""

from __future__ import annotations

import torch

from speculab.engine.sequence import Sequence, TokenLogprob


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


def sampling_tensors(seqs: list[Sequence], device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """temperature [N], top_p [N], top_k [N] (long) for one row per sequence."""
    t = torch.tensor([s.params.temperature for s in seqs], dtype=torch.float32, device=device)
    p = torch.tensor([s.params.top_p for s in seqs], dtype=torch.float32, device=device)
    k = torch.tensor([s.params.top_k for s in seqs], dtype=torch.long, device=device)
    return t, p, k


def request_probs(
    logits: torch.Tensor,  # [N, V] float32, one row per (sequence, output index)
    seqs: list[Sequence],  # [N] the sequence of each row (a sequence may own several rows)
    output_index: list[int],  # [N] the output index the row's token would get (0 = first generated token)
) -> torch.Tensor:
    """Each row's sampling distribution [N, V]: min_tokens bans, then temperature, top-k, top-p (greedy = one-hot)."""
    logits = ban_tokens(logits, seqs, output_index)
    t, p, k = sampling_tensors(seqs, logits.device)
    return processed_probs(logits, t, p, k)


def ban_tokens(logits: torch.Tensor, seqs: list[Sequence], output_index: list[int]) -> torch.Tensor:
    """Logits with eos / stop token ids at -inf where a row is still below its min_tokens."""
    pairs = enumerate(zip(seqs, output_index, strict=True))
    bans = [(row, tok) for row, (s, i) in pairs for tok in s.banned_token_ids(i)]
    if not bans:
        return logits
    rows, toks = zip(*bans, strict=True)
    logits = logits.clone()
    logits[list(rows), list(toks)] = float("-inf")
    return logits


def sample(
    probs: torch.Tensor,  # [N, V]
    seqs: list[Sequence],  # [N]
    generator: torch.Generator,  # for requests without a seed
) -> list[int]:
    """One token per row: argmax for greedy rows, a draw from the row's distribution otherwise."""
    greedy = [s.params.greedy for s in seqs]
    out = probs.argmax(-1).tolist() if any(greedy) else [0] * len(seqs)
    sampled_rows = [i for i, g in enumerate(greedy) if not g]
    if sampled_rows:
        cpu = probs[sampled_rows].cpu()
        for j, i in enumerate(sampled_rows):
            g = seqs[i].generator or generator
            out[i] = int(torch.multinomial(cpu[j], 1, generator=g))
    return out


def token_logprobs(
    logits: torch.Tensor,  # [N, V] raw model logits
    token_ids: list[int],  # [N] chosen tokens
    num_top: list[int | None],  # [N] alternatives wanted per row; None = no logprobs for that row
) -> list[TokenLogprob | None]:
    """Log-probabilities under the model's raw distribution (before temperature / top-p / top-k), as vLLM reports."""
    wanted = [i for i, n in enumerate(num_top) if n is not None]
    result: list[TokenLogprob | None] = [None] * len(token_ids)
    if not wanted:
        return result
    lp = torch.log_softmax(logits[wanted].float(), dim=-1)  # [W, V]
    chosen = lp.gather(-1, torch.tensor([token_ids[i] for i in wanted], device=lp.device)[:, None])[:, 0].tolist()
    k = max(num_top[i] or 0 for i in wanted)
    top_v, top_i = lp.topk(k, dim=-1) if k else (lp[:, :0], lp[:, :0].long())
    top_v, top_i = top_v.tolist(), top_i.tolist()
    for j, i in enumerate(wanted):
        n = num_top[i] or 0
        result[i] = TokenLogprob(token_ids[i], chosen[j], tuple(zip(top_i[j][:n], top_v[j][:n], strict=True)))
    return result
