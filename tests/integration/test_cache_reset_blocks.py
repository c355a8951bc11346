"""Cache reset between blocks, end to end (#40 item 1): a launch-mode run against mock servers posing as vLLM (the
candidate derived by the vLLM adapter, `--speculative-config` added), two loads. The mock serves vLLM's dev-mode
`POST /reset_prefix_cache` only when its environment has VLLM_SERVER_DEV_MODE=1, as vLLM does: the server seeing
a reset before every block shows launch mode set the variable, in both arms alike, and called the endpoint."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.process import free_port
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions, WarningKind
from speculab.report.html.sections import prefix_cache_text
from speculab.report.phrases import warning_text

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
        assert [(r.block, r.outcome, r.endpoints) for r in run.cache_resets] == [(0, "reset", ("/reset_prefix_cache",))]
    meta = json.loads(next((out / "runs").rglob("run.json")).read_text())
    assert meta["cache_resets"][0]["outcome"] == "reset"  # the manifest says it per block
    assert not any(n.kind == WarningKind.CACHE_RESET_REFUSED for n in inputs.notes)
    # the report says it per arm and load, beside the prefix-cache hit rate (which is still compared)
    report = build_report(inputs, ReportOptions(n_resamples=200))
    for lv in report.levels:
        for arm in ("baseline", "ngram-k2"):
            assert lv.arm(arm).cache_resets == {"reset": 1} and lv.arm(arm).prefix_cache is not None
            assert "cache reset before 1 of 1 blocks" in prefix_cache_text(lv.arm(arm))
        assert lv.comparison("ngram-k2").prefix_cache is not None
    assert Report.from_json(report.to_json()).levels[0].arms[0].cache_resets == {"reset": 1}


def test_never_asks_no_reset_and_leaves_the_environment_alone(tmp_path: Path) -> None:
    out = _run(tmp_path, "never")
    inputs = load_inputs(out)
    assert _resets_seen(out) == 0
    assert {r.outcome for run in inputs.runs for r in run.cache_resets} == {"off"}


def _two_url(tmp_path: Path, dev_mode: bool) -> Path:
    """Two-URL mode against in-process mocks posing as vLLM (its prefix-cache counter names: detected as vLLM)."""
    from speculab.mock.script import MockConfig
    from speculab.mock.server import mock_server_in_thread

    cfg = MockConfig(ttft_s=0.002, gap_s=0.002, output_tokens=4, prefix_cache=True, dev_mode=dev_mode)
    with mock_server_in_thread(cfg) as url_a, mock_server_in_thread(cfg) as url_b:
        exp = parse_experiment(f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 6, warmup_requests: 1}}
sampling: {{max_tokens: 4}}
loads: {{operating: {{concurrency: 1}}}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
""")
        out = tmp_path / "run"
        assert not asyncio.run(run_plan(plan_experiment(exp), out)).interrupted
    return out


def test_two_url_mode_resets_each_servers_cache_before_each_of_its_blocks(tmp_path: Path, capfd) -> None:
    out = _two_url(tmp_path, dev_mode=True)
    inputs = load_inputs(out)
    blocks = 3  # 6 prompts in blocks of 2 at concurrency 1
    for run in inputs.runs:
        assert [(r.block, r.outcome) for r in run.cache_resets] == [(b, "reset") for b in range(blocks)]
    assert capfd.readouterr().err.count(RESET_LINE) == blocks * len(inputs.runs)
    assert not any(n.kind == WarningKind.CACHE_RESET_REFUSED for n in inputs.notes)


def test_two_url_mode_says_when_the_server_refuses_and_runs_on(tmp_path: Path) -> None:
    out = _two_url(tmp_path, dev_mode=False)
    inputs = load_inputs(out)
    assert all(r.ok for run in inputs.runs for r in run.records)
    outcomes = [r for run in inputs.runs for r in run.cache_resets]
    assert outcomes and {r.outcome for r in outcomes} == {"refused"}
    assert all(r.detail.startswith("POST /reset_prefix_cache: HTTP 404") for r in outcomes)
    refused = [warning_text(n) for n in inputs.notes if n.kind == WarningKind.CACHE_RESET_REFUSED]
    assert len(refused) == 2  # once per arm, not once per block
    assert all("VLLM_SERVER_DEV_MODE=1" in n and "cache: {reset: never}" in n for n in refused)
