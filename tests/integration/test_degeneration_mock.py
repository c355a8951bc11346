"""Issue 50's done-means for degeneration, end to end in launch mode: on the built-in long-output set at temperature
0.7, a scripted candidate (`speculab mock-server --loop-after-tokens 32 --loop-period 8`, launched as the engine)
that falls into a period-8 loop after 32 tokens is flagged by the degeneration check: worse than the baseline, with
an interval, in the terminal, report.html and summary.json. The same server without the loop (A vs A) is not."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import run_main
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")


def mock(port: int, *extra: str) -> str:
    """The mock as a launched engine: 96-token answers, 4 ms between chunks (a run of seconds). With 1 ms gaps a busy
    machine's late wakeups stretched the two arms' gaps unequally: the 2x per token came out 2.17x (a clean-clone
    rehearsal, 2026-12-06)."""
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "5", "--gap-ms", "4"]
    return json.dumps([*args, "--output-tokens", "96", *extra])


def run(tmp_path: Path, capsys, *candidate: str) -> tuple[dict, str, Path]:
    port = free_port()
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"""
workload: {{spec: "builtin:long", num_prompts: 24, warmup_requests: 1}}
sampling: {{temperature: 0.7}}
loads: {{low: {{concurrency: 4}}, operating: {{concurrency: 4}}}}
baseline:
  launch: {{engine: other, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {mock(port, "--tokens-per-chunk", "2", *candidate)}}}
""",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code, stdout, err = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, err
    return json.loads((out / "summary.json").read_text(encoding="utf-8")), " ".join(stdout.split()), out


@pytest.mark.slow
def test_a_candidate_that_falls_into_a_loop_is_flagged_worse_with_an_interval(tmp_path: Path, capsys) -> None:
    summary, stdout, out = run(tmp_path, capsys, "--loop-after-tokens", "32", "--loop-period", "8")
    correctness = summary["candidates"][0]["correctness"]
    assert correctness["temperature"] == 0.7 and correctness["worse"] is True
    dg = correctness["degeneration"]
    assert dg["worse"] is True and dg["verdict"]["kind"] == "degeneration_worse"
    assert (dg["n_compared"], dg["candidate_only"], dg["baseline_only"]) == (24, 24, 0)
    assert dg["baseline_rate"]["estimate"] == 0.0 and dg["candidate_rate"]["estimate"] == 1.0
    assert 0.5 < dg["difference"]["low"] <= dg["difference"]["high"] <= 1.0 and dg["mcnemar_p"] < 0.001
    looped = dg["prompts"][0]["candidate"]
    assert looped["period"] == 8 and looped["loop_units"] >= 64 and looped["strength"] >= 0.66
    said = "DEGENERATES where the baseline does not: 24 of 24 outputs loop or repeat themselves against 0 of 24"
    assert correctness["verdict"]["text"].startswith(said)
    assert f"correctness: {said}" in stdout, stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "outputs that loop or repeat themselves" in html and "loop of period 8" in html
    # twice as fast per token, but looping: not recommended, the correctness guardrail says why
    assert summary["recommendation"]["form"] == "plain", summary["recommendation"]
    # about 2x (the mock's script: two tokens a chunk at the same gap; 1.99x on a busy VM)
    assert re.search(r"TPOT (1\.9\d|2\.0\d)× faster", stdout), stdout
    assert "but correctness worse: not recommended" in stdout, stdout


@pytest.mark.slow
def test_a_vs_a_on_long_outputs_flags_no_degeneration(tmp_path: Path, capsys) -> None:
    summary, stdout, _ = run(tmp_path, capsys)
    correctness = summary["candidates"][0]["correctness"]
    dg = correctness["degeneration"]
    assert dg["n_compared"] == 24 and dg["n_prompts"] == 0 and dg["worse"] is False
    assert dg["verdict"]["text"] == "no output loops or repeats itself in either arm (24 prompts)"
    assert correctness["worse"] is False and "degenerat" not in stdout.lower()
    assert "correctness worse" not in stdout
