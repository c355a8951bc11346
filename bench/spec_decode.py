"""Speculative decoding, side by side: plain / n-gram / draft model / EAGLE (fixed and adaptive k) in our engine,
next to transformers.

For each prompt kind (input-grounded: the output copies spans of the prompt; open-ended: free continuation)
and each concurrency C in --concurrency, C requests are submitted together to speculab's Engine (in
process, no HTTP) and run to --max-tokens tokens (greedy; EOS banned, as transformers' min_new_tokens bans it,
so every row does the same work and all rows can be compared token for token).
Per request: TTFT and TPOT = (last token - first token) / (tokens - 1), from the engine's per-token times.
Per run: output tokens/s over the wall time, acceptance rate (accepted / draft tokens) and mean acceptance
length (1 + accepted / drafts, bonus token included) from the speculator's counters; adaptive rows also report
how many decode steps ran with each k (0 = skipped). Engine rows also report tokens per CPU second of the engine's
thread (with one torch thread, its own work: other processes on a shared machine do not inflate it, as they inflate
wall time). With --rounds N every row runs N times, the rows taking turns
(plain first in each round): a row's figures come from its fastest run (on a shared machine, the least disturbed
one), and its ratio to plain is the median over rounds of its run against the plain run of the same round.
transformers runs on the same weights: plain `generate`, `generate(prompt_lookup_num_tokens=k)` and
`generate(assistant_model=draft)`; its assisted generation takes one request at a time, so at C > 1 it serves
the C requests one after another (as a server without batching would). TPOT there comes from a streamer's
timestamps. Greedy outputs of every row are compared with plain decoding (they must be identical in fp32).

python bench/spec_decode.py [--target demo --draft demo-draft --eagle demo-eagle] [--k 4] [--max-tokens 128]
                            [--rounds 3] [--json out.json]
python bench/spec_decode.py --tiny    # smoke test on random models
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
import sysconfig
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # run from a checkout without installing

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.loader import load_model, resolve_model_path
from speculab.engine.model import CausalLM, ModelConfig
from speculab.engine.sequence import SamplingParams
from speculab.engine.speculative.adaptive import AdaptivePolicy
from speculab.engine.speculative.proposers.draft_model import DraftModelProposer
from speculab.engine.speculative.proposers.eagle import EagleProposer
from speculab.engine.speculative.proposers.eagle_head import EagleHead, load_eagle_head
from speculab.engine.speculative.proposers.ngram import NgramProposer
from speculab.engine.speculative.speculator import Speculator
from speculab.harness.analysis.acceptance import acceptance_length, acceptance_rate  # the formulas, one place

# A stand-in with the shipped demo pair's "cpu" preset target shape (scripts/train_demo.py), random weights.
DEMO_CPU_SHAPE = ModelConfig(
    vocab_size=8192,
    hidden_size=256,
    intermediate_size=704,
    num_hidden_layers=5,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=1024,
)
TINY = ModelConfig(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=1024,
)


# --- prompts ----------------------------------------------------------------------------------------
def stdlib_snippets(n: int, lines: int, seed: int) -> list[str]:
    """n chunks of `lines` lines of Python from the standard library (present in every installation)."""
    import random

    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.stat().st_size > 4000)
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        text = rng.choice(files).read_text(encoding="utf-8", errors="replace").splitlines()
        start = rng.randrange(0, max(1, len(text) - lines))
        chunk = "\n".join(text[start : start + lines])
        if len(chunk) > 200:
            out.append(chunk)
    return out


def make_prompts(tokenizer, kind: str, n: int, prompt_tokens: int, vocab: int, seed: int) -> list[list[int]]:
    """Token prompts of one kind; with no tokenizer (--tiny) a synthetic equivalent over random tokens."""
    if tokenizer is None:
        g = torch.Generator().manual_seed(seed)
        base = [torch.randint(0, vocab, (prompt_tokens // 2,), generator=g).tolist() for _ in range(n)]
        if kind == "open-ended":
            return [b[:16] for b in base]
        return [b + b[: len(b) // 4] for b in base]  # the prompt restarts itself: continuing it copies
    prompts = []
    for chunk in stdlib_snippets(n, 40, seed):
        if kind == "open-ended":
            ids = tokenizer.encode(chunk, add_special_tokens=False)[:16]  # a few tokens to start from
        else:
            # Input-grounded: the code, then a request to repeat it with an edit, then its first line again.
            ids = tokenizer.encode(chunk, add_special_tokens=False)[:prompt_tokens]
            body = tokenizer.decode(ids)
            first = body.splitlines()[0] if body.strip() else body
            text = f"{body}\n\n# The same code again, with the comments kept:\n{first}\n"
            ids = tokenizer.encode(text, add_special_tokens=False)
        prompts.append(ids)
    return prompts


# --- our engine -------------------------------------------------------------------------------------
@dataclass
class RunResult:
    tpot_s: list[float]
    ttft_s: list[float]
    tokens_per_s: float
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    outputs: list[list[int]]
    num_drafts: int | None = None  # verification steps with at least one draft token
    steps_by_k: list[int] | None = None  # decode steps by the k chosen for them (adaptive rows)
    tokens_per_cpu_s: float | None = None  # output tokens per CPU second of the engine's thread (engine rows)


ENGINE_ROWS = ("plain", "ngram", "draft", "eagle", "eagle-adaptive", "ngram-adaptive")


def run_engine(
    model: CausalLM,
    method: str,
    draft: CausalLM | None,
    prompts: list[list[int]],
    concurrency: int,
    args,
    head: EagleHead | None = None,
) -> RunResult:
    max_len = max(len(p) for p in prompts) + args.max_tokens + args.k + 2
    cfg = EngineConfig(max_num_seqs=max(concurrency, 1), max_model_len=max_len, max_num_batched_tokens=4096)
    spec = None
    name, _, mode = method.partition("-")
    proposer = None
    if name == "ngram":
        proposer = NgramProposer(args.k, args.prompt_lookup_max, args.prompt_lookup_min)
    # The adaptive policy's clock: wall time (what `speculab serve` uses), or the engine thread's CPU time, which
    # other processes on a shared machine do not inflate (with one torch thread it is the engine's own work).
    clock = time.thread_time if getattr(args, "policy_clock", "wall") == "cpu" else time.perf_counter
    if name == "draft":
        assert draft is not None
        proposer = DraftModelProposer(draft, args.k, cfg.max_num_seqs, max_len, model.config.vocab_size, clock=clock)
    elif name == "eagle":
        assert head is not None
        proposer = EagleProposer(head, model, args.k, cfg.max_num_seqs, max_len, clock=clock)
    if proposer is not None:
        adaptive = AdaptivePolicy(args.k) if mode == "adaptive" else None
        spec = Speculator(proposer, adaptive=adaptive, clock=clock)
    eos = model.config.eos_token_id
    eos_ids = set() if eos is None else ({eos} if isinstance(eos, int) else set(eos))
    engine = Engine(model, cfg, speculator=spec, eos_token_ids=eos_ids)
    # EOS banned at every position (min_tokens = max_tokens), exactly as transformers' min_new_tokens does, so both
    # generate the same greedy tokens (ignore_eos would still emit EOS as a token where it is the argmax)
    params = SamplingParams(max_tokens=args.max_tokens, min_tokens=args.max_tokens, temperature=0.0)
    tpot, ttft, outputs, total_tokens, wall, cpu = [], [], [], 0, 0.0, 0.0
    for start in range(0, len(prompts), concurrency):  # waves of C requests in flight together
        wave = prompts[start : start + concurrency]
        t0, c0 = time.monotonic(), time.thread_time()
        seqs = [engine.add_request(f"r{start + i}", p, params) for i, p in enumerate(wave)]
        while engine.has_unfinished():
            engine.step()
        wall += time.monotonic() - t0
        cpu += time.thread_time() - c0
        for s in seqs:
            n = len(s.output_ids)
            total_tokens += n
            ttft.append(s.first_token_s - t0)
            if n > 1:
                tpot.append((s.last_token_s - s.first_token_s) / (n - 1))
            outputs.append(list(s.output_ids))
    rate = length = drafts = by_k = None
    if spec is not None:
        c = spec.counters
        drafts = c.num_drafts
        by_k = list(c.steps_by_k) if spec.adaptive is not None else None
        if c.num_draft_tokens:
            rate = acceptance_rate(c.num_accepted_tokens, c.num_draft_tokens)
            length = acceptance_length(c.num_accepted_tokens, c.num_drafts)
    return RunResult(tpot, ttft, total_tokens / wall, rate, length, outputs, drafts, by_k, total_tokens / cpu)


# --- transformers -----------------------------------------------------------------------------------
class _TimingStreamer:
    """transformers streamer that timestamps every put(); the first put is the prompt itself."""

    def __init__(self) -> None:
        self.times: list[tuple[float, int]] = []
        self.started = False

    def put(self, value: torch.Tensor) -> None:
        if not self.started:
            self.started = True
            return
        self.times.append((time.monotonic(), int(value.numel())))

    def end(self) -> None:
        pass


def run_hf(hf, hf_draft, mode: str, prompts: list[list[int]], concurrency: int, args) -> RunResult:
    kw: dict = {"max_new_tokens": args.max_tokens, "min_new_tokens": args.max_tokens, "do_sample": False}
    if mode == "hf-prompt-lookup":
        kw["prompt_lookup_num_tokens"] = args.k
        kw["max_matching_ngram_size"] = args.prompt_lookup_max
    elif mode == "hf-assisted":
        kw["assistant_model"] = hf_draft
        kw["num_assistant_tokens"] = args.k
        kw["num_assistant_tokens_schedule"] = "constant"
        kw["assistant_confidence_threshold"] = 0.0  # draft exactly k tokens, as our engine does
    tpot, ttft, outputs, total, wall = [], [], [], 0, 0.0
    for p in prompts:  # one request at a time: transformers' assisted generation takes batch size 1
        ids = torch.tensor([p])
        streamer = _TimingStreamer()
        t0 = time.monotonic()
        with torch.inference_mode():
            out = hf.generate(ids, attention_mask=torch.ones_like(ids), streamer=streamer, pad_token_id=0, **kw)
        wall += time.monotonic() - t0
        gen = out[0, len(p) :].tolist()
        outputs.append(gen)
        total += len(gen)
        first_t = streamer.times[0][0]
        ttft.append(first_t - t0)
        if len(gen) > 1:
            tpot.append((streamer.times[-1][0] - first_t) / (len(gen) - 1))
    del concurrency  # requests are served sequentially whatever the offered concurrency
    return RunResult(tpot, ttft, total / wall, None, None, outputs)


# --- driver -----------------------------------------------------------------------------------------
def write_random_pair(out: Path, cfg: ModelConfig = TINY, draft_layers: int = 1) -> tuple[Path, Path, Path]:
    """A random target, a draft made of its embedding, first `draft_layers` layers and head (they often agree), and
    a random EAGLE head for the target (its drafts are rarely accepted: the exactness check still runs)."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = CausalLM(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # peaked logits: greedy text loops, as small real models' does
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    draft_cfg = dataclasses.replace(cfg, num_hidden_layers=draft_layers)
    dropped = tuple(f"model.layers.{i}." for i in range(draft_layers, cfg.num_hidden_layers))
    pairs = (
        (out / "target", cfg, state),
        (out / "draft", draft_cfg, {k: v for k, v in state.items() if not k.startswith(dropped)}),
    )
    for d, cfg_, weights in pairs:
        d.mkdir()
        save_file(weights, str(d / "model.safetensors"))
        (d / "config.json").write_text(json.dumps({**cfg_.to_hf(), "torch_dtype": "float32"}))
    head = EagleHead(dataclasses.replace(cfg, num_hidden_layers=1))
    (out / "eagle").mkdir()
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(out / "eagle" / "model.safetensors"))
    (out / "eagle" / "config.json").write_text(json.dumps(head.to_hf()))
    return out / "target", out / "draft", out / "eagle"


