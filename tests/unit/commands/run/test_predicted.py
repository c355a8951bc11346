"""`run --prediction`: the prediction's rows matched to the run's candidates by name and k, a search's first round
seeded with the predicted interval, and a file that is not a prediction refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.probing.predicted import with_prediction
from speculab.config import parse_experiment
from speculab.errors import UserError

EXP = """
workload: {spec: builtin:grounded, num_prompts: 24}
loads: LOADS
baseline: {launch: {engine: vllm, command: [serve, --port, "8000"], port: 8000}}
speculation: [{method: ngram, num_speculative_tokens: 4}, {method: ngram, num_speculative_tokens: 2}]
"""


def plan(loads: str):
    return plan_experiment(parse_experiment(EXP.replace("LOADS", loads), "exp.yaml"))


def prediction(tmp_path: Path, rows: list[dict]) -> Path:
    p = tmp_path / "prediction.json"
    p.write_text(json.dumps({"schema": "speculab.prediction/1", "candidates": rows}), encoding="utf-8")
    return p


def row(name: str, k: int, low: float, high: float) -> dict:
    curve = [{"load": 1, "speedup": {"estimate": 2.0, "low": 1.8, "high": 2.2}},
             {"load": 64, "speedup": {"estimate": 0.7, "low": 0.6, "high": 0.8}}]  # fmt: skip
    return {"name": name, "k": k, "tokens_per_step": 2.5, "crossover": {"estimate": 20, "low": low, "high": high},
            "curve": curve}  # fmt: skip


def test_rows_match_by_name_and_k_and_a_search_starts_in_the_predicted_interval(tmp_path: Path):
    path = prediction(tmp_path, [row("ngram-k4", 4, 14, 26), row("ngram-k4", 2, 1, 2), row("ngram-k2", 2, 30, 40)])
    seeded = with_prediction(plan("{search: {kind: concurrency, low: 1, high: 64, tolerance: 4}}"), path)
    rows = seeded.setup.predicted["candidates"]
    assert set(rows) == {"ngram-k4", "ngram-k2"} and rows["ngram-k4"]["k"] == 4
    assert rows["ngram-k4"]["curve"][0] == [1, 2.0, 1.8, 2.2]
    assert seeded.setup.search["seeded"] == [14, 40]  # the widest of the matched candidates' intervals
    fixed = with_prediction(plan("{low: {concurrency: 1}, operating: {concurrency: 8}}"), path)
    assert fixed.setup.search is None and fixed.setup.predicted["file"] == str(path)


def test_a_file_that_is_not_a_prediction_or_predicts_none_of_the_candidates_is_refused(tmp_path: Path):
    fixed = plan("{low: {concurrency: 1}, operating: {concurrency: 8}}")
    with pytest.raises(UserError, match="no such file"):
        with_prediction(fixed, tmp_path / "missing.json")
    other = tmp_path / "summary.json"
    other.write_text('{"schema": "speculab.report.summary/2"}', encoding="utf-8")
    with pytest.raises(UserError, match=r"not a speculab\.prediction/1 file"):
        with_prediction(fixed, other)
    with pytest.raises(UserError, match="predicts none of this run's candidates"):
        with_prediction(fixed, prediction(tmp_path, [row("ngram-k8", 8, 1, 2)]))
