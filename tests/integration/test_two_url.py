"""Two-URL mode end to end against mock servers: warmup of any size, achieved load measured per arm, a dead arm."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from speculab.config import parse_experiment
from speculab.harness.experiment.plan import plan_experiment
from speculab.harness.experiment.run import run_plan
from speculab.harness.mock.requests import MockConfig
from speculab.harness.mock.server import mock_server_in_thread
from speculab.harness.results.ab_dir import load_inputs

FAST = MockConfig(ttft_s=0.002, gap_s=0.002, output_tokens=4)


def two_url_yaml(url_a: str, url_b: str, *, prompts: int, warmup: int, loads: str, seed: int = 0) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: {prompts}, warmup_requests: {warmup}}}
sampling: {{max_tokens: 4, seed: {seed}}}
loads: {loads}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""


@pytest.mark.parametrize(
    ("concurrency", "block_size"),
    [(1, None), (2, None), (4, 3)],  # blocks of 2, 8 and 3 requests
)
def test_any_warmup_runs_with_blocks_smaller_than_it(tmp_path: Path, concurrency: int, block_size: int | None) -> None:
    """Warmup used to index the first block with the warmup request's number: more warmup requests than a block
    holds (3+ at concurrency 1, whose blocks are 2 requests) was an IndexError. Warmup now sends the workload's
    first prompts (cycled), as launch mode does, once per arm."""
    prompts = 10
    with mock_server_in_thread(FAST) as url_a, mock_server_in_thread(FAST) as url_b:
        for warmup in (0, 2, 3, 4, 8, 13):
            loads = f"{{operating: {{concurrency: {concurrency}}}}}"
            y = two_url_yaml(url_a, url_b, prompts=prompts, warmup=warmup, loads=loads)
            plan = dataclasses.replace(plan_experiment(parse_experiment(y)), block_size=block_size)
            out = tmp_path / f"w{warmup}"
            outcome = asyncio.run(run_plan(plan, out))
            inputs = load_inputs(out)
            levels = len(inputs.setup.levels)  # low (concurrency 1, the default) and operating
            assert not outcome.interrupted and outcome.runs == 2 * levels
            for arm in inputs.arms:
                runs = [r for r in inputs.runs if r.arm == arm.name]
                warm = [r for run in runs for r in run.records if r.warmup]  # once per arm, before its first block
                assert sorted(r.index for r in warm) == sorted(i % prompts for i in range(warmup))
                for run in runs:
                    measured = [r for r in run.records if not r.warmup]
                    assert sorted(r.index for r in measured) == list(range(prompts))  # each prompt once: pairing key
                    assert all(r.ok for r in run.records)
