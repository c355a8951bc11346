"""The prefix-cache check end to end on launched mock servers: both expose vLLM-named prefix-cache counters, the
candidate's cache is too small to keep the workload's shared prefix, so its hit rate collapses, and the report must
say so in the warnings and in the verdict line (not blame, or credit, speculation for the TTFT change alone)."""

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
from speculab.harness.verdict.model import ReportOptions
from speculab.report.phrases import verdict_line, warning_lines

SRC = str(Path(__file__).resolve().parents[2] / "src")
SHARED = " ".join(f"w{i}" for i in range(128))  # 8 blocks of 16 tokens (the mock's tokens are words)


def mock(port: int, *extra: str) -> str:
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "5", "--gap-ms", "2",
            "--output-tokens", "12", "--prefix-cache", "--prefill-ms-per-token", "0.05", *extra]  # fmt: skip
    return json.dumps(args)


def test_a_collapsed_prefix_cache_is_a_warning_in_the_verdict(tmp_path: Path) -> None:
    workload = tmp_path / "shared.jsonl"
    workload.write_text("".join(json.dumps({"prompt": f"{SHARED} question {i} ?"}) + "\n" for i in range(12)))
    port = free_port()
    exp = parse_experiment(f"""
name: prefix cache moved
workload: {{spec: {json.dumps(str(workload))}, warmup_requests: 1}}
sampling: {{max_tokens: 12}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 2}}}}
baseline:
  launch:
    engine: other
    command: {mock(port, "--tokens-per-chunk", "1")}
    port: {port}
    env: {{PYTHONPATH: "{SRC}"}}
    ready_timeout_s: 60
speculation: {{method: ngram, num_speculative_tokens: 2}}
candidate:
  command: {mock(port, "--tokens-per-chunk", "3", "--prefix-cache-max-blocks", "4")}
""")
    out = tmp_path / "run"
    assert not asyncio.run(run_plan(plan_experiment(exp), out)).interrupted
    report = build_report(load_inputs(out), ReportOptions(n_resamples=300))
    for lv in report.levels:
        base, cand = lv.arm("baseline").prefix_cache, lv.arm("ngram-k2").prefix_cache
        assert base.source.startswith("vllm counters") and base.hit_rate > 0.85  # the shared prefix stays cached
        assert cand.hit_rate < 0.1  # 4 blocks cannot hold an 8-block prefix: LRU evicts it every time
        assert lv.comparison("ngram-k2").prefix_cache.beyond_noise
    phrase = "speculation changed the prefix-cache hit rate from"
    assert phrase in verdict_line(report, report.candidates[0])
    assert any(phrase in w and "TTFT differences may come from that" in w for w in warning_lines(report.warnings))
