"""Batch-1 decode time per token of a random Llama-1B-shaped model vs the memory-bandwidth floor.

A decode step must read every weight once, so weight bytes / measured copy bandwidth is a floor on its time.
This measures, in one process and on the same weights (bf16):
  - copy bandwidth: device-to-device copy of a large buffer (bytes read + bytes written per second);
  - our CausalLM, eager;
  - our CausalLM with the whole decode step (forward, greedy argmax, advance position) captured in one CUDA
    graph and replayed: static input buffers, and attention over the whole preallocated cache (kv_len =
    max_len) with the causal mask hiding unused columns, so every step has the same shapes;
  - the same with torch.compile (default mode) underneath the CUDA graph, if time allows;
  - transformers' eager forward with its own KV cache, for reference (if transformers is installed).
It prints one JSON line and writes it to $OUT/gpu_decode_1b.json when OUT is set.

GPU:  python bench/gpu_decode_1b.py                        (must finish in < 3 minutes on an H200)
CPU smoke test (no graphs, no compile):  python bench/gpu_decode_1b.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # run from a checkout without installing

from speculab.engine.model import BatchInput, CausalLM, KVCache, ModelConfig, rope_inv_freq

LLAMA_1B = ModelConfig(  # Llama-3.2-1B's shape (tied embeddings, Llama-3 vocabulary)
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    max_position_embeddings=131072,
    rope_theta=500000.0,
    tie_word_embeddings=True,
)
TINY = ModelConfig(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    tie_word_embeddings=True,
)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_ms(fn: Callable[[], object], device: torch.device, iters: int, repeats: int = 3) -> float:
    """Median over `repeats` of the mean wall time per call of fn (ms), synchronising around each batch."""
    per_call = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync(device)
        per_call.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(per_call)


def copy_bandwidth_gbps(device: torch.device, nbytes: int) -> float:
    """Device-to-device copy: (bytes read + bytes written) / s, in GB/s (1e9)."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ms = timed_ms(lambda: dst.copy_(src), device, iters=20)
    return 2 * nbytes / (ms / 1e3) / 1e9


def random_model(cfg: ModelConfig, dtype: torch.dtype, device: torch.device, seed: int) -> CausalLM:
    """Random weights created on the device, scaled so activations stay O(1) through the layers."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = CausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied weights appear once
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(std=1.0 if "embed" in name else p.shape[-1] ** -0.5)
    model.to(dtype)
    model.inv_freq = rope_inv_freq(cfg).to(device)  # .to(dtype) cast the rope buffer too; keep it float32
    return model.eval().requires_grad_(False)


def weight_bytes_per_step(model: CausalLM) -> int:
    """Bytes a decode step reads: every parameter once (the embedding gather reads one row unless tied)."""
    seen, total = set(), 0
    for name, p in model.named_parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        if name == "model.embed_tokens.weight" and not model.config.tie_word_embeddings:
            continue
        total += p.numel() * p.element_size()
    return total


class Decoder:
    """Greedy batch-1 decoding with our model; `step()` is one token, with static or growing kv_len."""

    def __init__(self, model: CausalLM, max_len: int, prompt: torch.Tensor, static: bool, step_model=None):
        self.model, self.max_len, self.static = model, max_len, static
        self.step_model = (
            model if step_model is None else step_model
        )  # e.g. torch.compile(model); prefill always runs the plain model
        p = next(model.parameters())
        self.cache = KVCache(model.config, num_slots=1, max_len=max_len, dtype=p.dtype, device=p.device)
        self.prompt = prompt  # [1, P]
        self.tokens = torch.zeros(1, 1, dtype=torch.long, device=p.device)  # static input buffers
        self.pos = torch.zeros(1, 1, dtype=torch.long, device=p.device)
        self.slots = torch.zeros(1, dtype=torch.long, device=p.device)
        self.host_pos = 0  # eager mode only: kv_len is a host int
        self.reset()

    @torch.no_grad()
    def reset(self) -> None:
        n = self.prompt.shape[1]
        pos = torch.arange(n, device=self.prompt.device)[None]
        logits = self.model(BatchInput(self.prompt, pos, self.slots, n), self.cache)
        self.tokens.copy_(logits[:, -1:].argmax(-1))
        self.pos.fill_(n)
        self.host_pos = n

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        kv_len = self.max_len if self.static else self.host_pos + 1
        logits = self.step_model(BatchInput(self.tokens, self.pos, self.slots, kv_len), self.cache)  # [1, 1, V]
        self.tokens.copy_(logits[:, -1:].argmax(-1))
        self.pos.add_(1)
        self.host_pos += 1
        return logits


def capture_graph(dec: Decoder) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """Warm up on a side stream (allocator, cuBLAS workspaces, lazy init), then capture one step.

    Returns the graph and its static logits output [1, 1, V], rewritten by every replay.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            dec.step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = dec.step()
    dec.reset()
    return graph, logits


