"""Generation throughput (tokens/s) at concurrency 1, 4 and 16: our engine next to transformers' `generate`.

Same weights, same prompts, greedy, every request generating exactly --max-tokens tokens (EOS ignored), in
one process. For each concurrency C, C requests are all submitted at once and the clock runs from submission
to the last token (prefill included); rows take turns for --repeats rounds and each keeps its best time. Rows:
  - engine            speculab.engine.Engine (continuous batching), C requests in flight;
  - model-only        our CausalLM + KVCache in a plain batched greedy loop (no scheduler) - the ceiling of
                      the model code itself, and the fallback when the engine is not importable;
  - hf-batched        transformers `generate` on all C prompts as one batch (equal prompt lengths, no padding);
  - hf-sequential     transformers `generate` one request at a time: a server without batching serves C
                      concurrent requests this way.
Greedy outputs are compared across implementations (they must be identical in float32).

python bench/engine_vs_transformers.py [--model DIR | --params-m 30] [--max-tokens 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # run from a checkout without installing

from speculab.engine.loader import load_model
from speculab.engine.model import BatchInput, CausalLM, KVCache, ModelConfig

SMALL_30M = ModelConfig(  # ~32M parameters: Llama-shaped, GQA, untied head
    vocab_size=8192,
    hidden_size=512,
    intermediate_size=1408,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=64,
    max_position_embeddings=1024,
)
TINY = ModelConfig(  # smoke tests only
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
)


def write_random_checkpoint(cfg: ModelConfig, out: Path, seed: int = 0) -> Path:
    """A random-weight HF-format directory (config.json + model.safetensors) both libraries load."""
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    model = CausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_()  # O(1) embeddings: peaked logits, stable greedy choices
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps({**cfg.to_hf(), "torch_dtype": "float32"}))
    return out


def model_only_generate(model: CausalLM, prompts: torch.Tensor, max_tokens: int) -> list[list[int]]:
    """Batched greedy decoding with our model and cache directly: one prefill forward, then one per token."""
    c, p = prompts.shape
    cache = KVCache(model.config, c, p + max_tokens, next(model.parameters()).dtype, prompts.device)
    slots = torch.arange(c, device=prompts.device)
    with torch.inference_mode():
        last = torch.arange(c, device=prompts.device) * p + p - 1  # flat [C*P] index of each last prompt token
        logits = model(BatchInput(prompts, torch.arange(p)[None].expand(c, p), slots, p), cache, logits_rows=last)
        tok = logits.argmax(-1, keepdim=True)  # [C, 1]
        out = [tok]
        for i in range(max_tokens - 1):
            pos = torch.full((c, 1), p + i)
            tok = model(BatchInput(tok, pos, slots, p + i + 1), cache)[:, -1:].argmax(-1)
            out.append(tok)
    return torch.cat(out, 1).tolist()


def engine_generate_fn(model: CausalLM, max_tokens: int, max_model_len: int) -> Callable | str:
    """A function running prompts through speculab's Engine, or why it is unavailable."""
    try:
        from speculab.engine.engine import Engine, EngineConfig
        from speculab.engine.sequence import SamplingParams
    except ImportError as e:
        return f"engine not importable ({e})"
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)

    def run(prompts: torch.Tensor) -> list[list[int]]:
        cfg = EngineConfig(max_num_seqs=max(16, prompts.shape[0]), max_model_len=max_model_len)
        engine = Engine(model, cfg)
        seqs = engine.generate(prompts.tolist(), params)
        return [list(s.output_ids) for s in seqs]

    return run


def hf_generate_fn(path: Path, max_tokens: int) -> tuple[Callable, Callable] | str:
    """(batched, sequential) transformers generate functions, or why transformers is unavailable."""
    try:
        import transformers
    except ImportError:
        return "transformers not installed"
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    kw = {"max_new_tokens": max_tokens, "min_new_tokens": max_tokens, "do_sample": False, "pad_token_id": 0}

    def batched(prompts: torch.Tensor) -> list[list[int]]:
        with torch.inference_mode():
            out = hf.generate(prompts, attention_mask=torch.ones_like(prompts), **kw)
        return out[:, prompts.shape[1] :].tolist()

    def sequential(prompts: torch.Tensor) -> list[list[int]]:
        return [batched(prompts[i : i + 1])[0] for i in range(prompts.shape[0])]

    return batched, sequential