def summarize(r: RunResult) -> dict:
    return {
        "tpot_ms_median": round(1000 * statistics.median(r.tpot_s), 3) if r.tpot_s else None,
        "ttft_ms_median": round(1000 * statistics.median(r.ttft_s), 2) if r.ttft_s else None,
        "tokens_per_s": round(r.tokens_per_s, 1),
        "acceptance_rate": None if r.acceptance_rate is None else round(r.acceptance_rate, 3),
        "mean_acceptance_length": None if r.mean_acceptance_length is None else round(r.mean_acceptance_length, 2),
        **({} if r.num_drafts is None else {"drafts": r.num_drafts}),
        **({} if r.steps_by_k is None else {"steps_by_k": r.steps_by_k}),
        **({} if r.tokens_per_cpu_s is None else {"tokens_per_cpu_s": round(r.tokens_per_cpu_s, 1)}),
    }


def goals(by_c: dict[str, dict[str, dict]], fixed: str, adaptive: str, metric: str = "tokens_per_s_vs_plain") -> dict:
    """Issue 14's goals for the adaptive row, from paired ratios to plain (`metric`: wall tokens/s or tokens per
    CPU second, each round's run against the plain run beside it, median over rounds): at the highest concurrency
    it keeps >= 0.95x plain; at concurrency 1 it keeps >= 90% of the fixed-k row's speedup over plain."""
    out: dict = {}
    cs = sorted(int(c) for c in by_c)
    lo, hi = str(cs[0]), str(cs[-1])
    rows_hi, rows_lo = by_c[hi], by_c[lo]
    if adaptive in rows_hi and metric in rows_hi[adaptive]:
        ratio = rows_hi[adaptive][metric]
        out[f"adaptive_vs_plain_at_c{hi}"] = ratio
        out[f"met_adaptive_ge_0.95x_plain_at_c{hi}"] = ratio >= 0.95
    if all(r in rows_lo and metric in rows_lo[r] for r in (fixed, adaptive)):
        s_fixed, s_adapt = rows_lo[fixed][metric], rows_lo[adaptive][metric]
        out[f"speedup_at_c{lo}"] = {"fixed": s_fixed, "adaptive": s_adapt}
        out[f"adaptive_share_of_fixed_speedup_at_c{lo}"] = round(s_adapt / s_fixed, 3)
        out[f"met_adaptive_ge_0.9x_fixed_speedup_at_c{lo}"] = s_adapt >= 0.9 * s_fixed
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="demo", help="target model directory or 'demo'")
    ap.add_argument("--draft", default="demo-draft", help="draft model directory or 'demo-draft'")
    ap.add_argument("--eagle", default="demo-eagle", help="EAGLE head directory or 'demo-eagle'")
    ap.add_argument("--rounds", type=int, default=1, help="runs per row, taking turns; each row keeps its fastest")
    ap.add_argument(
        "--policy-clock",
        choices=["wall", "cpu"],
        default="wall",
        help="what the adaptive policy times: wall seconds (as serve does) or the engine thread's CPU seconds",
    )
    ap.add_argument("--tiny", action="store_true", help="random tiny models (smoke test)")
    ap.add_argument(
        "--standin",
        action="store_true",
        help="random target of the demo 'cpu' preset shape, draft = its first 2 layers (no trained pair needed)",
    )
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--kinds", nargs="+", default=["input-grounded", "open-ended"])
    ap.add_argument("--num-prompts", type=int, default=16, help="prompts per kind (rounded up to C per wave)")
    ap.add_argument("--prompt-tokens", type=int, default=192)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument("--prompt-lookup-max", type=int, default=4)
    ap.add_argument("--prompt-lookup-min", type=int, default=2)
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        help="rows to skip: " + " ".join(ENGINE_ROWS) + " hf-plain hf-prompt-lookup hf-assisted",
    )
    ap.add_argument(
        "--hf-concurrency", type=int, nargs="+", default=[1], help="concurrencies at which to run transformers"
    )
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    tmp = tempfile.TemporaryDirectory()
    if args.tiny or args.standin:
        shape, layers = (DEMO_CPU_SHAPE, 2) if args.standin else (TINY, 1)
        target_dir, draft_dir, eagle_dir = write_random_pair(Path(tmp.name), shape, layers)
        tokenizer = None
    else:
        from speculab.engine.tokenizer import Tokenizer

        target_dir, draft_dir = resolve_model_path(args.target), resolve_model_path(args.draft)
        eagle_dir = resolve_model_path(args.eagle)
        tokenizer = Tokenizer.from_dir(target_dir)
    model, draft = load_model(target_dir), load_model(draft_dir)  # float32 on CPU
    head = load_eagle_head(eagle_dir, model)
    import transformers

    transformers.logging.set_verbosity_error()
    hf = transformers.AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    hf_draft = transformers.AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()

    res: dict = {
        "script": "bench/spec_decode.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} CPUs".strip(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "target": "random-tiny" if args.tiny else "random-demo-cpu-shape" if args.standin else str(args.target),
        "draft": "target's first layers" if args.tiny or args.standin else str(args.draft),
        "eagle": "random" if args.tiny or args.standin else str(args.eagle),
        "eagle_parameters": sum(p.numel() for p in head.parameters()),
        "rounds": args.rounds,
        "policy_clock": args.policy_clock,
        "load_average": os.getloadavg(),
        "target_parameters": model.config.num_parameters,
        "draft_parameters": draft.config.num_parameters,
        "k": args.k,
        "max_tokens": args.max_tokens,
        "results": {},
    }
    # Warm up every code path once (allocator, lazy init) so the first measured row is not penalised.
    warm = make_prompts(tokenizer, "input-grounded", 1, 32, model.config.vocab_size, seed=99)
    for method in ENGINE_ROWS:
        run_engine(model, method, draft, warm, 1, argparse.Namespace(**{**vars(args), "max_tokens": 8}), head)
    for kind in args.kinds:
        for c in args.concurrency:
            n = max(args.num_prompts, c)
            n = -(-n // c) * c
            prompts = make_prompts(tokenizer, kind, n, args.prompt_tokens, model.config.vocab_size, seed=1)
            names = [
                row
                for row in (*ENGINE_ROWS, "hf-plain", "hf-prompt-lookup", "hf-assisted")
                if row not in args.skip and not (row.startswith("hf") and c not in args.hf_concurrency)
            ]
            runs: dict[str, list[RunResult]] = {row: [] for row in names}
            for _ in range(args.rounds):  # rows take turns, so a slow minute on a shared machine hits them all
                for row in names:
                    if row.startswith("hf"):
                        runs[row].append(run_hf(hf, hf_draft, row, prompts, c, args))
                    else:
                        runs[row].append(run_engine(model, row, draft, prompts, c, args, head))
            best = {row: max(rs, key=lambda r: r.tokens_per_s) for row, rs in runs.items()}
            rows: dict[str, dict] = {}
            plain_out = best["plain"].outputs if "plain" in best else None
            for row in names:
                rows[row] = summarize(best[row])
                if row != "plain" and plain_out is not None:
                    rows[row]["outputs_equal_plain"] = all(r.outputs == plain_out for r in runs[row])
                print(f"{kind:<15} C={c:<3} {row:<17} {json.dumps(rows[row])}", file=sys.stderr, flush=True)
            if "plain" in rows:
                base = rows["plain"]["tpot_ms_median"]
                for name in ENGINE_ROWS[1:]:
                    if name in rows and base and rows[name]["tpot_ms_median"]:
                        rows[name]["tpot_speedup_vs_plain"] = round(base / rows[name]["tpot_ms_median"], 2)
                        # paired: each round's run against the plain run just before it, median over rounds
                        pairs = list(zip(runs[name], runs["plain"], strict=True))
                        paired = [r.tokens_per_s / p.tokens_per_s for r, p in pairs]
                        rows[name]["tokens_per_s_vs_plain"] = round(statistics.median(paired), 3)
                        rows[name]["tokens_per_s_vs_plain_per_round"] = [round(x, 3) for x in paired]
                        if all(r.tokens_per_cpu_s and p.tokens_per_cpu_s for r, p in pairs):
                            cpu = [r.tokens_per_cpu_s / p.tokens_per_cpu_s for r, p in pairs]  # type: ignore[operator]
                            rows[name]["tokens_per_cpu_s_vs_plain"] = round(statistics.median(cpu), 3)
            if "ngram" in rows and "hf-prompt-lookup" in rows:
                rows["ngram"]["tokens_per_s_vs_hf_prompt_lookup"] = round(
                    rows["ngram"]["tokens_per_s"] / rows["hf-prompt-lookup"]["tokens_per_s"], 2
                )
            if "draft" in rows and "hf-assisted" in rows:
                rows["draft"]["tokens_per_s_vs_hf_assisted"] = round(
                    rows["draft"]["tokens_per_s"] / rows["hf-assisted"]["tokens_per_s"], 2
                )
            res["results"].setdefault(kind, {})[str(c)] = rows
        res.setdefault("goals", {})[kind] = {
            "wall": goals(res["results"][kind], "eagle", "eagle-adaptive"),
            "cpu": goals(res["results"][kind], "eagle", "eagle-adaptive", "tokens_per_cpu_s_vs_plain"),
        }
    tmp.cleanup()
    line = json.dumps(res)
    print(line)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main()
