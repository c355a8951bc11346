"""Hugging Face model directories for the demo pair: fp16 safetensors (sharded under a size cap), configs, tokenizer.

fp16 rather than bf16: the weights of a small model trained with weight decay sit far inside fp16's range, fp16
keeps 3 more mantissa bits (closer to the trained fp32 weights), and transformers runs fp16 on CPU too.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from speculab.engine.model import CausalLM

MAX_SHARD_BYTES = 14 * 2**20  # every file must stay under 15 MiB (the GPU machine returns files <= 16 MiB)
TAR_PART_BYTES = 15 * 2**20


def export_state_dict(model: CausalLM, dtype: torch.dtype = torch.float16) -> dict[str, torch.Tensor]:
    """HF-named tensors in `dtype`; a tied lm_head is left out, as transformers saves it."""
    sd = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        out = t.detach().to("cpu", dtype).contiguous()
        if not torch.isfinite(out).all():
            raise ValueError(f"{name} does not fit in {dtype} (non-finite after conversion)")
        sd[name] = out
    return sd


def shard(sd: dict[str, torch.Tensor], max_bytes: int) -> list[dict[str, torch.Tensor]]:
    """Greedy, in name order: a new shard when the next tensor would cross max_bytes."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name in sorted(sd):
        nbytes = sd[name].numel() * sd[name].element_size()
        if nbytes > max_bytes:
            raise ValueError(f"tensor {name} ({nbytes} bytes) exceeds the shard cap of {max_bytes} bytes")
        if size + nbytes > max_bytes and shards[-1]:
            shards.append({})
            size = 0
        shards[-1][name] = sd[name]
        size += nbytes
    return shards


def save_model_dir(
    model: CausalLM,
    out_dir: Path,
    tokenizer_files: dict[str, str],
    generation_config: dict,
    max_shard_bytes: int = MAX_SHARD_BYTES,
) -> list[Path]:
    """Write an HF-format directory; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sd = export_state_dict(model)
    shards = shard(sd, max_shard_bytes)
    written = []
    if len(shards) == 1:
        save_file(shards[0], str(out_dir / "model.safetensors"), metadata={"format": "pt"})
        written.append(out_dir / "model.safetensors")
    else:
        weight_map = {}
        for i, part in enumerate(shards, 1):
            fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            save_file(part, str(out_dir / fname), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(part, fname))
            written.append(out_dir / fname)
        total = sum(t.numel() * t.element_size() for t in sd.values())
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
        written.append(out_dir / "model.safetensors.index.json")
    config = {**model.config.to_hf(), "torch_dtype": "float16"}
    texts = {
        "config.json": json.dumps(config, indent=2) + "\n",
        "generation_config.json": json.dumps(generation_config, indent=2) + "\n",
        **tokenizer_files,
    }
    for fname, text in texts.items():
        (out_dir / fname).write_text(text)
        written.append(out_dir / fname)
    return written


def bundle(src_dir: Path, dest_dir: Path, part_bytes: int = TAR_PART_BYTES) -> tuple[list[Path], str]:
    """One tar of src_dir, split into parts of at most part_bytes; returns the parts and the tar's sha256.

    Restore with: cat demo.tar.part* | tar -xf - -C DEST
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in src_dir.rglob("*") if p.is_file()):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(src_dir).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with path.open("rb") as f:
                tar.addfile(info, f)
    data = buf.getvalue()
    dest_dir.mkdir(parents=True, exist_ok=True)
    parts = []
    for i in range(0, len(data), part_bytes):
        part = dest_dir / f"demo.tar.part{i // part_bytes:02d}"
        part.write_bytes(data[i : i + part_bytes])
        parts.append(part)
    return parts, hashlib.sha256(data).hexdigest()