def measure_interleaved(
    rows: dict[str, Callable], prompts: torch.Tensor, repeats: int
) -> tuple[dict[str, float], dict[str, list[list[int]]]]:
    """Best (minimum) wall seconds per row over `repeats` rounds, rows taking turns within each round.

    On a shared machine other load only ever adds time, so the minimum is the least noisy estimate, and
    interleaving spreads slow periods over all rows instead of penalising whichever ran during them.
    """
    for fn in rows.values():
        fn(prompts[:1])  # warm-up (allocator, first-call paths)
    best: dict[str, float] = {}
    outputs: dict[str, list[list[int]]] = {}
    for _ in range(repeats):
        for name, fn in rows.items():
            t0 = time.perf_counter()
            outputs[name] = fn(prompts)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    return best, outputs


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="HF-format directory (default: a random ~30M-parameter model)")
    ap.add_argument("--tiny", action="store_true", help="a tiny random model (smoke test)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds; the best is kept")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--skip", nargs="*", default=[], help="rows to skip: engine model-only hf-batched hf-sequential")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or write_random_checkpoint(TINY if args.tiny else SMALL_30M, Path(tmp))
        model = load_model(path)  # float32 on CPU
        cfg = model.config
        max_model_len = args.prompt_len + args.max_tokens + 1
        rows: dict[str, Callable | str] = {
            "engine": engine_generate_fn(model, args.max_tokens, max_model_len),
            "model-only": lambda p: model_only_generate(model, p, args.max_tokens),
        }
        hf = hf_generate_fn(path, args.max_tokens)
        rows["hf-batched"], rows["hf-sequential"] = hf if isinstance(hf, tuple) else (hf, hf)
        res: dict = {
            "script": "bench/engine_vs_transformers.py",
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} CPUs".strip(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "model": str(args.model) if args.model else ("random-tiny" if args.tiny else "random-30m"),
            "num_parameters": cfg.num_parameters,
            "prompt_len": args.prompt_len,
            "max_tokens": args.max_tokens,
            "skipped": {k: v for k, v in rows.items() if isinstance(v, str)},
            "tokens_per_s": {},
            "outputs_identical": {},
        }
        gen = torch.Generator().manual_seed(1)
        for c in args.concurrency:
            prompts = torch.randint(0, cfg.vocab_size, (c, args.prompt_len), generator=gen)
            active = {k: fn for k, fn in rows.items() if not isinstance(fn, str) and k not in args.skip}
            seconds, outputs = measure_interleaved(active, prompts, args.repeats)
            tps = {name: round(c * args.max_tokens / t, 1) for name, t in seconds.items()}
            for name, v in tps.items():
                print(f"concurrency {c:>2}  {name:<14} {v:>9.1f} tok/s", file=sys.stderr, flush=True)
            res["tokens_per_s"][str(c)] = tps
            first = next(iter(outputs.values()), None)
            res["outputs_identical"][str(c)] = all(o == first for o in outputs.values())
    for c, tps in res["tokens_per_s"].items():
        ours = tps.get("engine", tps.get("model-only"))
        if ours and "hf-batched" in tps:
            tps["ours_over_hf_batched"] = round(ours / tps["hf-batched"], 2)
        if ours and "hf-sequential" in tps:
            tps["ours_over_hf_sequential"] = round(ours / tps["hf-sequential"], 2)
        tps["ours_row"] = "engine" if "engine" in tps else "model-only"
        res["tokens_per_s"][c] = tps
    line = json.dumps(res)
    print(line)
    if args.json:
        args.json.write_text(line + "\n")
    return res


if __name__ == "__main__":
    main()
