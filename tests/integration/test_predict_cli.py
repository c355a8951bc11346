"""`speculab predict` end to end on two launched mock servers with a known crossover (the candidate two tokens per
chunk at the baseline's gap, its gaps stretched by a tenth per extra stream in flight: it stops paying at concurrency
1 + 1 / 0.1 = 11): the probes run as an A/B, prediction.json holds the promised keys, and the predicted crossover lies
near the truth; a load the model cannot take is a one-line error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import one_line_error, run_main
from speculab.harness.servers.process import free_port
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_crossover

SRC = str(Path(__file__).resolve().parents[2] / "src")
TOKENS = 17
PLAIN = {"ttft_s": 0.002, "gap_s": 0.01, "output_tokens": TOKENS}
SPEC = PLAIN | {"tokens_per_chunk": 2, "decode_slowdown_per_request": 0.1, "num_speculative_tokens": 1}


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


@pytest.mark.slow
@pytest.mark.serial  # the mock's scripted timing is the truth the prediction is held to
def test_predict_runs_its_probes_and_places_the_known_crossover(tmp_path: Path, capsys) -> None:
    truth = true_crossover(MockConfig(**PLAIN), MockConfig(**SPEC))
    assert truth == pytest.approx(11.0)
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment(free_port(), "{search: {kind: concurrency, low: 1, high: 16, tolerance: 3}}"))
    out = tmp_path / "p"
    code, stdout, err = run_main(capsys, "predict", str(exp), "--output", str(out))
    assert code == 0, err
    assert (out / "probes" / "summary.json").is_file() and (out / "probes" / "report.html").is_file()
    pred = json.loads((out / "prediction.json").read_text(encoding="utf-8"))
    assert pred["schema"] == "speculab.prediction/1" and pred["loads"] == {"kind": "concurrency", "low": 1, "high": 16}
    (cand,) = pred["candidates"]
    assert cand["name"] == "ngram-k1" and cand["k"] == 1 and cand["tokens_per_step"] == pytest.approx(2.0, abs=0.01)
    x = cand["crossover"]
    assert x["estimate"] == pytest.approx(truth, rel=0.3), x
    assert x["low"] < x["estimate"] < x["high"]
    first = cand["curve"][0]
    assert first["load"] == 1 and first["speedup"]["estimate"] == pytest.approx(2.0, rel=0.15)
    assert [b["k"] for b in pred["k_schedule"]] == [1, 0]  # k=1 below the crossing, plain decoding above
    assert pred["requests_sent"] == 2 * 3 * 24 and pred["sweep_requests"] == 2 * 5 * 24
    assert "prediction over concurrency 1–16" in stdout and "best k by load" in stdout


def test_a_rate_load_is_a_one_line_error_naming_the_fix(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment(free_port(), "{low: {rate: 1}, operating: {rate: 4}}"))
    code, _, err = run_main(capsys, "predict", str(exp), "--output", str(tmp_path / "p"))
    assert code == 2
    assert "needs concurrency loads" in one_line_error(err)