def replay_fn(graph: torch.cuda.CUDAGraph, logits: torch.Tensor) -> Callable[[], torch.Tensor]:
    def replay() -> torch.Tensor:
        graph.replay()
        return logits

    return replay


def greedy_run(advance: Callable[[], torch.Tensor], dec: Decoder, n: int) -> tuple[list[int], torch.Tensor]:
    """From a fresh prefill: the n greedy tokens fed in, and the n steps' logits [n, V] (float32)."""
    dec.reset()
    tokens, logits = [], []
    for _ in range(n):
        tokens.append(int(dec.tokens.item()))
        logits.append(advance()[0, -1].float().clone())
    return tokens, torch.stack(logits)


def agreement(run: tuple[list[int], torch.Tensor], ref: tuple[list[int], torch.Tensor]) -> dict:
    """Same tokens fed in, and how far the logits are from the eager ones (relative to their scale)."""
    diff = (run[1] - ref[1]).abs().max().item() / max(ref[1].abs().max().item(), 1e-9)
    return {"same_tokens": run[0] == ref[0], "max_rel_logit_diff": round(diff, 5)}


def hf_decode_ms(model: CausalLM, prompt: torch.Tensor, iters: int, device: torch.device) -> tuple[float, float] | str:
    """transformers' eager forward, one token at a time with its DynamicCache, on our (shared) weights."""
    try:
        import transformers
    except ImportError:
        return "transformers not installed"
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    with torch.device(device):
        hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**model.config.to_hf()))
    state = {k: v for k, v in model.state_dict().items() if not (model.config.tie_word_embeddings and "lm_head" in k)}
    hf.load_state_dict(state, strict=False, assign=True)  # our bf16 tensors replace its random fp32 ones
    if model.config.tie_word_embeddings:
        hf.lm_head.weight = hf.model.embed_tokens.weight
    hf.to(device)  # non-persistent buffers (rotary inv_freq) follow, should from_config have ignored the device
    if device.type == "cuda":
        torch.cuda.empty_cache()
    hf.eval()
    with torch.no_grad():
        out = hf(input_ids=prompt, use_cache=True)
        # Same weights, same prompt: the prefill's last logits agree with ours up to kernel rounding.
        p = next(model.parameters())
        cache = KVCache(model.config, 1, prompt.shape[1], p.dtype, p.device)
        n = prompt.shape[1]
        ours = model(
            BatchInput(
                prompt, torch.arange(n, device=device)[None], torch.zeros(1, dtype=torch.long, device=device), n
            ),
            cache,
        )
        diff = (out.logits[0, -1].float() - ours[0, -1]).abs().max().item() / ours[0, -1].abs().max().item()
        state_box = {"pkv": out.past_key_values, "tok": out.logits[:, -1:].argmax(-1)}

        def step() -> None:
            o = hf(input_ids=state_box["tok"], past_key_values=state_box["pkv"], use_cache=True)
            state_box["pkv"], state_box["tok"] = o.past_key_values, o.logits[:, -1:].argmax(-1)

        for _ in range(3):
            step()
        return timed_ms(step, device, iters=iters, repeats=1), round(diff, 5)


