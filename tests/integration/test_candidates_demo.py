"""Several candidates in one experiment against `speculab serve demo` (issue 12): one invocation, the baseline
launched once per repeat, every candidate derived and checked, and summary.json with every candidate and the best
candidate per load."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.servers.process import free_port
from speculab.report.render import render_run_dir

pytest.importorskip("torch")


@pytest.mark.slow
def test_three_candidates_against_the_demo_engine_in_one_run(tmp_path: Path) -> None:
    port = free_port()
    command = json.dumps([sys.executable, "-m", "speculab", "serve", "demo", "--port", str(port)])
    y = f"""
name: three candidates
workload: {{spec: builtin:grounded, num_prompts: 6, warmup_requests: 1}}
sampling: {{max_tokens: 16}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 1}}}}
baseline:
  launch: {{engine: speculab, command: {command}, port: {port}}}
speculation:
  - {{method: ngram, num_speculative_tokens: 2}}
  - {{method: ngram, num_speculative_tokens: 4, name: ngram-wide, prompt_lookup_max: 4, prompt_lookup_min: 2}}
  - {{method: draft_model, num_speculative_tokens: 3, model: demo-draft}}
"""
    plan = plan_experiment(parse_experiment(y))
    assert [c.verified for c in plan.changes] == [True, True, True]
    out = tmp_path / "run"
    outcome = asyncio.run(run_plan(plan, out))
    assert not outcome.interrupted
    launches = json.loads((out / "launches.json").read_text())
    # one launch per arm, in the first row of the balanced Latin square (0, 1, n-1, 2, ...): baseline first
    assert [x["arm"] for x in launches] == ["baseline", "ngram-k2", "draft_model-k3", "ngram-wide"]
    render_run_dir(out)  # what `speculab run` does after the run
    summary = json.loads((out / "summary.json").read_text())
    assert [c["name"] for c in summary["candidates"]] == ["ngram-k2", "ngram-wide", "draft_model-k3"]
    (level,) = summary["levels"]
    assert "best" in level and len(level["ranking"]) == 3
    assert level["best"] is None or level["best"] in {"ngram-k2", "ngram-wide", "draft_model-k3"}
    text = (out / "report.html").read_text()
    assert "TPOT speedup [95% CI]" in text
