"""The reference engine's decode step on the CPU with its Linear weights row-major (as a checkpoint stores them) and
column-major (as `engine/model.lay_out_for_cpu` lays them out on load), side by side in one process.

Each round loads the model (the demo target by default) in each layout in turn, one in memory at a time as in a
server, fills `--batch` cache slots with a 200-token prompt each and times `--steps` decode steps (one new token per
sequence, positions moving on); `--rounds` rounds alternate the layouts, so that a machine whose speed drifts slows
both alike. Prints each layout's median step time, their
ratio, and how far the two layouts' logits are apart on the same step (MKL sums in a different order per layout).

Usage: `PYTHONPATH=src python bench/weight_layout.py [--model demo] [--batch 1 4 8] [--threads 1] [--json out.json]`
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

import torch

from speculab.engine.loader import load_model
from speculab.engine.model_runner import ModelRunner, Row

PROMPT_TOKENS = 200
MAX_LEN = 512  # the demo models' positions; steps run at positions 210-309, the logits compared at 450


def _row_major(model: torch.nn.Module) -> None:
    """Undo `lay_out_for_cpu`: every Linear weight contiguous [out, in], as the checkpoint stores it."""
    for sub in model.modules():
        if isinstance(sub, torch.nn.Linear):
            sub.weight.data = sub.weight.data.contiguous()


def _runner(model_name: str, layout: str, batch: int) -> ModelRunner:
    model = load_model(model_name)  # column-major on the CPU since lay_out_for_cpu
    if layout == "row-major":
        _row_major(model)
    runner = ModelRunner(model, batch, MAX_LEN)
    for slot in range(batch):
        runner.write([Row(slot, list(range(2, 2 + PROMPT_TOKENS)), 0)])
    return runner


def _steps(runner: ModelRunner, batch: int, steps: int, start: int) -> float:
    """Median seconds of one decode step over `steps` steps at positions start, start + 1, ..."""
    times = []
    for k in range(steps):
        t0 = time.perf_counter()
        runner.last_logits([Row(slot, [5 + slot], start + k) for slot in range(batch)])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(model_name: str, batch: int, steps: int, rounds: int) -> dict[str, Any]:
    step_s: dict[str, list[float]] = {"row-major": [], "column-major": []}
    logits: dict[str, torch.Tensor] = {}
    probe = [Row(slot, [7 + slot], 450) for slot in range(batch)]
    for _ in range(rounds):
        for layout in step_s:  # one model in memory at a time, as in a server: the other's weights leave the caches
            runner = _runner(model_name, layout, batch)
            _steps(runner, batch, 10, PROMPT_TOKENS)  # warm
            step_s[layout].append(_steps(runner, batch, steps, PROMPT_TOKENS + 10))
            logits[layout] = runner.last_logits(probe)
            del runner
    row, col = logits["row-major"], logits["column-major"]
    med = {layout: statistics.median(xs) for layout, xs in step_s.items()}
    return {
        "batch": batch,
        "step_ms": {layout: round(v * 1e3, 3) for layout, v in med.items()},
        "speedup": round(med["row-major"] / med["column-major"], 3),
        "rounds_ms": {layout: [round(x * 1e3, 3) for x in xs] for layout, xs in step_s.items()},
        "logits_max_abs_diff": float((row - col).abs().max()),
        "same_argmax": bool((row.argmax(-1) == col.argmax(-1)).all()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="demo", help="a model directory, or demo / demo-draft")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--steps", type=int, default=100, help="decode steps timed per round and layout (at most 100)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (the suite's servers run with 1)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not 1 <= args.steps <= 100:  # positions 210-309 of the demo models' 512
        ap.error(f"--steps must be 1-100, got {args.steps}")
    if args.rounds < 1 or min(args.batch) < 1 or args.threads < 1:
        ap.error("--rounds, --batch and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    out: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or platform.platform()}",
        "torch": torch.__version__,
        "threads": args.threads,
        "load_before": os.getloadavg(),
        "results": [measure(args.model, b, args.steps, args.rounds) for b in args.batch],
    }
    out["load_after"] = os.getloadavg()
    for r in out["results"]:
        ms = r["step_ms"]
        print(f"batch {r['batch']:3d}: row-major {ms['row-major']:.2f} ms, column-major {ms['column-major']:.2f} ms "
              f"per step: {r['speedup']:.2f}x; logits apart by at most {r['logits_max_abs_diff']:.1e}, "
              f"same argmax: {r['same_argmax']}")  # fmt: skip
    print(f"load average before {out['load_before']}, after {out['load_after']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
