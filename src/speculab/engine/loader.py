"""Load a Hugging Face-format model directory (config.json + safetensors, single or sharded) into our CausalLM.

The model is built on the meta device (no memory), then each tensor is read from safetensors straight onto the
target device, cast to the target dtype, and assigned in place of the meta parameter: peak memory is the model
plus one tensor, never two copies of the model. Nothing is ever downloaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from speculab.demo_models import SHIPPED_MODELS
from speculab.engine.model import CausalLM, ModelConfig, lay_out_for_cpu, rope_inv_freq
from speculab.errors import UserError

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Keys some checkpoints carry that are derived state, not weights (old Llama conversions saved rotary inv_freq).
_IGNORED_KEY = re.compile(r"\.rotary_emb\.inv_freq$")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


class ModelLoadError(UserError):
    """The model directory is missing, incomplete, or its weights do not fit its config."""


def resolve_model_path(name_or_path: str | Path) -> Path:
    """ "demo" / "demo-draft" / "demo-eagle" -> the shipped demo models; anything else must be a local directory."""
    name = str(name_or_path)
    if name in SHIPPED_MODELS:
        path = SHIPPED_MODELS[name]
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"the shipped {name!r} model is missing from this install (expected {path}); "
                "reinstall speculab or pass a local model directory"
            )
        return path
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ModelLoadError(f"{name} is a file; pass the model directory that holds config.json and the weights")
    if _HUB_NAME.match(name) and not name.startswith((".", "~")):
        raise ModelLoadError(
            f"no local directory {name!r}; speculab never downloads models - download it first "
            f"(e.g. `huggingface-cli download {name} --local-dir ./{name.split('/')[-1]}`) and pass that directory"
        )
    raise ModelLoadError(f"model directory {name} does not exist; pass a directory with config.json + safetensors")


def parse_dtype(name: str | torch.dtype | None) -> torch.dtype | None:
    """'bfloat16' / 'bf16' / 'float32' / 'float16' / 'auto' (None) -> torch dtype; for CLI flags."""
    if name is None or isinstance(name, torch.dtype):
        return name
    if name == "auto":
        return None
    try:
        return _DTYPES[name.lower()]
    except KeyError:
        raise UserError(f"unknown dtype {name!r}; use one of auto, float32, bfloat16, float16") from None


def default_dtype(device: torch.device) -> torch.dtype:
    """float32 on CPU (exact, and CPU bf16 matmuls are slow); bfloat16 on accelerators."""
    return torch.float32 if device.type == "cpu" else torch.bfloat16


def read_config(path: Path) -> ModelConfig:
    """config.json -> ModelConfig; raises UnsupportedModelError (a UserError) for other architectures."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ModelLoadError(f"{path} has no config.json; pass a Hugging Face-format model directory")
    try:
        raw: dict[str, Any] = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{cfg_file} is not valid JSON ({e}); re-download or fix the file") from None
    try:
        return ModelConfig.from_hf(raw)
    except KeyError as e:
        raise ModelLoadError(f"{cfg_file} lacks required field {e.args[0]!r}") from None


def weight_files(path: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it (single file, or via the sharded index)."""
    index = path / INDEX_FILE
    if index.is_file():
        try:
            weight_map: dict[str, str] = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ModelLoadError(f"{index} is malformed ({e!r}); re-download the model") from None
        files = {name: path / fname for name, fname in weight_map.items()}
        absent = sorted({str(f.name) for f in files.values() if not f.is_file()})
        if absent:
            raise ModelLoadError(f"{path} is missing weight shard(s) {', '.join(absent)} named in {INDEX_FILE}")
        return files
    single = path / SINGLE_FILE
    if single.is_file():
        with safe_open(str(single), framework="pt") as f:
            return dict.fromkeys(f.keys(), single)
    hint = " (pytorch_model.bin is not supported: convert it to safetensors)" if any(path.glob("*.bin")) else ""
    raise ModelLoadError(f"{path} has neither {SINGLE_FILE} nor {INDEX_FILE}{hint}")


def _check_keys(expected: dict[str, torch.Size], found: dict[str, Path], path: Path) -> None:
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    if not missing and not unexpected:
        return

    def listing(keys: list[str]) -> str:
        shown = ", ".join(keys[:8])
        return f"{shown}, ... ({len(keys)} in all)" if len(keys) > 8 else shown

    parts = []
    if missing:
        parts.append(f"missing keys: {listing(missing)}")
    if unexpected:
        parts.append(f"unexpected keys: {listing(unexpected)}")
    raise ModelLoadError(f"weights in {path} do not match its config.json; " + "; ".join(parts))


def _check_device(device: str | torch.device) -> torch.device:
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ModelLoadError(f"unknown device {str(device)!r}; use cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device {dev} requested but CUDA is not available here; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(f"device {dev} does not exist; this machine has {torch.cuda.device_count()} GPU(s)")
    return dev


def load_model(path: str | Path, *, dtype: torch.dtype | None = None, device: str | torch.device = "cpu") -> CausalLM:
    """Load a model directory (or "demo"/"demo-draft") in eval mode on `device`; dtype defaults per device."""
    root = resolve_model_path(path)
    cfg = read_config(root)
    dev = _check_device(device)
    dtype = dtype or default_dtype(dev)
    files = weight_files(root)

    with torch.device("meta"):
        model = CausalLM(cfg)
    tied = cfg.tie_word_embeddings
    expected = {k: v.shape for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    # Tied checkpoints may or may not store lm_head.weight (a copy of the embedding); both are fine.
    found = {k: f for k, f in files.items() if not _IGNORED_KEY.search(k) and not (tied and k == "lm_head.weight")}
    _check_keys(expected, found, root)

    by_file: dict[Path, list[str]] = {}
    for name, f in found.items():
        by_file.setdefault(f, []).append(name)
    state: dict[str, torch.Tensor] = {}
    # safetensors can place tensors on cuda directly; 'cuda' without an index means the current device.
    st_device = str(dev) if dev.type != "cuda" or dev.index is not None else f"cuda:{torch.cuda.current_device()}"
    for f, names in by_file.items():
        with safe_open(str(f), framework="pt", device=st_device) as sf:
            for name in names:
                t = sf.get_tensor(name)
                if t.shape != expected[name]:
                    raise ModelLoadError(
                        f"{name} in {f.name} has shape {tuple(t.shape)}, config.json implies {tuple(expected[name])}"
                    )
                state[name] = t.to(dtype)
    model.load_state_dict(state, strict=False, assign=True)
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight
    # Non-persistent buffers are not in checkpoints: compute them on the real device.
    model.inv_freq = rope_inv_freq(cfg).to(dev)
    leftover = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if leftover:  # a bug in this loader, not a user mistake
        raise RuntimeError(f"parameters left unloaded: {leftover}")
    lay_out_for_cpu(model)
    return model.eval().requires_grad_(False)
