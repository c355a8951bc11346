"""An EAGLE(-1) head: a decoder layer over the target's own features, sharing the target's embedding and LM head.

The target's final-norm hidden state h_i (what its LM head reads at position i) is fused with the embedding of
the token that followed it, t_{i+1}, and run through the head's decoder layer(s) at position i; the output is a
prediction of the target's next feature, f_{i+1} ~ h_{i+1}, and the LM head applied to it scores t_{i+2}:

    f_{i+1} = layers(fc(concat(embed(t_{i+1}), h_i)))      # [.., hidden]; no final norm (h is already normed)
    logits  = lm_head(f_{i+1})                              # the target's LM head, unless the head has its own

Drafting continues from the head's own prediction: (embed(draft_1), f_{i+1}) at position i + 1, and so on.

Checkpoints are the layout SafeAILab/EAGLE trains and vLLM's `EagleLlamaForCausalLM` loads for Llama targets
(e.g. yuhuili/EAGLE-LLaMA3-Instruct-8B): a config.json with LlamaForCausalLM fields (hidden_size, usually
num_hidden_layers = 1, heads, intermediate_size, rope_theta, vocab_size) and the weights

    fc.weight [hidden, 2 * hidden]               fc.bias [hidden] when trained with one (EAGLE's "bias": true)
    layers.{i}.self_attn.{q,k,v,o}_proj.weight   layers.{i}.mlp.{gate,up,down}_proj.weight
    layers.{i}.post_attention_layernorm.weight   layers.{i}.input_layernorm.weight for i > 0 only
    embed_tokens.weight                          optional: a frozen copy of the target's; the target's is used
    lm_head.weight                               optional: the head's own LM head; else the target's
    d2t [N]                                      optional: a draft vocabulary (below)

in model.safetensors (or its sharded index) or pytorch_model.bin (read with torch.load(weights_only=True): tensors
only, no code), optionally under a "model." prefix. Layer 0 has no input norm (EAGLE's cnets and vLLM both skip
it; a stored layers.0.input_layernorm.weight is ignored, as they ignore it).

A draft vocabulary (FR-Spec; EAGLE-3's `d2t` and `draft_vocab_size`, here for an EAGLE-1 head): the head scores
only N frequent tokens, draft id j meaning target token j + d2t[j]; q is zero elsewhere, so verification stays
exact and drafts never propose a token outside it. It exists for speed where the LM head dominates the head's
cost (a small model's vocabulary projection is most of its bytes); vLLM's EAGLE-1 loader skips the tensor and
drafts over the whole vocabulary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from speculab.engine.model import (
    SUPPORTED_ARCHITECTURES,
    BatchInput,
    CausalLM,
    DecoderLayer,
    KVCache,
    ModelConfig,
    UnsupportedModelError,
    lay_out_for_cpu,
    rope_inv_freq,
    run_layers,
)
from speculab.errors import UserError

# EAGLE checkpoints name the target's architecture; vLLM rewrites Llama ones to this name internally
_ARCH_ALIASES = {"EagleLlamaForCausalLM": "LlamaForCausalLM", "LlamaForCausalLMEagle": "LlamaForCausalLM"}
_IGNORED = re.compile(r"(^embed_tokens\.weight$)|(^layers\.0\.input_layernorm\.weight$)|(\.rotary_emb\.inv_freq$)")


class EagleHeadError(UserError):
    """The EAGLE head cannot draft for this target (another hidden size or vocabulary) or its files are broken."""


class EagleHead(nn.Module):
    """fc + decoder layers (+ an optional own lm_head); the target's embedding and LM head are passed in."""

    def __init__(
        self, cfg: ModelConfig, fc_bias: bool = False, own_lm_head: bool = False, draft_vocab_size: int | None = None
    ):
        super().__init__()
        h = cfg.hidden_size
        self.config = cfg
        self.fc = nn.Linear(2 * h, h, bias=fc_bias)
        self.layers = nn.ModuleList(DecoderLayer(cfg, input_norm=i > 0) for i in range(cfg.num_hidden_layers))
        rows = draft_vocab_size or cfg.vocab_size
        self.lm_head: nn.Linear | None = nn.Linear(h, rows, bias=False) if own_lm_head else None
        self.d2t: torch.Tensor | None
        if draft_vocab_size:
            self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))  # target id = j + d2t[j]
        else:
            self.d2t = None
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def draft_token_ids(self) -> torch.Tensor | None:
        """The target token ids [N] the head drafts over, or None: the whole vocabulary."""
        if self.d2t is None:
            return None
        return torch.arange(self.d2t.numel(), device=self.d2t.device) + self.d2t

    def set_draft_vocab(self, token_ids: torch.Tensor) -> None:
        """Restrict drafting to `token_ids` [N] (sorted, distinct target ids)."""
        ids = token_ids.long().sort().values
        self.__dict__.pop("d2t", None)  # a plain None attribute until the buffer exists
        self.register_buffer("d2t", ids - torch.arange(ids.numel(), device=ids.device))

    def forward(
        self,
        embeds: torch.Tensor,  # [B, S, hidden] the target's embedding of t_{i+1}
        features: torch.Tensor,  # [B, S, hidden] h_i: the target's final-norm hidden state (or the head's f_i)
        batch: BatchInput,  # positions i (the feature's position), slots, kv_len
        cache: KVCache,  # the head's own cache
    ) -> torch.Tensor:
        """Predicted next features [B, S, hidden]; the LM head turns them into logits for the token after next."""
        x = self.fc(torch.cat((embeds, features.to(embeds.dtype)), dim=-1))  # [B, S, hidden]
        return run_layers(self.layers, x, batch, cache, self.inv_freq)

    def to_hf(self) -> dict[str, Any]:
        """config.json for this head: Llama fields, EAGLE's "bias" key for fc, EAGLE-3's draft_vocab_size if any."""
        extra = {} if self.d2t is None else {"draft_vocab_size": self.d2t.numel()}
        return {**self.config.to_hf(), "bias": self.fc.bias is not None, **extra}


