"""Adaptive repeats, A-vs-A: with `repeats: {min, max, until: decided}`, how often are identical arms called
different, and how many requests does stopping early save against always running `max` repeats?

Each run is `speculab run`'s library path in two-URL mode against two identical mock servers in their own
processes (24 prompts at concurrency 1 by default), with adaptive repeats judged by the report's own verdicts after
each repeat (`harness.verdict.looks.take_look`, alpha spent across looks: stats.sequential). A false positive is a final
decision of "faster" or "slower" (beyond the margin, at the run's last look's level, as the report gives it); the
detectable-difference verdicts are counted beside it. Since the margin, a look stops on faster, slower or
equivalent; inconclusive goes on. The saving is 1 - the
requests a run sent / what `max` repeats send. Seeds: run i uses seed first_seed + i (its per-request seeds).

Usage: `PYTHONPATH=src python bench/a_vs_a_adaptive.py [--runs 200] [--min 1] [--max 6] [--margin 3%]
[--spending pocock] [--prompts 24] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.process import free_port, port_in_use
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions

SRC = str(Path(__file__).resolve().parents[1] / "src")
MOCK_ARGS = ["--ttft-ms", "4", "--gap-ms", "3", "--output-tokens", "8"]  # ~30 ms requests


@contextlib.contextmanager
def served() -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), *MOCK_ARGS]
    proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not port_in_use("127.0.0.1", port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mock-server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def one_run(a: str, b: str, out: Path, seed: int, args: argparse.Namespace) -> dict[str, object]:
    y = f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: {args.prompts}, warmup_requests: 2}}
sampling: {{max_tokens: 8, seed: {seed}}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 1}}}}
repeats: {{min: {args.min}, max: {args.max}, until: decided, spending: {args.spending}}}
margin: {args.margin}
baseline: {{url: "{a}"}}
candidate: {{url: "{b}"}}
speculation: {{method: ngram, num_speculative_tokens: 4}}
"""
    plan = dataclasses.replace(plan_experiment(parse_experiment(y)), memory_interval_s=10.0)
    asyncio.run(run_plan(plan, out))
    inputs = load_inputs(out)
    report = build_report(inputs, ReportOptions(n_resamples=300, seed=seed))
    (lv,) = report.levels
    comp = lv.comparisons[0]
    sent = sum(1 for r in inputs.runs for x in r.records if not x.warmup)
    looks = inputs.setup.sequential["looks"]
    return {"seed": seed, "verdict": comp.verdict, "decision": comp.decision, "repeats": inputs.setup.repeats,
            "sent": sent,
            "looks": len(looks), "confidence": report.options["confidence"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("--max", type=int, default=6)
    ap.add_argument("--margin", default="3%")
    ap.add_argument("--spending", default="pocock")
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load0 = os.getloadavg()[0]
    results = []
    with served() as a, served() as b, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            res = one_run(a, b, Path(tmp) / f"run{i}", args.first_seed + i, args)
            results.append(res)
            if (i + 1) % 20 == 0:
                fp = sum(r["decision"] in ("faster", "slower") for r in results)
                print(f"{i + 1} runs: {fp} called different; mean repeats "
                      f"{sum(r['repeats'] for r in results) / len(results):.2f}", flush=True)  # fmt: skip
    n = len(results)
    fp = sum(r["decision"] in ("faster", "slower") for r in results)
    fixed = args.max * 2 * args.prompts
    summary = {
        "started": started,
        "loadavg_1m_at_start": round(load0, 2),
        "runs": n,
        "design": {
            "min": args.min,
            "max": args.max,
            "margin": args.margin,
            "spending": args.spending,
            "prompts": args.prompts,
        },
        "false_positives": fp,
        "false_positive_rate": fp / n,
        "decisions": dict(Counter(r["decision"] for r in results)),
        "verdicts": dict(Counter(r["verdict"] for r in results)),
        "repeats_used": dict(sorted(Counter(r["repeats"] for r in results).items())),
        "mean_requests": sum(r["sent"] for r in results) / n,
        "fixed_design_requests": fixed,
        "saving": 1 - sum(r["sent"] for r in results) / (n * fixed),
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
