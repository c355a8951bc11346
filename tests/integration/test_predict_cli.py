"""`speculab predict`'s refusals: a load the model cannot take is a one-line error naming the fix (the prediction end
to end is tests/integration/test_predict_truth.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fakes.cli_runner import one_line_error, run_main
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")
TOKENS = 17


def mock(port: int, *extra: str) -> str:
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "2", "--gap-ms", "10"]
    return json.dumps([*args, "--output-tokens", str(TOKENS), *extra])


def experiment(port: int, loads: str) -> str:
    cand = mock(port, "--tokens-per-chunk", "2", "--num-speculative-tokens", "1", "--decode-slowdown", "0.1")
    return f"""
workload: {{spec: "synthetic:input=10,output={TOKENS}", num_prompts: 24, warmup_requests: 1}}
sampling: {{max_tokens: {TOKENS}}}
loads: {loads}
baseline:
  launch: {{engine: other, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {cand}}}
"""


def test_a_rate_load_is_a_one_line_error_naming_the_fix(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment(free_port(), "{low: {rate: 1}, operating: {rate: 4}}"))
    code, _, err = run_main(capsys, "predict", str(exp), "--output", str(tmp_path / "p"))
    assert code == 2
    assert "needs concurrency loads" in one_line_error(err)


def test_one_load_is_no_range_and_says_how_to_give_one(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment(free_port(), "{low: {concurrency: 4}, operating: {concurrency: 4}}"))
    code, _, err = run_main(capsys, "predict", str(exp), "--output", str(tmp_path / "p"))
    assert code == 2 and "needs a load range" in one_line_error(err)
