"""Convert the shipped demo pair (src/speculab/engine/assets/demo/{target,draft}) to GGUF for llama.cpp, offline.

    python scripts/demo_gguf.py [--llamacpp-dir DIR] [--out DIR] [--outtype f16|f32] [--force]

Uses llama.cpp's own converter (`convert_hf_to_gguf.py` with its `conversion/` and `gguf-py/`), which
`scripts/install_llama_server.sh` copies to `$SPECULAB_LLAMACPP_DIR/convert` from the same source tree it builds
`llama-server` from, so the GGUF files and the server are of one version. Output: `$DIR/demo/target.gguf`,
`$DIR/demo/draft.gguf` and `$DIR/demo/source.json` (the SHA-256 of every input file: a retrained pair is converted
again, an unchanged one is left alone). Needs torch, transformers and sentencepiece importable (the converter
imports them); nothing is downloaded.

The pre-tokenizer. The converter names a BPE tokenizer's pre-tokenizer (`tokenizer.ggml.pre`, which selects the
split regex llama.cpp applies before BPE) by hashing the ids of a fixed test string and looking the hash up in a
table of known models; our tokenizer was trained here, so its hash is in no table and the converter stops with "BPE
pre-tokenizer was not recognized". Our tokenizer is byte-level BPE with GPT-2's pre-tokenization exactly:
`pre_tokenizer` is `ByteLevel` with `use_regex: true` (GPT-2's split regex) and `add_prefix_space: false`, no
normalizer, no byte fallback. That is llama.cpp's `gpt-2` pre-tokenizer (LLAMA_VOCAB_PRE_TYPE_GPT2; `gpt2` is not a
name llama.cpp knows). This script checks those properties in tokenizer.json and, only when they hold, names the
pre-tokenizer `gpt-2` (what an entry in the converter's table, as `convert_hf_to_gguf_update.py` adds for a published
model, would say); any other tokenizer goes through the converter's table unchanged. The integration test
(tests/integration/test_llamacpp_demo.py) checks that llama-server's /tokenize gives our tokenizer's ids.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO_ASSETS = REPO / "src" / "speculab" / "engine" / "assets" / "demo"
PAIR = ("target", "draft")
LLAMA_PRE = "gpt-2"  # llama.cpp's name for GPT-2's pre-tokenizer regex (llama-vocab.cpp)


def default_llamacpp_dir() -> Path:
    return Path(os.environ.get("SPECULAB_LLAMACPP_DIR", Path.home() / ".cache" / "speculab" / "llama.cpp"))


def gpt2_pre_tokenization(tokenizer_json: Path) -> list[str]:
    """What keeps this tokenizer from being GPT-2-style byte-level BPE ([] when nothing does)."""
    tok = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    model, pre, norm = tok.get("model") or {}, tok.get("pre_tokenizer") or {}, tok.get("normalizer")
    problems = []
    if model.get("type") != "BPE":
        problems.append(f"model is {model.get('type')!r}, not BPE")
    if model.get("byte_fallback"):
        problems.append("byte_fallback is on (GPT-2 byte-level BPE needs none)")
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) or pre.get("add_prefix_space", True):
        problems.append(f"pre_tokenizer is {pre!r}, not ByteLevel with GPT-2's regex and no prefix space")
    if norm is not None:
        problems.append(f"normalizer is {norm!r} (GPT-2 has none)")
    return problems


def inputs_digest(model_dir: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(model_dir.iterdir())
        if p.is_file() and p.suffix in (".json", ".safetensors")
    }


def convert_one(converter_dir: Path, model_dir: Path, out: Path, outtype: str) -> None:
    """In this process: register the tokenizer's pre-tokenizer hash as gpt-2 (when it is GPT-2's), then run the
    converter's main() exactly as `python convert_hf_to_gguf.py MODEL --outfile OUT --outtype T` would."""
    problems = gpt2_pre_tokenization(model_dir / "tokenizer.json")
    sys.path[:0] = [str(converter_dir), str(converter_dir / "gguf-py")]
    from conversion.base import TextModel  # the converter's own module (from converter_dir)

    original = TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:  # type: ignore[no-untyped-def]
        if not problems:
            print(f"pre-tokenizer: GPT-2 byte-level BPE -> {LLAMA_PRE}", file=sys.stderr)
            return LLAMA_PRE
        return original(self, tokenizer)  # not GPT-2's: the converter's own table decides (or refuses)

    TextModel.get_vocab_base_pre = get_vocab_base_pre  # type: ignore[method-assign]
    sys.argv = ["convert_hf_to_gguf.py", str(model_dir), "--outfile", str(out), "--outtype", outtype]
    runpy.run_path(str(converter_dir / "convert_hf_to_gguf.py"), run_name="__main__")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llamacpp-dir", type=Path, default=default_llamacpp_dir())
    ap.add_argument("--out", type=Path, default=None, help="output directory (default LLAMACPP_DIR/demo)")
    ap.add_argument("--outtype", default="f16", choices=("f16", "f32"), help="f16: the shipped weights exactly")
    ap.add_argument("--force", action="store_true", help="convert even if the outputs match their inputs")
    ap.add_argument("--one", nargs=3, metavar=("MODEL_DIR", "OUT", "OUTTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    converter = args.llamacpp_dir / "convert"
    if args.one:
        convert_one(converter, Path(args.one[0]), Path(args.one[1]), args.one[2])
        return 0
    if not (converter / "convert_hf_to_gguf.py").is_file():
        print(f"no llama.cpp converter at {converter}: run scripts/install_llama_server.sh first", file=sys.stderr)
        return 2
    out_dir = args.out or args.llamacpp_dir / "demo"
    stamp = out_dir / "source.json"
    want = {name: inputs_digest(DEMO_ASSETS / name) for name in PAIR} | {"outtype": args.outtype}  # type: ignore[operator]
    have = json.loads(stamp.read_text()) if stamp.is_file() else None
    if not args.force and have == want and all((out_dir / f"{n}.gguf").is_file() for n in PAIR):
        print(f"demo GGUF pair present: {out_dir}")
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    for name in PAIR:
        out = out_dir / f"{name}.gguf"
        # one process per model: the converter keeps module-level state and calls sys.exit on errors
        cmd = [sys.executable, __file__, "--llamacpp-dir", str(args.llamacpp_dir), "--one", str(DEMO_ASSETS / name),
               str(out), args.outtype]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if proc.returncode != 0 or not out.is_file():
            print(proc.stdout[-2000:] + proc.stderr[-4000:], file=sys.stderr)
            print(f"converting {name} failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        pre = [ln for ln in proc.stderr.splitlines() if ln.startswith("pre-tokenizer:")]
        print(f"{name}: {out} ({out.stat().st_size:,} bytes){'; ' + pre[0] if pre else ''}")
    stamp.write_text(json.dumps(want, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
