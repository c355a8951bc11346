"""Training for the demo pair: a cache-free causal forward over CausalLM's own modules, and a time-budgeted loop.

The serving forward (CausalLM.forward) writes every token into a slot KV cache; training needs none of that,
so `train_logits` runs the same modules (same weights, same RoPE and RMSNorm) with is_causal SDPA over [B, S].
The learning-rate schedule is a function of elapsed time, not step count, because the budget is minutes on a
borrowed GPU: linear warmup over the first steps, then cosine from peak to `min_lr_ratio * peak` as the clock
runs out. Held-out loss is measured every `eval_every_s` seconds and the best weights are kept (the corpus is
small enough that several epochs fit in a few minutes, so late overfitting is possible).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from demo_data import fixed_windows, random_windows

from speculab.engine.model import CausalLM, rotate_half


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int
    seq_len: int
    budget_s: float
    max_steps: int | None = None  # stop earlier at this many steps (tests: a result independent of machine speed)
    peak_lr: float = 3e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 100
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    dropout: float = 0.0
    distill_kl_weight: float = 1.0  # draft only: loss = w * KL(target || draft) + (1 - w) * CE(data)
    log_every_s: float = 5.0
    eval_every_s: float = 30.0
    eval_windows: int = 32
    seed: int = 0


@dataclass
class TrainResult:
    steps: int = 0
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    best_heldout_loss: float = math.inf
    best_step: int = 0
    log: list[dict[str, float]] = field(default_factory=list)  # {"step", "elapsed_s", "loss", "lr", ...}


def train_layers(
    layers: torch.nn.ModuleList,
    x: torch.Tensor,
    rope: tuple[torch.Tensor, torch.Tensor],
    dropout: float,
    training: bool,
) -> torch.Tensor:
    """The residual stream [B, S, hidden] after decoder `layers` over x [B, S, hidden], full causal attention.

    `rope` is (cos, sin) [1, S, D] float32 for positions 0..S-1. The same modules the serving forward runs
    (model.run_layers), without a KV cache: shared by the demo models and the EAGLE head.
    """
    b, s, _ = x.shape
    cos, sin = rope[0][:, None].to(x.dtype), rope[1][:, None].to(x.dtype)  # [1, 1, S, D]
    for layer in layers:
        attn = layer.self_attn
        h = layer.input_layernorm(x)
        q = attn.q_proj(h).view(b, s, attn.n_heads, attn.head_dim).transpose(1, 2)  # [B, H, S, D]
        k = attn.k_proj(h).view(b, s, attn.n_kv, attn.head_dim).transpose(1, 2)  # [B, Hkv, S, D]
        v = attn.v_proj(h).view(b, s, attn.n_kv, attn.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        q, k = q.to(v.dtype), k.to(v.dtype)  # fp32 RoPE tables promote q, k; attend in the autocast dtype
        if attn.n_kv != attn.n_heads:  # expand K/V heads explicitly so the flash kernel applies on every torch
            k = k.repeat_interleave(attn.n_heads // attn.n_kv, dim=1)  # [B, H, S, D]
            v = v.repeat_interleave(attn.n_heads // attn.n_kv, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, S, D]
        out = attn.o_proj(out.transpose(1, 2).reshape(b, s, attn.n_heads * attn.head_dim))
        x = x + F.dropout(out, dropout, training)
        x = x + F.dropout(layer.mlp(layer.post_attention_layernorm(x)), dropout, training)
    return x


def train_hidden(model: CausalLM, tokens: torch.Tensor, dropout: float = 0.0) -> torch.Tensor:
    """Final-norm hidden states [B, S, hidden] for tokens [B, S] at positions 0..S-1 (what the LM head reads)."""
    x = model.model.embed_tokens(tokens)  # [B, S, hidden]
    rope = model.rope(torch.arange(tokens.shape[1], device=tokens.device)[None, :])  # [1, S, D] float32
    return model.model.norm(train_layers(model.model.layers, x, rope, dropout, model.training))


def train_logits(model: CausalLM, tokens: torch.Tensor, dropout: float = 0.0) -> torch.Tensor:
    """Logits [B, S, V] for tokens [B, S] at positions 0..S-1, full causal attention, no KV cache."""
    return model.lm_head(train_hidden(model, tokens, dropout))


def lr_at(cfg: TrainConfig, step: int, elapsed_s: float) -> float:
    warm = min(1.0, (step + 1) / cfg.warmup_steps)
    progress = min(1.0, elapsed_s / cfg.budget_s)
    if cfg.max_steps:
        progress = max(progress, min(1.0, step / cfg.max_steps))
    cosine = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.peak_lr * warm * cosine


def make_optimizer(model: CausalLM, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    # No weight decay on norms (1-D); the tied embedding is a matrix and is decayed like the other matrices.
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.peak_lr, betas=cfg.betas, fused=device.type == "cuda")


def autocast(device: torch.device):
    """bf16 autocast on CUDA; plain fp32 on CPU (CPU bf16 matmuls are slow and the CPU run is only a test)."""
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")


@torch.no_grad()
def heldout_loss(
    model: CausalLM, windows: torch.Tensor, device: torch.device, batch_size: int, forward: Callable | None = None
) -> float:
    """Mean next-token cross-entropy (nats/token) over windows [n, S + 1]."""
    forward = forward or train_logits
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch_size):
        w = windows[i : i + batch_size]
        with autocast(device):
            logits = forward(model, w[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), w[:, 1:].flatten(), reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    model.train(was_training)
    return total / count


def train(
    model: CausalLM,
    stream: torch.Tensor,
    heldout: torch.Tensor,
    cfg: TrainConfig,
    device: torch.device,
    teacher: CausalLM | None = None,
    compile_model: bool = False,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
    name: str = "model",
) -> TrainResult:
    """Train `model` on random windows of `stream` ([N] token ids on device) until the time budget runs out.

    With a `teacher`, the loss is distillation: w * KL(teacher || model) + (1 - w) * cross-entropy on the data.
    """
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    eval_windows = fixed_windows(heldout, cfg.seq_len, cfg.eval_windows)
    opt = make_optimizer(model, cfg, device)
    forward = torch.compile(train_logits) if compile_model else train_logits
    if teacher is not None:
        teacher.eval()
    result = TrainResult()
    best_state = None
    model.train()
    start = clock()
    last_log = last_eval = start
    while True:
        now = clock()
        elapsed = now - start
        out_of_time = elapsed >= cfg.budget_s and result.steps > 0
        if out_of_time or (cfg.max_steps is not None and result.steps >= cfg.max_steps):
            break
        lr = lr_at(cfg, result.steps, elapsed)
        for g in opt.param_groups:
            g["lr"] = lr
        batch = random_windows(stream, cfg.batch_size, cfg.seq_len, gen)  # [B, S + 1]
        inputs, labels = batch[:, :-1], batch[:, 1:]
        with autocast(device):
            logits = forward(model, inputs, cfg.dropout)  # [B, S, V]
            ce = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
            loss = ce
            if teacher is not None:
                with torch.no_grad():
                    t_logits = train_logits(teacher, inputs)
                kl = F.kl_div(
                    F.log_softmax(logits.float(), -1).flatten(0, 1),
                    F.log_softmax(t_logits.float(), -1).flatten(0, 1),
                    log_target=True,
                    reduction="batchmean",
                )
                loss = cfg.distill_kl_weight * kl + (1 - cfg.distill_kl_weight) * ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        result.steps += 1
        result.tokens_seen += inputs.numel()
        now = clock()
        last_step = now - start >= cfg.budget_s or result.steps == cfg.max_steps
        due_eval = now - last_eval >= cfg.eval_every_s or last_step
        if now - last_log >= cfg.log_every_s or result.steps == 1 or due_eval:
            entry = {"step": result.steps, "elapsed_s": round(now - start, 2), "loss": ce.item(), "lr": lr}
            if teacher is not None:
                entry["kl"] = kl.item()
            if due_eval:
                entry["heldout_loss"] = heldout_loss(model, eval_windows, device, cfg.batch_size)
                last_eval = clock()
                if entry["heldout_loss"] < result.best_heldout_loss:
                    result.best_heldout_loss, result.best_step = entry["heldout_loss"], result.steps
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            result.log.append(entry)
            tok_s = result.tokens_seen / max(now - start, 1e-9)
            fields = " ".join(f"{k}={v:.4g}" for k, v in entry.items() if k != "step")
            log(f"[{name}] step {result.steps} {fields} tok/s={tok_s:,.0f}")
            last_log = now
    result.elapsed_s = clock() - start
    if best_state is not None and result.best_step != result.steps:
        log(f"[{name}] restoring best held-out weights from step {result.best_step}")
        model.load_state_dict(best_state)
    model.eval()
    return result
