"""Trace replay in an experiment level: both arms replay the trace at its times. Alone on the machine (`serial`): the
trace's send rate must be kept within 5%. The rest of trace replay end to end is test_trace_replay.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from integration.test_trace_replay import write_trace
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.mock.requests import MockConfig
from speculab.mock.server import mock_server_in_thread


@pytest.mark.serial  # the trace's send rate must be kept within 5%: alone
def test_an_experiment_level_replays_the_trace_in_both_arms(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.jsonl", n=48)
    cfg = MockConfig(ttft_s=0.003, gap_s=0.001, output_tokens=5)
    with mock_server_in_thread(cfg) as url_a, mock_server_in_thread(cfg) as url_b:
        y = f"""
workload: {{spec: "trace:{tmp_path / "trace.jsonl"}", warmup_requests: 2}}
sampling: {{max_tokens: 5}}
loads: {{operating: {{trace_speed: 1}}}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""
        out = tmp_path / "run"
        asyncio.run(run_plan(plan_experiment(parse_experiment(y)), out))
    inputs = load_inputs(out)
    assert [lv.key for lv in inputs.setup.levels] == ["c1", "t1"]
    report = build_report(inputs)
    lv = report.level("t1")
    assert lv.label == "trace ×1"
    for arm in lv.arms:
        assert arm.sent == 48 and arm.error == 0 and arm.load_fraction is not None
    comp = lv.comparison("ngram-k2")
    assert comp.gate == "ok", comp.gate_reason
