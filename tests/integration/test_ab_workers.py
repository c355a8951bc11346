"""`workers: N` on an experiment's load level: the same prompts pair per prompt exactly as with one client process
(two-URL mode against two mock processes)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from tests.fakes.words import words

from integration.mock_process import mock_process
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report

# ~100 ms requests, as a deployed server's: with ~20 ms ones the client's ~1 ms turnaround between a response and the
# next send is ~5 % of each request on this 2-core VM, one process or two, and the achieved-load gate (95 %) refuses
# either way (bench/a_vs_a_mock.py measured the same)
SERVED = dict(ttft_s=0.010, gap_s=0.008, output_tokens=12)


def experiment(a: str, b: str, workers: int) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=6", num_prompts: 32, warmup_requests: 2}}
sampling: {{max_tokens: 12}}
loads: {{operating: {{concurrency: 4, workers: {workers}}}}}
baseline: {{url: "{a}"}}
candidate: {{url: "{b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""


@pytest.mark.slow
# each arm's closed loop must hold 95 % of its load (the mocks' 80-340 ms requests): it missed in the suite's crowded
# background beside five workers (tests/sharing.py, 2026-12-07), as beside CPU-bound tests before
@pytest.mark.paced
def test_two_workers_pair_per_prompt_exactly_as_one(tmp_path: Path) -> None:
    pairs = {}
    with mock_process(**SERVED) as a, mock_process(**SERVED) as b:
        for n in (1, 2):
            out = tmp_path / f"w{n}"
            # one block of all 32 prompts per arm, so both arms run every prompt at the same point of the level
            plan = dataclasses.replace(plan_experiment(parse_experiment(experiment(a, b, n))), block_size=32)
            asyncio.run(run_plan(plan, out))
            inputs = load_inputs(out)
            report = build_report(inputs)
            comp = report.level("c4").comparison("ngram-k2")
            # E2E, not TPOT: a busy machine delivers a stream's chunks in one socket read (TPOT 0, dropped: 19 of 32
            # TPOT pairs once, under a parallel build), which would compare the machine's load, not the pairing
            tp = comp.metric("e2e_s")
            runs = {arm: inputs.runs_for(arm, "c4")[0] for arm in ("baseline", "ngram-k2")}
            idx = {arm: sorted(r.index for r in run.records if not r.warmup) for arm, run in runs.items()}
            assert idx["baseline"] == idx["ngram-k2"] == list(range(32))
            assert all(r.ok for run in runs.values() for r in run.records)
            pairs[n] = (tp.n_pairs, tp.n_units, tp.group_size, comp.gate)
            if n == 2:
                assert any("2 client worker processes" in note for note in words(runs["baseline"].notes))
                assert runs["baseline"].client is not None
    assert pairs[1][:3] == pairs[2][:3]  # the same pairs, units and groups
    assert pairs[2][3] == "ok"
