"""Cache reset between blocks, end to end (#40 item 1): a launch-mode run against mock servers posing as vLLM (the
candidate derived by the vLLM adapter, `--speculative-config` added), two loads. The mock serves vLLM's dev-mode
`POST /reset_prefix_cache` only when its environment has VLLM_SERVER_DEV_MODE=1, as vLLM does: the server seeing
a reset before every block shows launch mode set the variable, in both arms alike, and called the endpoint."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.run.plan import plan_experiment
from speculab.harness.run.run import run_plan
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")
RESET_LINE = "mock-server: prefix cache reset"


def _experiment(port: int, reset: str) -> str:
    cmd = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "5", "--gap-ms", "2",
           "--output-tokens", "8", "--prefix-cache"]  # fmt: skip
    return f"""
name: cache reset
workload: {{spec: "synthetic:input=40,output=8,n=6", warmup_requests: 1}}
sampling: {{max_tokens: 8}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 2}}}}
cache: {{reset: {reset}}}
baseline:
  launch:
    engine: vllm
    command: {json.dumps(cmd)}
    port: {port}
    env: {{PYTHONPATH: "{SRC}"}}
    ready_timeout_s: 60
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""


def _run(tmp_path: Path, reset: str) -> Path:
    exp = parse_experiment(_experiment(free_port(), reset))
    out = tmp_path / "run"
    assert not asyncio.run(run_plan(plan_experiment(exp), out)).interrupted
    return out


def _resets_seen(out: Path) -> int:
    return sum(log.read_text().count(RESET_LINE) for log in (out / "logs").glob("*.log"))


def test_a_launched_vllm_sees_a_prefix_cache_reset_before_every_block(tmp_path: Path) -> None:
    out = _run(tmp_path, "between-blocks")
    inputs = load_inputs(out)
    assert {c.candidate: c.verified for c in inputs.changes} == {"ngram-k2": True}  # the same env in both arms
    # 2 arms x 2 loads x 1 repeat: one block each in launch mode, each reset before its measured requests
    assert len(inputs.runs) == 4
    assert _resets_seen(out) >= 4
    for run in inputs.runs:
        assert [(r.block, r.outcome, r.endpoints) for r in run.cache_resets] == [
            (0, "reset", ("/reset_prefix_cache",))
        ]
    meta = json.loads(next((out / "runs").rglob("run.json")).read_text())
    assert meta["cache_resets"][0]["outcome"] == "reset"  # the manifest says it per block
    assert not any("refused to reset" in n for n in inputs.notes)


def test_never_asks_no_reset_and_leaves_the_environment_alone(tmp_path: Path) -> None:
    out = _run(tmp_path, "never")
    inputs = load_inputs(out)
    assert _resets_seen(out) == 0
    assert {r.outcome for run in inputs.runs for r in run.cache_resets} == {"off"}
