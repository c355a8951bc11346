"""How much two launches of one server command differ: the scale the default margin has to cover.

Runs an A-vs-A in launch mode (`speculab run`'s library path): both arms are the same command, launched afresh for
every repeat (ABBA), so repeat j of each arm is a launch pair. For each metric it prints every launch pair's effect
(the Hodges-Lehmann log ratio of its prompts, `verdict.comparison.launch_effects`, as the verdict counts them), the
standard deviation of those effects across pairs, and the typical within-pair standard error (from each pair's own
signed-rank interval): a launch effect shows as a spread across pairs well above the within-pair error.

Usage: `PYTHONPATH=src python bench/launch_spread.py [--engine demo|mock] [--repeats 6] [--prompts 24]
[--json out.json]`. `demo` launches `speculab serve demo --threads 1` (the reference engine on the shipped demo
model, CPU); `mock` launches `speculab mock-server` (~100 ms requests).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.analysis.comparison.paired import hodges_lehmann_ratio, paired_ratios
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.process import free_port
from speculab.harness.verdict.comparison import launch_effects, paired_per_prompt

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _command(engine: str, port: int) -> list[str]:
    base = [sys.executable, "-m", "speculab"]
    if engine == "demo":
        return [*base, "serve", "demo", "--port", str(port), "--threads", "1"]
    return [*base, "mock-server", "--port", str(port), "--ttft-ms", "10", "--gap-ms", "8", "--output-tokens", "12"]


def _yaml(engine: str, repeats: int, prompts: int, max_tokens: int) -> str:
    port = free_port()
    cmd = json.dumps(_command(engine, port))
    return f"""
workload: {{spec: "synthetic:input=16,output=16", num_prompts: {prompts}, warmup_requests: 4}}
sampling: {{max_tokens: {max_tokens}, seed: 0}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 1}}}}
repeats: {repeats}
baseline:
  launch: {{engine: other, command: {cmd}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}, ready_timeout_s: 120}}
candidate: {{command: {cmd}}}
speculation: {{method: ngram, num_speculative_tokens: 4}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("demo", "mock"), default="demo")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        plan = plan_experiment(parse_experiment(_yaml(a.engine, a.repeats, a.prompts, a.max_tokens)))
        asyncio.run(run_plan(dataclasses.replace(plan, memory_interval_s=10.0), out))
        inputs = load_inputs(out)
    cand = next(c.name for c in inputs.candidates)
    result = {"engine": a.engine, "repeats": a.repeats, "prompts": a.prompts, "metrics": {}}
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    print(f"{a.engine}: {a.repeats} launch pairs x {a.prompts} prompts at concurrency 1, {time.perf_counter() - t0:.0f}"
          f" s; load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs; {when} UTC")  # fmt: skip
    for metric in ("tpot_s", "e2e_s", "ttft_s"):
        c_runs, b_runs = inputs.runs_for(cand, "c1"), inputs.runs_for("baseline", "c1")
        effects = launch_effects(c_runs, b_runs, metric, None, 1)
        within = []
        for c in c_runs:
            b = next((r for r in b_runs if r.repeat == c.repeat), None)
            if b is None:
                continue
            cv, bv, _ = paired_per_prompt([c], [b], metric)
            iv = hodges_lehmann_ratio(paired_ratios(cv, bv))
            if iv.low > 0 and math.isfinite(iv.high):
                within.append((math.log(iv.high) - math.log(iv.low)) / (2 * 1.96))
        sd = statistics.stdev(effects) if len(effects) > 1 else float("nan")
        se = statistics.median(within) if within else float("nan")
        result["metrics"][metric] = {"effects_log": effects, "sd_between": sd, "se_within_median": se}
        cells = ", ".join(f"{100 * math.expm1(e):+.2f}%" for e in effects)
        print(f"  {metric}: launch pairs {cells}; sd between pairs {100 * sd:.2f} %, within-pair SE {100 * se:.2f} %")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
