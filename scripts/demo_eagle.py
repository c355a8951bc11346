"""The demo EAGLE head: trained on the frozen demo target's own hidden states, evaluated, exported.

Training is EAGLE-1's recipe with teacher forcing on the target's features. Per batch of windows w [B, S + 1]
from the packed training stream, the frozen target (cache-free train forward) gives its final-norm features
h_0 .. h_S and its next-token distributions p_1 .. p_S. The head reads (embed(w_{i+1}), h_i + noise) at position i
and predicts f_{i+1}; the loss is

    feature_weight * smooth_l1(f_{i+1}, h_{i+1}) + token_weight * CE(p_{i+1}, softmax(lm_head(f_{i+1})))

the regression keeps f usable as the next step's input feature, the soft cross-entropy (forward KL up to a
constant) makes the drafts the target's own. Uniform noise on the input features (EAGLE's U(-0.1, 0.1), here
scaled by each feature's RMS) teaches the head to cope with its own imperfect predictions when it drafts from them.
The embedding and the LM head are the target's, frozen; only fc and the decoder layer learn.

Evaluation: teacher-forced agreement (the head's argmax from true features equals the target's argmax at the
next position) on held-out windows, and greedy speculative decoding run in speculab's engine on held-out
prompts for the EAGLE head, the draft model and prompt lookup alike (vLLM's counter semantics).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from demo_data import fixed_windows, random_windows
from demo_eval import SpecStats, expected_tokens_per_step_iid
from demo_train import TrainConfig, autocast, lr_at, train_hidden
from safetensors.torch import save_file

from speculab.engine.model import CausalLM, rope_tables, rotate_half
from speculab.engine.speculative.proposers.eagle_head import EagleHead


@dataclass(frozen=True)
class EagleLoss:
    feature_weight: float = 1.0
    token_weight: float = 1.0
    noise: float = 0.1  # input features + U(-noise, noise) * rms(feature)
    depth: int = 2  # passes of training-time test: 1 = EAGLE-1's teacher forcing; 2 also trains the second draft
    depth_after: float = 0.6  # fraction of the budget trained with one pass before the unrolled passes join
    token_fraction: float = 0.25  # positions scored by the token loss (the vocabulary projection is most of a step)


@dataclass
class EagleTrainResult:
    steps: int = 0
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    best_step: int = 0
    best_heldout: float = math.inf  # held-out token loss (CE against the target's distribution)
    log: list[dict[str, float]] = field(default_factory=list)


def new_head(target: CausalLM, seed: int) -> EagleHead:
    """One decoder layer of the target's shape; GPT-2 style init (residual projections scaled down)."""
    head = EagleHead(dataclasses.replace(target.config, num_hidden_layers=1))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return head


def unroll_mask(depth: int, seq_len: int, device: torch.device) -> torch.Tensor:
    """Which keys an entry of pass `depth` attends [S, (depth + 1) * S], as drafting step depth + 1 does.

    Pass d's entry at position p stands for the d-th speculative entry of a step whose target features end at
    n = p - d + 1: it sees the target-feature entries (pass 0) at positions <= p - d and its own chain, pass d' at
    position p - d + d' for d' = 1..d. Pass 0 is plain causal attention. Entries with p < d have no such chain;
    they see only themselves and are left out of the loss.
    """
    q = torch.arange(seq_len, device=device)[:, None]  # [S, 1]
    k = torch.arange(seq_len, device=device)[None, :]  # [1, S]
    blocks = [k <= q - depth]  # pass 0 keys
    for d in range(1, depth + 1):
        blocks.append(k == q - depth + d)
    mask = torch.cat(blocks, dim=1)  # [S, (depth + 1) * S]
    mask[: min(depth, seq_len), :] = False
    idx = torch.arange(min(depth, seq_len), device=device)
    mask[idx, depth * seq_len + idx] = True  # invalid rows see only themselves (no NaN), never scored
    return mask


