"""A-vs-A through the whole lifecycle: identical arms must come out "no detectable difference", and over many
seeded runs the false-positive rate must be about the nominal 5% (issue 5, item 4).

Both arms are the same mock server (two-URL mode, interleaved ABBA blocks), so any systematic difference the
pipeline finds is a defect: order effects, block effects, connection reuse, pairing mistakes. Measurement noise
is real (the event loop, two noisy cores) plus a seeded jitter on every clock reading that dominates it, so each
run has independent per-request noise of a known size (about 7% of TPOT) and the test is reproducible in
distribution. Real machine noise alone is heavy-tailed (a busy machine stalls a few streams by tens of ms): with it
alone and 16 pairs, the rate was 15-25% on a loaded two-core machine while the verdict followed a BCa bootstrap
interval (it under-covers with so few heavy-tailed pairs); it now follows the signed-rank interval, whose level is
exact for symmetric noise (docs/statistics.md, tests/unit/bench/test_stats_small_n.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.analysis.comparison.paired import compare_paired
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.comparison import per_prompt
from speculab.harness.verdict.model import ReportOptions
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

RUNS = 40
JITTER_S = 0.0018  # +-1.8 ms on each reading; chunks are 4 ms apart, so a stream's readings stay ordered


def jittery_clock(seed: int) -> Callable[[], float]:
    """time.perf_counter plus seeded uniform jitter per reading: independent noise in every TTFT and TPOT."""
    import time

    rng = np.random.default_rng(seed)
    return lambda: time.perf_counter() + float(rng.uniform(-JITTER_S, JITTER_S))


def a_vs_a(url: str, out: Path, seed: int) -> object:
    y = f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 16, warmup_requests: 1}}
sampling: {{max_tokens: 6, seed: {seed}}}
loads: {{operating: {{concurrency: 1}}}}
baseline: {{url: "{url}"}}
candidate: {{url: "{url}"}}
speculation: {{method: ngram, num_speculative_tokens: 4}}
"""
    plan = dataclasses.replace(plan_experiment(parse_experiment(y)), memory_interval_s=10.0)  # blocks of 2
    asyncio.run(run_plan(plan, out, clock=jittery_clock(seed)))
    return load_inputs(out)


@pytest.mark.slow
def test_identical_arms_false_positive_rate_is_about_five_percent(tmp_path: Path) -> None:
    cfg = MockConfig(ttft_s=0.002, gap_s=0.004, output_tokens=6)
    verdicts: list[str] = []
    thin = 0
    with mock_server_in_thread(cfg) as url:
        for seed in range(RUNS):
            inputs = a_vs_a(url, tmp_path / f"run{seed}", seed)
            runs_b = inputs.runs_for("baseline", "c1")
            runs_c = inputs.runs_for("ngram-k4", "c1")
            cmp = compare_paired(
                "tpot_s",
                per_prompt(runs_c, "tpot_s"),
                per_prompt(runs_b, "tpot_s"),
                np.random.default_rng(seed),
                n_resamples=1000,
            )
            # every prompt is paired or dropped for a reason: a stream whose chunks all arrived in one socket read
            # (a busy machine: 13 of 16 once, under a parallel build) has TPOT 0 and is dropped
            assert cmp.n_pairs + cmp.n_dropped == 16
            if cmp.n_pairs < 8:  # too few pairs to count towards a false-positive rate: the machine, not the test
                thin += 1
                continue
            verdicts.append(cmp.verdict.value)
            if seed == 0:
                # the full report on one A-vs-A run: both arms paired on every prompt, same outputs
                report = build_report(inputs, ReportOptions(n_resamples=500))
                comp = report.level("c1").comparison("ngram-k4")
                assert comp is not None and comp.metric("tpot_s").n_pairs == cmp.n_pairs
                assert report.candidates[0].correctness.identical == 16
    if thin > RUNS // 4:
        pytest.skip(f"machine too busy: {thin}/{RUNS} A-vs-A runs kept < 8 TPOT pairs (chunks read together)")
    positives = sum(v != "no detectable difference" for v in verdicts)
    # nominal 5%: 2 expected in 40; P(Binomial(40, 0.05) > 6) is about 1%. Systematic bias would push it far above.
    assert positives <= 6, f"{positives}/{len(verdicts)} A-vs-A runs found a difference: {verdicts}"
    assert verdicts.count("no detectable difference") >= len(verdicts) - 6


@pytest.mark.parametrize("seed", [101])
def test_a_vs_a_report_has_no_gate_problem(tmp_path: Path, seed: int) -> None:
    with mock_server_in_thread(MockConfig(ttft_s=0.002, gap_s=0.004, output_tokens=6)) as url:
        inputs = a_vs_a(url, tmp_path / "run", seed)
    runs = [r for r in inputs.runs if not r.interrupted]
    assert len(runs) == 2 and all(len([x for x in r.records if not x.warmup]) == 16 for r in runs)
    assert all(x.ok for r in runs for x in r.records)