def _read_config(path: Path) -> ModelConfig:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise EagleHeadError(f"EAGLE head {path} has no config.json; pass the directory of an EAGLE checkpoint")
    try:
        raw: dict[str, Any] = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise EagleHeadError(f"{cfg_file} is not valid JSON ({e}); re-download or fix the file") from None
    archs = raw.get("architectures") or ["LlamaForCausalLM"]
    arch = _ARCH_ALIASES.get(archs[0], archs[0])
    if arch not in SUPPORTED_ARCHITECTURES:
        raise EagleHeadError(
            f"EAGLE head {path} is a {archs[0]}; speculab loads EAGLE-1 heads for {', '.join(SUPPORTED_ARCHITECTURES)} "
            "targets (EAGLE-3 and MTP heads are not supported)"
        )
    raw = {**raw, "architectures": [arch]}
    try:
        return ModelConfig.from_hf(raw)
    except KeyError as e:
        raise EagleHeadError(f"{cfg_file} lacks required field {e.args[0]!r}") from None
    except UnsupportedModelError as e:
        raise EagleHeadError(f"EAGLE head {path}: {e}") from None


def check_head_fits(path: Path, head_cfg: ModelConfig, target_cfg: ModelConfig) -> None:
    """One-line errors for a head trained for another target: hidden size and vocabulary must match."""
    if head_cfg.hidden_size != target_cfg.hidden_size:
        raise EagleHeadError(
            f"EAGLE head {path} has hidden_size {head_cfg.hidden_size} but the target has {target_cfg.hidden_size}; "
            "an EAGLE head drafts from its target's hidden states: use the head trained for this target"
        )
    if head_cfg.vocab_size != target_cfg.vocab_size:
        raise EagleHeadError(
            f"EAGLE head {path} has vocab_size {head_cfg.vocab_size} but the target has {target_cfg.vocab_size}; "
            "use the head trained for this target"
        )


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint by name, on the CPU (heads are small: one layer and fc)."""
    from safetensors import safe_open

    from speculab.engine.loader import INDEX_FILE, SINGLE_FILE, ModelLoadError, weight_files

    if (path / SINGLE_FILE).is_file() or (path / INDEX_FILE).is_file():
        try:
            files = weight_files(path)
        except ModelLoadError as e:
            raise EagleHeadError(str(e)) from None
        out: dict[str, torch.Tensor] = {}
        for f in sorted(set(files.values())):
            with safe_open(str(f), framework="pt") as sf:
                out.update({k: sf.get_tensor(k) for k in sf.keys()})  # noqa: SIM118 (safe_open is not iterable)
        return out
    bin_file = path / "pytorch_model.bin"
    if bin_file.is_file():
        # weights_only: plain tensors and containers are rebuilt, nothing in the file is executed
        try:
            state = torch.load(str(bin_file), map_location="cpu", weights_only=True)
        except Exception as e:  # a truncated or non-tensor pickle: a broken download, not our bug
            raise EagleHeadError(f"{bin_file} cannot be read as a tensor file ({type(e).__name__}: {e})") from None
        if not isinstance(state, dict):
            raise EagleHeadError(f"{bin_file} does not hold a state dict")
        return state
    raise EagleHeadError(f"EAGLE head {path} has none of {SINGLE_FILE}, {INDEX_FILE}, pytorch_model.bin")


def load_eagle_head(
    path: str | Path, target: CausalLM, *, dtype: torch.dtype | None = None, device: str | torch.device | None = None
) -> EagleHead:
    """Load and check an EAGLE head directory (or "demo-eagle") for `target`, in the target's dtype and device."""
    from speculab.engine.loader import resolve_model_path

    root = resolve_model_path(path)
    cfg = _read_config(root)
    check_head_fits(root, cfg, target.config)
    p = next(target.parameters())
    dtype, device = dtype or p.dtype, device or p.device
    raw = {(k[len("model.") :] if k.startswith("model.") else k): v for k, v in _tensors(root).items()}
    emb = raw.get("embed_tokens.weight")
    if emb is not None and tuple(emb.shape) != tuple(target.model.embed_tokens.weight.shape):
        raise EagleHeadError(
            f"EAGLE head {root} embeds {emb.shape[0]} tokens of width {emb.shape[1]}; the target's embedding is "
            f"{tuple(target.model.embed_tokens.weight.shape)}: use the head trained for this target"
        )
    found = {k: v for k, v in raw.items() if not _IGNORED.search(k)}
    d2t = found.get("d2t")
    if d2t is not None:
        ids = torch.arange(d2t.numel()) + d2t.long()
        if (
            d2t.dim() != 1
            or ids.min() < 0
            or ids.max() >= target.config.vocab_size
            or ids.unique().numel() != ids.numel()
        ):
            raise EagleHeadError(f"EAGLE head {root}: d2t does not map to distinct ids of the target's vocabulary")
    with torch.device("meta"):
        head = EagleHead(
            cfg,
            fc_bias="fc.bias" in found,
            own_lm_head="lm_head.weight" in found,
            draft_vocab_size=None if d2t is None else d2t.numel(),
        )
    expected = {k: v.shape for k, v in head.state_dict().items()}
    missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing or unexpected:
        parts = [f"missing {', '.join(missing[:6])}" if missing else "", f"unexpected {', '.join(unexpected[:6])}"]
        raise EagleHeadError(
            f"EAGLE head {root} does not have EAGLE-1's layout ({'; '.join(x for x in parts if x.strip())}); "
            "expected fc.weight and layers.N.* (docs/speculative.md)"
        )
    for name, t in found.items():
        if t.shape != expected[name]:
            raise EagleHeadError(
                f"EAGLE head {root}: {name} has shape {tuple(t.shape)}, its config.json implies {tuple(expected[name])}"
            )
    head.load_state_dict(
        {k: v.to(device) if k == "d2t" else v.to(device, dtype) for k, v in found.items()}, strict=True, assign=True
    )
    head.inv_freq = rope_inv_freq(cfg).to(device)
    lay_out_for_cpu(head)
    return head.eval().requires_grad_(False)
