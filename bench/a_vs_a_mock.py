"""A-vs-A through the whole lifecycle against the mock server: the old (BCa) and the new (signed-rank) verdict.

Both arms are one mock server (two-URL mode, ABBA blocks), 16 prompts at concurrency 1, as in
tests/integration/test_a_vs_a.py, but by default WITHOUT the test's clock jitter: the only noise is the machine's
own (event loop, a busy two-core VM), which is heavy-tailed. Counts, over seeds, how often the geometric mean's BCa
interval excludes 1 (speculab's verdict before 2026-11-29) and how often the verdict (signed-rank interval) says
there is a difference; 5 % is what a 95 % interval promises.

Usage: `PYTHONPATH=src python bench/a_vs_a_mock.py [--runs 40] [--first-seed 0] [--jitter]` (~1 s per run).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from speculab.config import parse_experiment
from speculab.harness.analysis.paired import MetricComparison, Verdict, compare_paired
from speculab.harness.experiment.plan import plan_experiment
from speculab.harness.experiment.run import run_plan
from speculab.harness.mock.script import MockConfig
from speculab.harness.mock.server import mock_server_in_thread
from speculab.harness.results.ab_dir import load_inputs
from speculab.report.per_load import per_prompt

JITTER_S = 0.0018  # the integration test's: +-1.8 ms on each clock reading


def _clock(seed: int, jitter: bool) -> Callable[[], float]:
    if not jitter:
        return time.perf_counter
    rng = np.random.default_rng(seed)
    return lambda: time.perf_counter() + float(rng.uniform(-JITTER_S, JITTER_S))


def one_run(url: str, out: Path, seed: int, jitter: bool) -> MetricComparison:
    y = f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 16, warmup_requests: 1}}
sampling: {{max_tokens: 6, seed: {seed}}}
loads: {{operating: {{concurrency: 1}}}}
baseline: {{url: "{url}"}}
candidate: {{url: "{url}"}}
speculation: {{method: ngram, num_speculative_tokens: 4}}
"""
    plan = dataclasses.replace(plan_experiment(parse_experiment(y)), memory_interval_s=10.0)
    asyncio.run(run_plan(plan, out, clock=_clock(seed, jitter)))
    inputs = load_inputs(out)
    return compare_paired(
        "tpot_s",
        per_prompt(inputs.runs_for("ngram-k4", "c1"), "tpot_s"),
        per_prompt(inputs.runs_for("baseline", "c1"), "tpot_s"),
        np.random.default_rng(seed),
        n_resamples=1000,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--jitter", action="store_true", help="add the integration test's seeded clock jitter")
    a = ap.parse_args(argv)
    old = new = 0
    cfg = MockConfig(ttft_s=0.002, gap_s=0.004, output_tokens=6)
    with mock_server_in_thread(cfg) as url, tempfile.TemporaryDirectory() as tmp:
        for seed in range(a.first_seed, a.first_seed + a.runs):
            c = one_run(url, Path(tmp) / str(seed), seed, a.jitter)
            old += c.geomean_ratio.excludes(1.0)
            new += c.verdict is not Verdict.NO_DIFFERENCE
    noise = "test jitter + machine noise" if a.jitter else "machine noise only"
    print(
        f"{noise}, {a.runs} A-vs-A runs of 16 prompts: BCa geometric-mean interval excludes 1 in {old} "
        f"({old / a.runs:.0%}); signed-rank verdict says a difference in {new} ({new / a.runs:.0%})"
    )


if __name__ == "__main__":
    main()
