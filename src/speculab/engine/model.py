"""A Llama-family decoder (Llama, Mistral, Qwen2) with a slot-based KV cache.

Module and parameter names mirror Hugging Face's `*ForCausalLM` so a safetensors state dict loads as is.
One forward serves prefill, decode and speculative verification: every row of the batch is a sequence
(a cache slot) with S new tokens at explicit absolute positions. Shapes are in comments:
B = rows, S = new tokens per row, H = query heads, Hkv = key/value heads, D = head dim, K = keys attended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from speculab.errors import UserError

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")


class UnsupportedModelError(UserError, ValueError):
    """The checkpoint is not an architecture this engine implements (a user mistake: pick another model)."""


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    attention_bias: bool = False  # Qwen2: bias on q/k/v projections
    tie_word_embeddings: bool = False
    architecture: str = "LlamaForCausalLM"
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_hf(cls, cfg: dict[str, Any]) -> ModelConfig:
        archs = cfg.get("architectures") or [cfg.get("model_type", "?")]
        arch = archs[0]
        if arch not in SUPPORTED_ARCHITECTURES:
            raise UnsupportedModelError(
                f"architecture {arch!r} is not supported; speculab's engine runs {', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        n_heads = cfg["num_attention_heads"]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_heads
        rope_scaling = cfg.get("rope_scaling")
        if rope_scaling is not None:
            kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
            if kind not in ("llama3", "default", None):
                raise UnsupportedModelError(f"rope_scaling type {kind!r} is not supported (llama3 is)")
            if kind in ("default", None):
                rope_scaling = None
        return cls(
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=n_heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or n_heads,
            head_dim=head_dim,
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-5),
            rope_theta=cfg.get("rope_theta", 10000.0),
            rope_scaling=rope_scaling,
            attention_bias=bool(cfg.get("attention_bias", arch == "Qwen2ForCausalLM")),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            architecture=arch,
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_id=cfg.get("eos_token_id"),
        )

    def to_hf(self) -> dict[str, Any]:
        """A config.json that transformers loads."""
        model_type = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2"}
        d: dict[str, Any] = {
            "architectures": [self.architecture],
            "model_type": model_type[self.architecture],
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_word_embeddings,
            "hidden_act": "silu",
        }
        if self.architecture == "LlamaForCausalLM":
            d["attention_bias"] = self.attention_bias
            d["mlp_bias"] = False
        if self.rope_scaling is not None:
            d["rope_scaling"] = self.rope_scaling
        if self.bos_token_id is not None:
            d["bos_token_id"] = self.bos_token_id
        if self.eos_token_id is not None:
            d["eos_token_id"] = self.eos_token_id
        return d

    @property
    def num_parameters(self) -> int:
        h, i, d = self.hidden_size, self.intermediate_size, self.head_dim
        attn = h * d * (self.num_attention_heads * 2 + self.num_key_value_heads * 2)
        if self.attention_bias:
            attn += d * (self.num_attention_heads + 2 * self.num_key_value_heads)
        per_layer = attn + 3 * h * i + 2 * h
        emb = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * per_layer + emb + h


def rope_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    """Inverse frequencies [D/2] on the CPU, with Llama-3 frequency-dependent scaling when configured."""
    d = cfg.head_dim
    # on the CPU even where the model is built on the meta device (its own numbers, a few floats, moved with it):
    # arange's meta kernel imports torch._dynamo, about a second of every server's start
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64, device="cpu") / d))
    rs = cfg.rope_scaling
    if rs is None:
        return inv_freq.float()
    # Llama 3.1: long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
    factor = rs["factor"]
    low_ff, high_ff = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old_ctx = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_ctx / low_ff, old_ctx / high_ff
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low_ff) / (high_ff - low_ff)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(is_medium, smoothed, scaled).float()


def lay_out_for_cpu(module: nn.Module) -> None:
    """Store every Linear weight of `module` column-major (same [out, in] shape and values, transposed strides), in
    place, when it lives on the CPU.

    `F.linear` multiplies by `weight.t()`, which is then a contiguous [in, out] matrix: MKL's plain GEMM instead of
    its transposed-operand one. On the 2-core AMD EPYC VM a decode step of the demo model took 1.07-1.5x less time
    (bench/weight_layout.py; bench/README.md has the figures); batch-4 logits were bit-identical and batch-1 ones
    within 6e-6 (a different summation order in MKL's gemv). The tied embedding table is the LM head's weight: its row
    lookups read strided rows, a few hundred per step at most. Accelerators are left alone (their GEMMs take either
    layout).
    """
    for sub in module.modules():
        if isinstance(sub, nn.Linear) and sub.weight.device.type == "cpu":
            sub.weight.data = sub.weight.data.t().contiguous().t()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            # one fused op instead of seven, bit-identical in float32 (per-op overhead dominates small models)
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        # Normalise in float32 as HF does, then cast back before the weight multiply.
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dtype)


class KVCache(nn.Module):
    """Preallocated keys and values per cache slot: [L, slots, Hkv, max_len + 1, D].

    The extra last position is a scratch column: padded batch entries (position -1) write there and
    nothing reads it. A sequence's length lives in the engine, so truncating a sequence (rejected
    speculative tokens) is just using a smaller length: stale entries are overwritten before being read.
    """

    def __init__(self, cfg: ModelConfig, num_slots: int, max_len: int, dtype: torch.dtype, device: torch.device):
        super().__init__()
        shape = (cfg.num_hidden_layers, num_slots, cfg.num_key_value_heads, max_len + 1, cfg.head_dim)
        self.register_buffer("k", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.num_slots = num_slots
        self.max_len = max_len

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2


def consecutive_start(slots: list[int]) -> int | None:
    """slots[0] when the rows use slots slots[0], slots[0] + 1, ... in order (BatchInput.slot_start), else None."""
    return slots[0] if slots and slots == list(range(slots[0], slots[0] + len(slots))) else None


@dataclass
class BatchInput:
    """One forward's inputs. All tensors on the model's device.

    tokens, positions: [B, S]; position -1 marks padding. slots: [B] cache slot per row.
    kv_len: number of cache positions attended (max position in the batch + 1), a host int so that
    slicing the cache needs no device sync.
    """

    tokens: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    kv_len: int
    slot_start: int | None = None  # rows use slots slot_start, slot_start + 1, ... in order: the cache is sliced
    # (a view) instead of gathered (a copy of every attended key and value, per layer, per step)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.n_heads * d, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(h, self.n_kv * d, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(h, self.n_kv * d, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(self.n_heads * d, h, bias=False)

    def forward(
        self,
        x: torch.Tensor,  # [B, S, hidden]
        cos: torch.Tensor,  # [B, S, D]
        sin: torch.Tensor,
        mask: torch.Tensor,  # [B, 1, S, K] bool, True = attend
        cache: KVCache,
        layer: int,
        write_pos: torch.Tensor,  # [B, S] cache column for each new token
        slots: torch.Tensor,  # [B]
        kv_len: int,
        slot_start: int | None = None,
    ) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)  # [B, H, S, D]
        k = self.k_proj(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)  # [B, Hkv, S, D]
        v = self.v_proj(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, S, D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Write the new keys/values into their slots at their absolute positions.
        slot_idx = slots[:, None].expand(b, s)  # [B, S]
        cache.k[layer][slot_idx, :, write_pos] = k.transpose(1, 2).to(cache.k.dtype)  # [B, S, Hkv, D]
        cache.v[layer][slot_idx, :, write_pos] = v.transpose(1, 2).to(cache.v.dtype)
        if slot_start is not None:
            keys = cache.k[layer, slot_start : slot_start + b, :, :kv_len]  # [B, Hkv, K, D], views
            values = cache.v[layer, slot_start : slot_start + b, :, :kv_len]
        else:
            keys = cache.k[layer][slots, :, :kv_len]  # gathered copies
            values = cache.v[layer][slots, :, :kv_len]
        out = F.scaled_dot_product_attention(
            q, keys.to(q.dtype), values.to(q.dtype), attn_mask=mask, enable_gqa=self.n_kv != self.n_heads
        )  # [B, H, S, D]
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, input_norm: bool = True):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        # EAGLE heads drop the first layer's input norm: their input is a learned fusion, not a residual stream
        self.input_layernorm: nn.Module = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps) if input_norm else nn.Identity()
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin for absolute positions [B, S] -> [B, S, D], computed in float32 like HF (padding -1 reads as 0)."""
    freqs = positions.clamp(min=0).float()[..., None] * inv_freq  # [B, S, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def run_layers(
    layers: nn.ModuleList,
    x: torch.Tensor,  # [B, S, hidden] the residual stream entering the first layer
    batch: BatchInput,
    cache: KVCache,
    inv_freq: torch.Tensor,  # [D/2]
) -> torch.Tensor:
    """The residual stream [B, S, hidden] after `layers`, each writing this batch's keys/values into `cache`.

    Shared by the decoder and by EAGLE heads (one decoder layer over fused features), so both attend the same way.
    """
    cos, sin = rope_tables(batch.positions, inv_freq)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    # Causal by absolute position: a query at position p sees cache columns 0..p of its own slot.
    key_pos = torch.arange(batch.kv_len, device=x.device)  # [K]
    q_pos = batch.positions.clamp(min=0)  # padding queries see column 0 and are ignored
    mask = (key_pos[None, None, :] <= q_pos[:, :, None]).unsqueeze(1)  # [B, 1, S, K]
    write_pos = torch.where(batch.positions >= 0, batch.positions, cache.max_len)  # scratch column
    for i, layer in enumerate(layers):
        h = layer.input_layernorm(x)
        x = x + layer.self_attn(h, cos, sin, mask, cache, i, write_pos, batch.slots, batch.kv_len, batch.slot_start)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return x


