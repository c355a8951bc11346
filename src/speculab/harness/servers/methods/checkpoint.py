"""What a checkpoint directory's config.json says about speculation: MTP layers, architecture, sizes, head kind.

Pure over the files: `read_checkpoint(dir)` reads config.json (and a safetensors header when the config does not say
what kind of head it is); a missing or broken file is one UserError naming the path and the fix.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculab.errors import UserError

# config.json keys that count multi-token-prediction (next-n) layers, by the families that use them: DeepSeek-V3/R1,
# GLM-4.5, MiMo, ERNIE 4.5, LongCat, Bailing and most others `num_nextn_predict_layers`; Qwen3-Next/Qwen3.5
# `mtp_num_hidden_layers` (vLLM 0.32's config/speculative.py reads these two, also under `text_config`).
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
# where a head names the model it was trained for: Medusa / PEFT-style heads, vLLM's `speculators` format, SpecForge
BASE_MODEL_KEYS = ("base_model_name_or_path", "target_model", "base_model")
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_HEADER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CheckpointFacts:
    """What one checkpoint's config.json says (None: not said)."""

    path: str
    architecture: str | None  # architectures[0]
    model_type: str | None
    vocab_size: int | None
    hidden_size: int | None
    mtp_layers: int  # 0: none declared
    mtp_key: str | None  # the key that declared them
    head_kind: str | None  # eagle | eagle3 | medusa | mlp_speculator | dflash | dspark | None (an ordinary model)
    base_model: str | None  # the model a head says it was trained for
    draft_vocab_size: int | None = None  # EAGLE-3 / FR-Spec: the head drafts over this many target tokens
    name_or_path: str | None = None  # config.json's `_name_or_path`: the hub id it was saved from, when written
    heads: int | None = None  # the most tokens a head drafts: `medusa_num_heads`, an MLP speculator's `n_predict`
    heads_key: str | None = None  # the key that said it
    dspark_stages: bool = False  # the weights hold DSpark stages (`markov_head`/`confidence_head`, DeepSeek V4.1)

    @property
    def name(self) -> str:
        """The directory's name, as a model id's last part would be."""
        return Path(self.path).name


def read_json_file(f: Path, cap_bytes: int, what: str) -> Any:
    """A checkpoint's JSON file (config.json, tokenizer.json, ...), at most `cap_bytes`; one UserError naming it when
    it is too big to be `what` or not JSON."""
    if f.stat().st_size > cap_bytes:
        raise UserError(f"{f} is over {cap_bytes // 2**20} MiB; is it {what}?")
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{f} is not valid JSON ({e}); fix or replace the file") from None


