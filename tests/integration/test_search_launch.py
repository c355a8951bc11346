"""A search in launch mode, through `speculab run` (issue 39): each round launches every arm for its loads (two
mock servers as the engine: the candidate two tokens per chunk, its gaps growing by half per extra stream, so it
stops paying at concurrency 3), the terminal says each round and the answer, and the run's files hold the search."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import run_main
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")


def mock(port: int, *extra: str) -> str:
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "2", "--gap-ms", "10"]
    return json.dumps([*args, "--output-tokens", "9", *extra])


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_a_launch_mode_search_launches_each_round_and_answers(tmp_path: Path, capsys) -> None:
    port = free_port()
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"""
workload: {{spec: "synthetic:input=10,output=9", num_prompts: 60, warmup_requests: 1}}
sampling: {{max_tokens: 9}}
loads: {{search: {{kind: concurrency, low: 1, high: 8, tolerance: 3, max_probes: 6, groups: 6, max_groups: 6}}}}
baseline:
  launch: {{engine: other, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {mock(port, "--tokens-per-chunk", "2", "--decode-slowdown", "0.5")}}}
""",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code, stdout, err = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    search = summary["search"]
    rounds = search["rounds"]
    assert rounds[0] == [1, 3, 8] and len(search["probes"]) <= 6
    launches = json.loads((out / "launches.json").read_text(encoding="utf-8"))
    assert len(launches) == 2 * len(rounds)  # every arm launched once per round (one repeat)
    assert search["status"] == "crosses", search
    c = search["crossover"]
    assert c["low"] <= 3 <= c["high"], search  # the truth: 1 + 1 / 0.5
    assert "search: ngram k=1 stops paying on TPOT at concurrency" in stdout, stdout
