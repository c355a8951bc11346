"""Issue 49's done-means on the mock's step-batched engine, whose truth is known (`speculab.mock.truth`): a plain step
costs a + b·batch, a speculative one grows with batch × K, acceptance is drawn position by position. From `speculab
predict`'s probes (plain and K = 4 at concurrency 1, then 6 and 32 at forced acceptance, 32 prompts each) the
prediction must place the crossover of K = 4 within ±25 % of the truth, the speedup at one stream within ±15 %, the
best k at the lowest and the highest load as the truth's, and send at most a quarter of what a fixed K × load sweep
would. (The crossover is sensitive: near it the two arms' costs grow at close slopes, so a few % on the verify cost
moves it by a fifth.)"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import run_main
from speculab.harness.servers.process import free_port
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_best_k, true_crossover_of_k, true_tpot_s, with_k

SRC = str(Path(__file__).resolve().parents[2] / "src")
TOKENS = 33
RATES = (0.8, 0.7, 0.6, 0.5, 0.4, 0.3)
ENGINE = MockConfig(step_batched=True, ttft_s=0.0, step_s=0.008, step_s_per_request=0.001,
                    verify_s_per_request_token=0.0006, draft_s_per_token=0.0005, acceptance_rates=RATES,
                    output_tokens=TOKENS)  # fmt: skip


def mock(port: int, *extra: str) -> str:
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--step-batched", "--ttft-ms", "0"]
    engine = ["--step-ms", "8", "--step-ms-per-request", "1", "--verify-ms-per-request-token", "0.6",
              "--draft-ms-per-token", "0.5", "--acceptance-rates", ",".join(map(str, RATES)),
              "--output-tokens", str(TOKENS)]  # fmt: skip
    return json.dumps([*args, *engine, *extra])


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_the_prediction_on_a_batched_engine_meets_the_issue_tolerances(tmp_path: Path, capsys) -> None:
    truth_x = true_crossover_of_k(ENGINE, 4)
    truth_at1 = true_tpot_s(with_k(ENGINE, 0), 1) / true_tpot_s(with_k(ENGINE, 4), 1)
    best = {c: true_best_k(ENGINE, c) for c in (1, 32)}
    assert 1 < truth_x < 32 and best == {1: 3, 32: 1}  # the truth lies inside the range, and the best k moves
    port = free_port()
    exp = tmp_path / "exp.yaml"
    # the mock poses as vLLM: the candidate is derived by its speculative config, and the cost phase forces its
    # acceptance with vLLM's synthetic sampler (the mock honours it as vLLM does)
    exp.write_text(
        f"""
workload: {{spec: "synthetic:input=10,output={TOKENS}", num_prompts: 32, warmup_requests: 1}}
sampling: {{max_tokens: {TOKENS}}}
loads: {{search: {{kind: concurrency, low: 1, high: 32, tolerance: 4}}}}
baseline:
  launch: {{engine: vllm, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 4, engine_args: ["--per-request-spec-decode-metrics"]}}
""",
        encoding="utf-8",
    )
    out = Path(os.environ.get("SPECULAB_KEEP_PREDICT", tmp_path / "p"))  # to look at the probes afterwards
    code, stdout, err = run_main(capsys, "predict", str(exp), "--output", str(out))
    assert code == 0, err
    pred = json.loads((out / "prediction.json").read_text(encoding="utf-8"))
    by_k = {c["k"]: c for c in pred["candidates"]}
    assert sorted(by_k) == [1, 2, 3, 4]  # a chain proposer: every k up to the measured K
    x = by_k[4]["crossover"]
    assert x["estimate"] == pytest.approx(truth_x, rel=0.25), (x, truth_x)
    at1 = by_k[4]["curve"][0]
    assert at1["load"] == 1 and at1["speedup"]["estimate"] == pytest.approx(truth_at1, rel=0.15), (at1, truth_at1)
    sched = pred["k_schedule"]
    assert (sched[0]["k"], sched[-1]["k"]) == (best[1], best[32]), sched
    assert pred["requests_sent"] <= pred["sweep_requests"] / 4, (pred["requests_sent"], pred["sweep_requests"])
    model = pred["models"][0]
    assert model["acceptance"]["interval_over"] == "prompts"  # per-request histograms: intervals over prompts
    # what prediction.json promises (docs/predict.md), the probes' own run beside it, and the terminal's view
    assert pred["schema"] == "speculab.prediction/1" and pred["loads"] == {"kind": "concurrency", "low": 1, "high": 32}
    assert set(by_k[4]) >= {"name", "k", "crossover", "curve"} and x["low"] < x["estimate"] < x["high"]
    assert pred["output_tokens"] == TOKENS and pred["requests_sent"] == 2 * 3 * 32
    for phase in ("acceptance", "cost"):
        assert (out / "probes" / phase / "summary.json").is_file() and (
            out / "probes" / phase / "report.html"
        ).is_file()
    # acceptance measured on the prompts at concurrency 1; the cost at 6 and 32 forced to those rates
    forced = sorted((p["k"], p["batch"] > 1.5, p["forced"]) for p in model["cost_fit"]["probes"])
    assert forced == [(0, False, False), (0, True, False), (0, True, False), (4, False, False)] + [(4, True, True)] * 2
    assert "prediction over concurrency 1–32" in stdout and "best k by load" in stdout