def head_train_forward(
    head: EagleHead, target: CausalLM, tokens: torch.Tensor, features: torch.Tensor, depth: int = 1
) -> list[torch.Tensor]:
    """Predicted features per pass, [B, S, H] each, for entries (embed(tokens[:, p]), feature) at position p.

    Pass 0 reads the target's features (teacher forcing); pass d reads pass d - 1's prediction from position
    p - 1, attending the target-feature entries before the chain and the chain itself (`unroll_mask`): exactly
    what the head computes for its (d + 1)-th draft of a step ("training-time test", as EAGLE-3 and HASS do;
    depth 1 is EAGLE-1's plain teacher forcing).
    """
    b, s = tokens.shape
    embeds = target.model.embed_tokens(tokens)  # [B, S, H]
    cos, sin = rope_tables(torch.arange(s, device=tokens.device)[None, :], head.inv_freq)  # [1, S, D]
    cos, sin = cos[:, None].to(embeds.dtype), sin[:, None].to(embeds.dtype)  # [1, 1, S, D]
    keys: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in head.layers]  # per layer, per pass
    outputs: list[torch.Tensor] = []
    feats = features
    for d in range(depth):
        if d > 0:  # the previous pass's prediction, one position later (position 0 gets a dummy, never scored)
            feats = torch.cat([torch.zeros_like(outputs[-1][:, :1]), outputs[-1][:, :-1]], dim=1)
        x = head.fc(torch.cat((embeds, feats.to(embeds.dtype)), dim=-1))
        mask = unroll_mask(d, s, tokens.device)
        for layer, cache in zip(head.layers, keys, strict=True):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(b, s, attn.n_heads, attn.head_dim).transpose(1, 2)  # [B, H, S, D]
            k = attn.k_proj(h).view(b, s, attn.n_kv, attn.head_dim).transpose(1, 2)  # [B, Hkv, S, D]
            v = attn.v_proj(h).view(b, s, attn.n_kv, attn.head_dim).transpose(1, 2)
            q = (q * cos + rotate_half(q) * sin).to(v.dtype)
            k = (k * cos + rotate_half(k) * sin).to(v.dtype)
            cache.append((k, v))
            k_all = torch.cat([kv[0] for kv in cache], dim=2)  # [B, Hkv, (d + 1) S, D]
            v_all = torch.cat([kv[1] for kv in cache], dim=2)
            if attn.n_kv != attn.n_heads:
                k_all = k_all.repeat_interleave(attn.n_heads // attn.n_kv, dim=1)
                v_all = v_all.repeat_interleave(attn.n_heads // attn.n_kv, dim=1)
            if d == 0:
                out = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)
            else:
                out = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)
            x = x + attn.o_proj(out.transpose(1, 2).reshape(b, s, attn.n_heads * attn.head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        outputs.append(x)
    return outputs


def eagle_losses(
    head: EagleHead,
    target: CausalLM,
    windows: torch.Tensor,
    loss: EagleLoss,
    gen: torch.Generator | None,
    depth: int | None = None,
    draft_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(feature loss, token loss, pass-0 agreement) for windows [B, S + 1]; with `draft_ids` [N] the agreement of
    an argmax restricted to that draft vocabulary (what drafting with it proposes).

    Training (a generator given) adds the feature noise and scores the token loss at a random `token_fraction`
    of positions; evaluation scores every position. Pass d's losses weigh 0.8^d (EAGLE-3's decay: later drafts
    are reached less often).
    """
    depth = loss.depth if depth is None else depth
    with torch.no_grad():
        h = train_hidden(target, windows)  # [B, S + 1, H]
    s1 = h.shape[1]
    feats = h[:, :-1]
    cols = torch.arange(s1 - 1, device=windows.device)
    if gen is not None:
        if loss.noise > 0:
            rms = feats.float().pow(2).mean(-1, keepdim=True).sqrt()
            u = torch.rand(feats.shape, generator=gen, device=feats.device) * 2 - 1
            feats = feats + (loss.noise * rms * u).to(feats.dtype)
        if loss.token_fraction < 1:
            n = max(1, round(loss.token_fraction * (s1 - 1)))
            cols = torch.randperm(s1 - 1, generator=gen, device=windows.device)[:n].sort().values
    with torch.no_grad():  # the target's next-token distributions at the scored positions, p_{i+1}
        t_logp = F.log_softmax(target.lm_head(h[:, 1:][:, cols]).float(), -1)  # [B, C, V]
    passes = head_train_forward(head, target, windows[:, 1:], feats, depth)  # each [B, S, H] ~ h[:, 1:]
    f_loss = t_loss = torch.zeros((), device=windows.device)
    norm = 0.0
    for d, f in enumerate(passes):
        w = 0.8**d
        f_loss = f_loss + w * F.smooth_l1_loss(f[:, d:].float(), h[:, 1 + d :].float())
        keep = cols >= d  # pass d has no prediction before position d
        logp = F.log_softmax(target.lm_head(f[:, cols[keep]]).float(), -1)  # [B, C', V]
        t_loss = t_loss + w * -(t_logp[:, keep].exp() * logp).sum(-1).mean()  # CE against the target's p
        norm += w
        if d == 0:
            pred = logp.argmax(-1) if draft_ids is None else draft_ids[logp[..., draft_ids].argmax(-1)]
            agree = (pred == t_logp.argmax(-1)).float().mean()
    return f_loss / norm, t_loss / norm, agree


@torch.no_grad()
def heldout_metrics(
    head: EagleHead,
    target: CausalLM,
    windows: torch.Tensor,
    loss: EagleLoss,
    device: torch.device,
    batch_size: int,
    draft_ids: torch.Tensor | None = None,
) -> dict[str, float]:
    """Held-out feature loss, token loss and teacher-forced agreement (pass 0: the first draft's situation),
    averaged over windows [n, S + 1]."""
    was = head.training
    head.eval()
    sums = [0.0, 0.0, 0.0]
    n = 0
    for i in range(0, windows.shape[0], batch_size):
        w = windows[i : i + batch_size]
        with autocast(device):
            parts = eagle_losses(head, target, w, loss, None, depth=1, draft_ids=draft_ids)
        for j, x in enumerate(parts):
            sums[j] += x.item() * w.shape[0]
        n += w.shape[0]
    head.train(was)
    return {"feature_loss": sums[0] / n, "token_loss": sums[1] / n, "agreement": sums[2] / n}


def train_eagle(
    head: EagleHead,
    target: CausalLM,
    stream: torch.Tensor,
    heldout: torch.Tensor,
    cfg: TrainConfig,
    loss: EagleLoss,
    device: torch.device,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
) -> EagleTrainResult:
    """Train `head` on random windows of `stream` until the time budget (or max_steps) runs out; keep the best."""
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    eval_windows = fixed_windows(heldout, cfg.seq_len, cfg.eval_windows)
    params = [p for p in head.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=cfg.peak_lr, betas=cfg.betas, fused=device.type == "cuda")
    target.eval()
    head.train()
    result, best_state = EagleTrainResult(), None
    start = clock()
    last_log = last_eval = start
    while True:
        elapsed = clock() - start
        if (elapsed >= cfg.budget_s and result.steps > 0) or (
            cfg.max_steps is not None and result.steps >= cfg.max_steps
        ):
            break
        lr = lr_at(cfg, result.steps, elapsed)
        for g in opt.param_groups:
            g["lr"] = lr
        windows = random_windows(stream, cfg.batch_size, cfg.seq_len, gen)  # [B, S + 1]
        depth = loss.depth if elapsed >= loss.depth_after * cfg.budget_s else 1
        if cfg.max_steps is not None:
            depth = loss.depth if result.steps >= loss.depth_after * cfg.max_steps else depth
        with autocast(device):
            f_loss, t_loss, agree = eagle_losses(head, target, windows, loss, gen, depth)
            total = loss.feature_weight * f_loss + loss.token_weight * t_loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        result.steps += 1
        result.tokens_seen += windows[:, 1:].numel()
        now = clock()
        last_step = now - start >= cfg.budget_s or result.steps == cfg.max_steps
        due_eval = now - last_eval >= cfg.eval_every_s or last_step
        if now - last_log >= cfg.log_every_s or result.steps == 1 or due_eval:
            entry = {
                "step": result.steps,
                "elapsed_s": round(now - start, 2),
                "depth": depth,
                "feature_loss": f_loss.item(),
                "token_loss": t_loss.item(),
                "agreement": agree.item(),
                "lr": lr,
            }
            if due_eval:
                held = heldout_metrics(head, target, eval_windows, loss, device, cfg.batch_size)
                entry |= {f"heldout_{k}": v for k, v in held.items()}
                last_eval = clock()
                if held["token_loss"] < result.best_heldout:
                    result.best_heldout, result.best_step = held["token_loss"], result.steps
                    best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
            result.log.append(entry)
            tok_s = result.tokens_seen / max(now - start, 1e-9)
            fields = " ".join(f"{k}={v:.4g}" for k, v in entry.items() if k != "step")
            log(f"[eagle] step {result.steps} {fields} tok/s={tok_s:,.0f}")
            last_log = now
    result.elapsed_s = clock() - start
    if best_state is not None and result.best_step != result.steps:
        log(f"[eagle] restoring best held-out weights from step {result.best_step}")
        head.load_state_dict(best_state)
    head.eval()
    return result


def frequent_tokens(stream: torch.Tensor, vocab_size: int, n: int) -> torch.Tensor:
    """The n most frequent token ids of `stream` [N], sorted (FR-Spec's frequency-ranked draft vocabulary)."""
    counts = torch.bincount(stream.flatten().cpu(), minlength=vocab_size)
    return counts.topk(n).indices.sort().values


def save_eagle_dir(head: EagleHead, out_dir: Path, dtype: torch.dtype = torch.float16) -> list[Path]:
    """config.json (Llama fields + EAGLE's "bias", draft_vocab_size) and model.safetensors: fc.*, layers.*, d2t."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().to("cpu", v.dtype if k == "d2t" else dtype).contiguous() for k, v in head.state_dict().items()}
    for name, t in sd.items():
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} does not fit in {dtype}")
    save_file(sd, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config = {**head.to_hf(), "torch_dtype": str(dtype).removeprefix("torch.")}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return [out_dir / "model.safetensors", out_dir / "config.json"]


# --- evaluation ---------------------------------------------------------------------------------------
def engine_replay(
    target: CausalLM,
    make_proposer: Callable[[int, int], object],
    prompts: list[list[int]],
    new_tokens: int,
    eos_id: int,
) -> SpecStats:
    """Greedy speculative decoding of `prompts` in speculab's engine; counts as its Prometheus counters do.

    Target steps are the forwards that emitted tokens for a request (its prefill, then each verification).
    """
    from speculab.engine.engine import Engine, EngineConfig
    from speculab.engine.sequence import SamplingParams
    from speculab.engine.speculative.speculator import Speculator

    slots = len(prompts)
    max_len = max(len(p) for p in prompts) + new_tokens + 8
    proposer = make_proposer(slots, max_len)
    spec = Speculator(proposer)  # type: ignore[arg-type]
    cfg = EngineConfig(max_num_seqs=slots, max_model_len=max_len, max_num_batched_tokens=max_len * slots)
    engine = Engine(target, cfg, eos_token_ids={eos_id}, speculator=spec)
    seqs = [
        engine.add_request(f"r{i}", p, SamplingParams(max_tokens=new_tokens, temperature=0.0))
        for i, p in enumerate(prompts)
    ]
    steps = 0
    while engine.has_unfinished():
        steps += sum(1 for out in engine.step() if out.new_token_ids)
    c = spec.counters
    k = spec.num_speculative_tokens
    generated = sum(len(s.output_ids) for s in seqs)
    return SpecStats(
        k, steps, generated, c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, list(c.accepted_per_pos)
    )


@torch.no_grad()
def evaluate_eagle(
    head: EagleHead,
    target: CausalLM,
    windows: torch.Tensor,  # [n, S + 1] held-out windows
    prompts: torch.Tensor,  # [B, P] held-out prompts
    new_tokens: int,
    eos_id: int,
    device: torch.device,
    batch_size: int,
    draft: CausalLM | None = None,
    k: int = 4,
) -> dict:
    """Teacher-forced agreement on held-out windows; greedy engine replay for eagle (and the draft, prompt lookup)."""
    from speculab.engine.speculative.proposers.draft_model import DraftModelProposer
    from speculab.engine.speculative.proposers.eagle import EagleProposer
    from speculab.engine.speculative.proposers.ngram import NgramProposer

    held = heldout_metrics(head, target, windows, EagleLoss(), device, batch_size)
    alpha = held["agreement"]
    ids = head.draft_token_ids()
    vocab: dict = {}
    if ids is not None:
        restricted = heldout_metrics(head, target, windows, EagleLoss(), device, batch_size, draft_ids=ids)
        inside = torch.zeros(target.config.vocab_size, dtype=torch.bool, device=windows.device)
        inside[ids] = True
        vocab = {
            "draft_vocab_size": ids.numel(),
            "draft_vocab_coverage": inside[windows[:, 1:]].float().mean().item(),  # held-out tokens it can draft
            "agreement_alpha_draft_vocab": restricted["agreement"],
        }
    # The engine runs the serving forward in float32, exactly as `speculab serve` does on a CPU.
    target32 = target.float().eval()
    head32 = head.float().eval()
    rows = prompts.tolist()
    makers = {
        "eagle": lambda slots, max_len: EagleProposer(head32, target32, k, slots, max_len),
        "ngram": lambda slots, max_len: NgramProposer(k, 4, 2),
    }
    if draft is not None:
        d32 = draft.float().eval()
        makers["draft"] = lambda slots, max_len: DraftModelProposer(d32, k, slots, max_len, target32.config.vocab_size)
    replay = {name: engine_replay(target32, make, rows, new_tokens, eos_id).as_dict() for name, make in makers.items()}
    return {
        "teacher_forced_heldout": {
            "positions": int(windows[:, 1:].numel()),
            "agreement_alpha": alpha,
            f"expected_tokens_per_step_k{k}_iid": expected_tokens_per_step_iid(alpha, k),
            "feature_loss": held["feature_loss"],
            "token_loss": held["token_loss"],
            **vocab,
        },
        "engine_greedy_replay": {
            "prompts": len(rows),
            "prompt_tokens": prompts.shape[1],
            "max_new_tokens": new_tokens,
            **replay,
        },
    }