class Results(dict):
    """The JSON line, also written to $OUT after every stage so a timeout or crash keeps what was measured."""

    def save(self) -> None:
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], "gpu_decode_1b.json").write_text(json.dumps(self) + "\n")

    def attempt(self, stage: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # record and carry on: one failing variant must not lose the others
            self[f"{stage}_error"] = f"{type(e).__name__}: {e}"[:500]
        self.save()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a tiny model instead of Llama-1B (CPU smoke test)")
    ap.add_argument("--max-len", type=int, default=1024, help="KV cache length (the static kv_len bucket)")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--iters", type=int, default=100, help="decode steps per timing repeat")
    ap.add_argument("--copy-mib", type=int, default=2048, help="buffer size for the copy-bandwidth measurement")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-hf", action="store_true", help="skip the transformers reference")
    ap.add_argument("--compile-start-by-s", type=float, default=60.0, help="skip torch.compile if not started by then")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    device = torch.device(args.device)
    cfg = TINY if args.tiny else LLAMA_1B
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    # The prompt + every timed step must fit the cache: 3 repeats * iters per variant, plus warmup.
    max_len = max(args.max_len, args.prompt_len + 3 * args.iters + 16)
    on_cuda = device.type == "cuda"

    res = Results(
        script="bench/gpu_decode_1b.py",
        date_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        device=torch.cuda.get_device_name(device) if on_cuda else (platform.processor() or "cpu"),
        torch=torch.__version__,
        dtype=str(dtype).removeprefix("torch."),
        model="tiny" if args.tiny else "llama-1b-shape",
        num_parameters=cfg.num_parameters,
        max_len=max_len,
        prompt_len=args.prompt_len,
        iters=args.iters,
    )
    copy_bytes = (64 if args.tiny else args.copy_mib) * 2**20
    res["copy_bandwidth_gbps"] = round(copy_bandwidth_gbps(device, copy_bytes), 1)

    model = random_model(cfg, dtype, device, seed=0)
    wbytes = weight_bytes_per_step(model)
    res["weight_bytes"] = wbytes
    res["floor_ms"] = round(wbytes / (res["copy_bandwidth_gbps"] * 1e9) * 1e3, 4)
    # The static-shape step also reads the whole cache (keys + values of every layer): small next to weights.
    res["kv_bytes_static"] = (
        2 * cfg.num_hidden_layers * cfg.num_key_value_heads * max_len * cfg.head_dim * dtype.itemsize
    )
    res.save()
    prompt = torch.randint(0, cfg.vocab_size, (1, args.prompt_len), device=device)

    eager = Decoder(model, max_len, prompt, static=False)
    eager.step()
    res["eager_ms"] = round(timed_ms(eager.step, device, args.iters), 4)
    reference = greedy_run(eager.step, eager, 16)
    del eager

    static = Decoder(model, max_len, prompt, static=True)
    res["static_eager_ms"] = round(timed_ms(static.step, device, args.iters), 4)
    res["static_vs_eager"] = agreement(greedy_run(static.step, static, 16), reference)
    res.save()

    def cuda_graph() -> None:
        static.reset()
        try:
            graph, out = capture_graph(static)
        except Exception as e:  # e.g. an attention kernel that cannot be captured: retry with the math backend
            res["cuda_graph_first_error"] = f"{type(e).__name__}: {e}"[:300]
            torch.cuda.synchronize()
            from torch.nn.attention import SDPBackend, sdpa_kernel

            static.reset()
            with sdpa_kernel([SDPBackend.MATH]):
                graph, out = capture_graph(static)
            res["cuda_graph_sdpa"] = "math"
        res["cuda_graph_ms"] = round(timed_ms(graph.replay, device, args.iters), 4)
        res["cuda_graph_vs_eager"] = agreement(greedy_run(replay_fn(graph, out), static, 16), reference)

    if on_cuda:
        res.attempt("cuda_graph", cuda_graph)
    else:
        res["cuda_graph_ms"] = None  # CUDA graphs need CUDA

    def transformers_reference() -> None:
        got = hf_decode_ms(model, prompt, args.iters, device)
        if isinstance(got, str):
            res["transformers_skipped"] = got
        else:
            res["transformers_eager_ms"] = round(got[0], 4)
            res["transformers_prefill_max_rel_logit_diff"] = got[1]

    if not args.no_hf:
        res.attempt("transformers", transformers_reference)

    def compiled() -> None:
        t0 = time.perf_counter()
        dec = Decoder(model, max_len, prompt, static=True, step_model=torch.compile(model, dynamic=False))
        dec.step()  # compiles
        res["compile_s"] = round(time.perf_counter() - t0, 1)
        dec.reset()
        res["compile_ms"] = round(timed_ms(dec.step, device, args.iters), 4)
        res.save()
        dec.reset()
        res["compile_vs_eager"] = agreement(greedy_run(dec.step, dec, 16), reference)
        graph, out = capture_graph(dec)
        res["compile_cuda_graph_ms"] = round(timed_ms(graph.replay, device, args.iters), 4)
        res["compile_cuda_graph_vs_eager"] = agreement(greedy_run(replay_fn(graph, out), dec, 16), reference)

    if args.no_compile or not on_cuda:
        res["compile_skipped"] = "disabled" if args.no_compile else "CPU run"
    elif time.perf_counter() - t_start > args.compile_start_by_s:
        res["compile_skipped"] = f"not started by {args.compile_start_by_s:.0f} s (keeps the run under 3 minutes)"
    else:
        res.attempt("compile", compiled)

    ours = {k: v for k, v in res.items() if k.endswith("_ms") and k not in ("floor_ms", "transformers_eager_ms")}
    ours = {k: v for k, v in ours.items() if isinstance(v, float)}
    best = min(ours, key=ours.__getitem__)
    res["best"] = best.removesuffix("_ms")
    res["best_ms"] = ours[best]
    res["best_over_floor"] = round(ours[best] / res["floor_ms"], 2)
    if isinstance(res.get("transformers_eager_ms"), float):
        res["transformers_over_best"] = round(res["transformers_eager_ms"] / ours[best], 2)
    res["runtime_s"] = round(time.perf_counter() - t_start, 1)
    res.save()
    print(json.dumps(res), flush=True)
    return res


if __name__ == "__main__":
    main()
