"""Adaptive repeats: the report's own look decides identical arms after the first repeat. Alone on the machine
(`serial`): the first look decides only on a machine quiet enough. The looks' rules through the lifecycle are
test_adaptive_repeats.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from integration.test_adaptive_repeats import experiment
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.mock.requests import MockConfig
from speculab.mock.server import mock_server_in_thread


@pytest.mark.serial  # the first look decides only on a machine quiet enough: alone
def test_the_reports_own_look_decides_identical_arms_after_the_first_repeat(tmp_path: Path) -> None:
    # a mock of 10 ms gaps, not FAST's 1 ms: the client and both mocks share one event loop here, and a stall of a
    # millisecond or two in it is noise of 100 % on a 1 ms gap (the first look stayed open at margin 50 % in a
    # clean-clone rehearsal on four workers, 2026-12-06) but of 10-20 % on a 10 ms one
    steady = MockConfig(ttft_s=0.02, gap_s=0.01, output_tokens=4)
    with mock_server_in_thread(steady) as a, mock_server_in_thread(steady) as b:
        y = experiment(a, b, "{min: 1, max: 3, until: decided}").replace("num_prompts: 8", "num_prompts: 12")
        y += "margin: 50%\n"  # identical arms are equivalent within +-50 % after one repeat, however noisy the VM
        out = tmp_path / "run"
        asyncio.run(run_plan(plan_experiment(parse_experiment(y)), out))
    inputs = load_inputs(out)
    (look,) = inputs.setup.sequential["looks"]
    assert look["decided"] and look["repeat"] == 1 and inputs.setup.repeats == 1
