"""Tiny random models and a fake request row for speculative-decoding tests (fp32, CPU)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch

from speculab.engine.model import CausalLM, ModelConfig
from speculab.engine.speculative.proposers.eagle_head import EagleHead


def tiny_config(vocab_size: int = 32, num_hidden_layers: int = 2, hidden_size: int = 32) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=256,
    )


def tiny_lm(seed: int, **kwargs) -> CausalLM:
    """A random model whose logits are spread wide enough that greedy and sampling both vary by context."""
    torch.manual_seed(seed)
    model = CausalLM(tiny_config(**kwargs))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return model.eval()


def truncated_copy(target: CausalLM, num_layers: int) -> CausalLM:
    """A draft that shares the target's embedding, head and first layers: it agrees with the target often."""
    draft = copy.deepcopy(target)
    draft.model.layers = draft.model.layers[:num_layers]
    draft.config = dataclasses.replace(target.config, num_hidden_layers=num_layers)
    return draft


@dataclass(frozen=True)
class Params:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0


@dataclass
class Row:
    """Satisfies DraftSource."""

    request_id: str
    prompt_ids: list[int]
    output_ids: list[int] = field(default_factory=list)
    slot: int | None = 0
    generator: torch.Generator | None = None
    params: Params = field(default_factory=Params)


def sharp_lm(seed: int, vocab_size: int = 64, num_hidden_layers: int = 2, sharpen: float = 8.0) -> CausalLM:
    """A random model with a scaled-up head: peaked next-token distributions, loops in greedy text."""
    torch.manual_seed(seed)
    model = CausalLM(tiny_config(vocab_size=vocab_size, num_hidden_layers=num_hidden_layers)).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpen)
    return model


class LetterDetokenizer:
    """Token i renders as one letter (for stop strings); the concatenation of pushes equals the full decode."""

    def __init__(self, prompt_ids: list[int]):
        del prompt_ids

    def push(self, ids: list[int]) -> str:
        return "".join(chr(ord("a") + i % 26) for i in ids)

    def flush(self) -> str:
        return ""


def eagle_copy(target: CausalLM) -> EagleHead:
    """An EAGLE head that re-runs the target's layers on the embeddings alone (fc = [I | 0], features ignored).

    It differs from the target only in missing the first token and the first layer's input norm, so its drafts
    agree with the target often: acceptance moves, and rejections still happen.
    """
    cfg = target.config
    head = EagleHead(cfg).eval()
    h = cfg.hidden_size
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.weight[:, :h] = torch.eye(h)
        for mine, theirs in zip(head.layers, target.model.layers, strict=True):
            norm = mine.input_layernorm
            mine.load_state_dict(theirs.state_dict(), strict=False)
            mine.input_layernorm = (
                norm if isinstance(norm, torch.nn.Identity) else copy.deepcopy(theirs.input_layernorm)
            )
    return head.requires_grad_(False)


def random_eagle(target: CausalLM, seed: int, num_hidden_layers: int = 1, fc_bias: bool = False) -> EagleHead:
    """A random EAGLE head for `target` (drafts rarely accepted: exercises rejections and resampling)."""
    torch.manual_seed(seed)
    cfg = dataclasses.replace(target.config, num_hidden_layers=num_hidden_layers)
    head = EagleHead(cfg, fc_bias=fc_bias).eval()
    with torch.no_grad():
        for p in head.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
            elif fc_bias and p is head.fc.bias:
                p.normal_(0, 0.1)
    return head.requires_grad_(False)


def save_eagle_checkpoint(head: EagleHead, path: Path) -> Path:
    """`head` as an HF-format EAGLE checkpoint directory (config.json + model.safetensors), as vLLM would load it."""
    import json

    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.clone().contiguous() for k, v in head.state_dict().items()}, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(head.to_hf()))
    return path


def make_tiny_eagle(target_dir: Path, path: Path, seed: int = 1) -> Path:
    """A random EAGLE head checkpoint for the checkpoint at `target_dir` (e.g. tests/fakes/tiny_checkpoint's)."""
    from speculab.engine.loader import load_model

    target = load_model(target_dir)
    return save_eagle_checkpoint(eagle_copy(target) if seed == 0 else random_eagle(target, seed), path)