class Embedding(nn.Embedding):
    """nn.Embedding that leaves a meta-device table uninitialised: the loader builds the model on the meta device and
    assigns every tensor from the checkpoint, and `normal_`'s meta kernel imports torch._dynamo (about a second of
    every server's start, for numbers nobody keeps)."""

    def reset_parameters(self) -> None:
        if not self.weight.is_meta:
            super().reset_parameters()


class DecoderModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_tokens = Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class CausalLM(nn.Module):
    """The `*ForCausalLM` wrapper: `model.*` and `lm_head` as in Hugging Face checkpoints."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.model = DecoderModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin for absolute positions [B, S] -> [B, S, D], computed in float32 like HF."""
        return rope_tables(positions, self.inv_freq)

    def hidden_states(self, batch: BatchInput, cache: KVCache) -> torch.Tensor:
        """Final-norm hidden states [B, S, hidden] after writing this batch into the cache.

        These are what the LM head reads, and what an EAGLE head drafts from (the target's features).
        """
        x = self.model.embed_tokens(batch.tokens)  # [B, S, hidden]
        return self.model.norm(run_layers(self.model.layers, x, batch, cache, self.inv_freq))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits [..., V] in float32 from final-norm hidden states [..., hidden]."""
        return self.lm_head(hidden).float()

    def forward(self, batch: BatchInput, cache: KVCache, logits_rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, S, V] in float32; or, with `logits_rows` ([N] flat indices into B*S), [N, V].

        Computing logits only where they are needed (the last prompt token at prefill) saves the
        vocabulary projection for every other prompt position.
        """
        h = self.hidden_states(batch, cache)
        if logits_rows is not None:
            h = h.reshape(-1, h.shape[-1])[logits_rows]
        return self.logits(h)
