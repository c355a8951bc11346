"""`--speculative-config`: which proposer, how many tokens; vLLM's key names where they overlap.

    {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    {"method": "draft_model", "model": "PATH or demo-draft", "num_speculative_tokens": 4}
    {"method": "eagle", "model": "PATH or demo-eagle", "num_speculative_tokens": 4}

Every method also takes vLLM's "disable_by_batch_size" (no drafts in a step with more decode rows than this)
and speculab's "adaptive": true (k chosen per step in 0..num_speculative_tokens; speculative/adaptive.py).
As in vLLM, a config with "model" and no "method" means a draft model. Every mistake is a SpecConfigError
naming the key and the fix, raised at start-up before any model is loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speculab.errors import UserError

if TYPE_CHECKING:
    import torch

    from speculab.engine.model import CausalLM, ModelConfig
    from speculab.engine.speculative.forced import ForcedAcceptance
    from speculab.engine.speculative.proposers.proposer import Proposer
    from speculab.engine.speculative.speculator import Speculator

METHODS = ("ngram", "draft_model", "eagle")
MODEL_METHODS = {"draft_model": "demo-draft", "eagle": "demo-eagle"}  # methods that need "model", and their demo
MAX_SPECULATIVE_TOKENS = 32
DEFAULT_PROMPT_LOOKUP_MAX = 4
DEFAULT_PROMPT_LOOKUP_MIN = 1
_COMMON_KEYS = {"method", "num_speculative_tokens", "disable_by_batch_size", "adaptive"}
_KEYS = {
    "ngram": _COMMON_KEYS | {"prompt_lookup_max", "prompt_lookup_min"},
    "draft_model": _COMMON_KEYS | {"model"},
    "eagle": _COMMON_KEYS | {"model"},
}
_EXAMPLES = (
    '\'{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}\', '
    '\'{"method":"draft_model","model":"PATH","num_speculative_tokens":4}\' or '
    '\'{"method":"eagle","model":"PATH","num_speculative_tokens":4}\''
)


class SpecConfigError(UserError):
    """The speculative config is malformed; the message names the key."""


@dataclass(frozen=True, slots=True)
class SpecConfig:
    """A validated speculative-decoding configuration."""

    method: str  # "ngram" | "draft_model" | "eagle"
    num_speculative_tokens: int  # k; with adaptive, the most drafts a step may choose
    prompt_lookup_max: int = DEFAULT_PROMPT_LOOKUP_MAX  # ngram only
    prompt_lookup_min: int = DEFAULT_PROMPT_LOOKUP_MIN  # ngram only
    model: str | None = None  # draft_model / eagle: a directory, or "demo-draft" / "demo-eagle"
    disable_by_batch_size: int | None = None  # no drafts in a step with more decode rows than this (vLLM)
    adaptive: bool = False  # choose k per step from acceptance and measured cost (speculab)

    def to_json(self) -> dict[str, Any]:
        """The config in the same keys it was given in (for /version, logs and reports)."""
        out: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.method == "ngram":
            out |= {"prompt_lookup_max": self.prompt_lookup_max, "prompt_lookup_min": self.prompt_lookup_min}
        else:
            out["model"] = self.model
        if self.disable_by_batch_size is not None:
            out["disable_by_batch_size"] = self.disable_by_batch_size
        if self.adaptive:
            out["adaptive"] = True
        return out


def _int(data: dict[str, Any], key: str, lo: int, hi: int) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecConfigError(f"speculative config: {key} must be an integer, got {json.dumps(value)}")
    if not lo <= value <= hi:
        raise SpecConfigError(f"speculative config: {key} must be between {lo} and {hi}, got {value}")
    return value


def parse_spec_config(text: str | dict[str, Any]) -> SpecConfig:
    """A JSON object (string or dict) -> SpecConfig, or SpecConfigError naming the offending key."""
    if isinstance(text, str):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecConfigError(
                f"speculative config is not valid JSON ({e.msg} at char {e.pos}); e.g. {_EXAMPLES}"
            ) from None
    else:
        data = text
    if not isinstance(data, dict):
        raise SpecConfigError(f"speculative config must be a JSON object, e.g. {_EXAMPLES}")
    method = data.get("method", "draft_model" if "model" in data else None)
    if method is None:
        raise SpecConfigError(f"speculative config: missing key method (one of {', '.join(METHODS)})")
    if method not in METHODS:
        raise SpecConfigError(
            f"speculative config: method {json.dumps(method)} is not supported by speculab's engine; use one of "
            f"{', '.join(METHODS)}"
        )
    unknown = sorted(set(data) - _KEYS[method])
    if unknown:
        raise SpecConfigError(
            f"speculative config: unknown key {unknown[0]} for method {method} "
            f"(allowed: {', '.join(sorted(_KEYS[method]))})"
        )
    if "num_speculative_tokens" not in data:
        raise SpecConfigError("speculative config: missing key num_speculative_tokens (e.g. 4)")
    k = _int(data, "num_speculative_tokens", 1, MAX_SPECULATIVE_TOKENS)
    common: dict[str, Any] = {}
    if "disable_by_batch_size" in data:
        common["disable_by_batch_size"] = _int(data, "disable_by_batch_size", 1, 1_000_000)
    if "adaptive" in data:
        if not isinstance(data["adaptive"], bool):
            raise SpecConfigError(
                f"speculative config: adaptive must be true or false, got {json.dumps(data['adaptive'])}"
            )
        common["adaptive"] = data["adaptive"]
    if method == "ngram":
        has_max, has_min = "prompt_lookup_max" in data, "prompt_lookup_min" in data
        n_max = _int(data, "prompt_lookup_max", 1, 1024) if has_max else None
        n_min = _int(data, "prompt_lookup_min", 1, 1024) if has_min else None
        # One bound given alone: the other follows it (a lone max keeps min 1; a lone min sets max to it).
        n_max = n_max if n_max is not None else max(DEFAULT_PROMPT_LOOKUP_MAX, n_min or 0)
        n_min = n_min if n_min is not None else DEFAULT_PROMPT_LOOKUP_MIN
        if n_min > n_max:
            raise SpecConfigError(
                f"speculative config: prompt_lookup_min ({n_min}) must not exceed prompt_lookup_max ({n_max})"
            )
        return SpecConfig(method, k, prompt_lookup_max=n_max, prompt_lookup_min=n_min, **common)
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise SpecConfigError(
            f"speculative config: method {method} needs key model (a model directory, or {MODEL_METHODS[method]})"
        )
    return SpecConfig(method, k, model=model, **common)


def build_proposer(
    config: SpecConfig,
    *,
    target_config: ModelConfig,
    target_dir: Path,
    num_slots: int,
    max_len: int,
    dtype: torch.dtype | None = None,
    device: torch.device | str = "cpu",
    target: CausalLM | None = None,
) -> Proposer:
    """The proposer a config names; a draft model or EAGLE head is resolved, checked against the target, loaded.

    An EAGLE head shares the target's embedding and LM head, so it needs the loaded `target`.
    """
    from speculab.engine.speculative.proposers.ngram import NgramProposer

    if config.method == "ngram":
        return NgramProposer(config.num_speculative_tokens, config.prompt_lookup_max, config.prompt_lookup_min)

    from speculab.engine.loader import load_model, read_config, resolve_model_path

    assert config.model is not None
    if config.method == "eagle":
        from speculab.engine.speculative.proposers.eagle import EagleProposer
        from speculab.engine.speculative.proposers.eagle_head import load_eagle_head

        if target is None:
            raise ValueError("an EAGLE proposer needs the loaded target model")
        head = load_eagle_head(config.model, target, dtype=dtype, device=device)
        return EagleProposer(head, target, config.num_speculative_tokens, num_slots=num_slots, max_len=max_len)

    from speculab.engine.speculative.proposers.draft_model import DraftModelProposer, check_same_vocabulary

    draft_dir = resolve_model_path(config.model)
    draft_config = read_config(draft_dir)
    check_same_vocabulary(target_dir, draft_dir, target_config.vocab_size, draft_config.vocab_size)
    model = load_model(draft_dir, dtype=dtype, device=device)
    return DraftModelProposer(
        model,
        config.num_speculative_tokens,
        num_slots=num_slots,
        max_len=max_len,
        target_vocab_size=target_config.vocab_size,
    )


def build_speculator(
    config: SpecConfig,
    *,
    target: CausalLM,
    target_dir: Path,
    num_slots: int,
    max_len: int,
    forced: ForcedAcceptance | None = None,
) -> Speculator:
    """The engine's speculation hook for a config: its proposer, the skip / adaptive-k settings, and forced
    acceptance when asked (a cost probe: speculative/forced.py)."""
    from speculab.engine.speculative.adaptive import AdaptivePolicy
    from speculab.engine.speculative.speculator import Speculator

    p = next(target.parameters())
    proposer = build_proposer(
        config,
        target_config=target.config,
        target_dir=target_dir,
        num_slots=num_slots,
        max_len=max_len,
        dtype=p.dtype,
        device=p.device,
        target=target,
    )
    adaptive = AdaptivePolicy(config.num_speculative_tokens) if config.adaptive else None
    return Speculator(proposer, disable_by_batch_size=config.disable_by_batch_size, adaptive=adaptive, forced=forced)