def _config(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise UserError(f"{path}: not a directory; pass a local checkpoint directory (one holding config.json)")
    cfg = path / "config.json"
    if not cfg.is_file():
        raise UserError(f"{path} has no config.json; pass a Hugging Face-style checkpoint directory")
    data = read_json_file(cfg, MAX_CONFIG_BYTES, "a config.json")
    if not isinstance(data, dict):
        raise UserError(f"{cfg} is not a JSON object; fix or replace the file")
    return data


def _int(d: Mapping[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _str(d: Mapping[str, Any], key: str) -> str | None:
    v = d.get(key)
    return v if isinstance(v, str) and v else None


def _sub(d: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    """A nested object (multimodal `text_config`, `speculators_config.verifier`, ...), or {}."""
    for k in keys:
        v = d.get(k)
        if not isinstance(v, Mapping):
            return {}
        d = v
    return d


def _mtp(data: Mapping[str, Any]) -> tuple[int, str | None]:
    for where in (data, _sub(data, "text_config")):
        for key in MTP_KEYS:
            n = _int(where, key)
            if n:
                return n, key
    return 0, None


def safetensors_names(path: Path) -> frozenset[str]:
    """The tensor names in a directory's safetensors files, from their JSON headers only (no weights read)."""
    names: set[str] = set()
    for f in sorted(path.glob("*.safetensors")):
        try:
            with f.open("rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                if n > MAX_HEADER_BYTES:
                    continue
                header = json.loads(fh.read(n))
        except (OSError, struct.error, ValueError):
            continue  # a broken weight file is the engine's to report; here it only fails to say a head's kind
        if isinstance(header, dict):
            names.update(k for k in header if k != "__metadata__")
    return frozenset(names)


# architectures of vLLM 0.32's DFlash and DSpark drafts (model_executor/models/registry.py)
_DFLASH_ARCHS = ("dflash", "museglimmerassistantmodel")
_DSPARK_STAGE_TENSORS = ("markov_head", "confidence_head")


def _head_kind(data: Mapping[str, Any], tensors: frozenset[str]) -> str | None:
    arch = " ".join(str(a) for a in data.get("architectures") or []).lower()
    spec_type = str(_sub(data, "speculators_config").get("algorithm") or data.get("speculators_model_type") or "")
    if "medusa_num_heads" in data or "medusa" in arch or any(t.startswith("medusa_head") for t in tensors):
        return "medusa"
    if data.get("model_type") == "mlp_speculator" or "mlpspeculator" in arch:
        return "mlp_speculator"
    if "dspark" in arch or any(str(k).startswith("dspark_") for k in data):
        return "dspark"
    if any(a in arch for a in _DFLASH_ARCHS) or "dflash_config" in data:
        return "dflash"
    if "eagle3" in arch or "eagle3" in spec_type.lower() or ("d2t" in tensors and "midlayer" in " ".join(tensors)):
        return "eagle3"
    if "eagle" in arch or "eagle" in spec_type.lower() or "fc.weight" in tensors:
        return "eagle"
    return None


def _heads(data: Mapping[str, Any]) -> tuple[int | None, str | None]:
    for key in ("medusa_num_heads", "n_predict"):
        if n := _int(data, key):
            return n, key
    return None, None


def _base_model(data: Mapping[str, Any]) -> str | None:
    for key in BASE_MODEL_KEYS:
        if v := _str(data, key):
            return v
    return _str(_sub(data, "speculators_config", "verifier"), "name_or_path")


def read_checkpoint(path: Path | str) -> CheckpointFacts:
    """config.json of a local checkpoint directory -> its facts; UserError naming the file for a broken one."""
    path = Path(path).expanduser().resolve()  # absolute: the table's flags and init's file are used elsewhere
    data = _config(path)
    text = _sub(data, "text_config")
    layer = _sub(data, "transformer_layer_config")  # vLLM `speculators` heads keep the layer's sizes here
    archs = data.get("architectures")
    arch = str(archs[0]) if isinstance(archs, list) and archs else None
    mtp_layers, mtp_key = _mtp(data)
    heads, heads_key = _heads(data)
    tensors = safetensors_names(path) if not data.get("medusa_num_heads") else frozenset()
    return CheckpointFacts(
        path=str(path),
        architecture=arch,
        model_type=_str(data, "model_type") or _str(text, "model_type"),
        vocab_size=_int(data, "vocab_size") or _int(text, "vocab_size") or _int(layer, "vocab_size"),
        # an MLP speculator's `emb_dim` is its hidden size (vLLM's MLPSpeculatorConfig maps the one to the other)
        hidden_size=_int(data, "hidden_size")
        or _int(text, "hidden_size")
        or _int(layer, "hidden_size")
        or _int(data, "emb_dim"),
        mtp_layers=mtp_layers,
        mtp_key=mtp_key,
        head_kind=_head_kind(data, tensors),
        base_model=_base_model(data),
        draft_vocab_size=_int(data, "draft_vocab_size"),
        name_or_path=_str(data, "_name_or_path"),
        heads=heads,
        heads_key=heads_key,
        dspark_stages=any(stage in t for t in tensors for stage in _DSPARK_STAGE_TENSORS),
    )


def same_model(named: str, target: CheckpointFacts) -> bool:
    """Does a head's base-model name mean this target? Compared by the last path part (a hub id's model name, a
    local directory's name, the target's own `_name_or_path`), case-insensitively."""

    def last(n: str) -> str:
        return n.rstrip("/").rsplit("/", 1)[-1].lower()

    return last(named) in {last(n) for n in (target.name, target.name_or_path) if n}
