"""Issue 50 item 1's done-means end to end in launch mode: a run on `synthetic:` prompts says first, in its headline,
that acceptance is not the user's traffic's, and a candidate launched with forced acceptance (vLLM's synthetic
rejection sampler in its --speculative-config, which the scripted mock's step-batched mode honours) is
reported as forced, never as measured; the recommendation chooses nothing on either."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import run_main
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")
FORCED = {"method": "ngram", "num_speculative_tokens": 1, "rejection_sample_method": "synthetic",
          "synthetic_acceptance_rates": [1.0]}  # fmt: skip


def mock(port: int, *extra: str) -> str:
    """The mock server as a launched engine: batched steps of 5 ms, 16-token answers (the step-batched mode is the
    one that honours vLLM's synthetic sampler: forced acceptance at its rates)."""
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "5"]
    args += ["--step-batched", "--step-ms", "5", "--output-tokens", "16", *extra]
    return json.dumps(args)


def experiment(port: int) -> str:
    candidate = mock(port, "--speculative-config", json.dumps(FORCED))
    return f"""
name: validity
workload: {{spec: "synthetic:input=10,output=16", num_prompts: 6, warmup_requests: 1}}
sampling: {{max_tokens: 16}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 1}}}}
repeats: 1
baseline:
  launch: {{engine: other, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {candidate}}}
"""


@pytest.mark.slow
def test_synthetic_prompts_and_forced_acceptance_are_said_first_and_choose_nothing(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment(free_port()), encoding="utf-8")
    out = tmp_path / "run"
    code, stdout, err = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    kinds = [w["kind"] for w in summary["warnings"]]
    assert kinds[:2] == ["acceptance_synthetic_prompts", "acceptance_forced"], kinds
    forced = summary["warnings"][1]
    assert "rejection_sample_method=synthetic" in forced["fields"]["configured"][0], forced
    (cand,) = summary["candidates"]
    assert cand["acceptance"]["provenance"] == "forced", cand["acceptance"]
    saved = [json.loads(p.read_text()) for p in out.rglob("run.json")]
    forced_runs = [r for r in saved if r["arm"] != "baseline"]
    assert forced_runs and all(r["acceptance"]["provenance"] == "forced" for r in forced_runs), forced_runs
    assert summary["recommendation"]["form"] == "undecided"
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("speculab A/B"))
    assert lines[start + 1].startswith("acceptance measured on synthetic prompts: not your traffic's"), lines[:5]
    assert "acceptance forced, not measured" in stdout
    assert "acceptance length 2.00 (forced, not measured: " in stdout  # the verdict line never says it as measured
    rec = next(ln for ln in lines if ln.startswith("recommendation:"))
    assert rec.startswith("recommendation: undecided"), rec
