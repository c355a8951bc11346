"""comparisons.csv (issue 40): one row per load x candidate x metric, written with summary.json and rewritten by
`speculab report`; every number the model's own, a gated load's rows carry the gate's answer."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.fakes.ab_inputs import ArmEffect, make_inputs
from tests.fakes.cli_runner import run_main

from speculab.harness.analysis.figures import COMPARED_METRICS
from speculab.harness.results.ab_dir import save_inputs
from speculab.report.comparisons import COLUMNS, COMPARISONS_CSV

METRICS = [c.name for c in COMPARED_METRICS]


def _rows(d: Path) -> list[dict[str, str]]:
    with (d / COMPARISONS_CSV).open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        return list(reader)


def _value(cell: str) -> float | None:
    """A cell as summary.json holds the same number: blank is null (no number: NaN there, written as null)."""
    return float(cell) if cell else None


def test_a_row_per_load_candidate_and_metric_with_the_summarys_numbers(tmp_path: Path, capsys):
    cands = {
        "ngram-k4": ArmEffect(tpot_factor={"c1": 0.5, "c4": 0.8, "c16": 1.2}, acceptance_length=2.5),
        "draft-k3": ArmEffect(tpot_factor={"c1": 0.7}, acceptance_length=2.0),
    }
    save_inputs(tmp_path, make_inputs(n_prompts=16, repeats=1, candidates=cands, skip=(("draft-k3", "c16"),)))
    code, _, err = run_main(capsys, "report", str(tmp_path))
    assert code == 0, err
    rows = _rows(tmp_path)
    keys = [(r["load"], r["candidate"], r["metric"]) for r in rows]
    loads = ["concurrency 1", "concurrency 4", "concurrency 16"]
    assert sorted(keys) == sorted((lv, c, m) for lv in loads for c in cands for m in METRICS)  # one each, no more
    summary = json.loads((tmp_path / "summary.json").read_text())
    for lv in summary["levels"]:
        for comp in lv["comparisons"]:
            for m in comp["metrics"]:
                row = next(r for r in rows if (r["load"], r["candidate"], r["metric"]) == (lv["label"],
                           comp["candidate"], m["metric"]))  # fmt: skip
                assert _value(row["estimate"]) == m["speedup"] and _value(row["low"]) == m["speedup_low"]
                assert _value(row["high"]) == m["speedup_high"] and float(row["margin"]) == m["margin"]
                assert int(row["n"]) == m["n_pairs"] and row["counted"] == m["unit"]
                assert row["answer"] == (m["decision"] if comp["gate"] == "ok" else comp["decision"] or comp["gate"])
    first = next(r for r in rows if (r["load"], r["candidate"], r["metric"]) == ("concurrency 1", "ngram-k4",
                 "tpot_s"))  # fmt: skip
    assert first["answer"] == "faster" and first["units"] == "speedup (baseline s / candidate s)"
    assert float(first["confidence"]) == summary["options"]["confidence"]
    missing = [r for r in rows if (r["load"], r["candidate"]) == ("concurrency 16", "draft-k3")]
    assert {r["answer"] for r in missing} == {"missing"} and {r["estimate"] for r in missing} == {""}


def test_report_rewrites_it_against_another_margin(tmp_path: Path, capsys):
    cand = {"ngram-k4": ArmEffect(tpot_factor={"c1": 1 / 1.1}, acceptance_length=2.0)}
    save_inputs(tmp_path, make_inputs(n_prompts=40, repeats=1, candidates=cand))
    assert run_main(capsys, "report", str(tmp_path))[0] == 0
    before = _rows(tmp_path)
    assert run_main(capsys, "report", str(tmp_path), "--margin", "50%")[0] == 0
    after = _rows(tmp_path)
    assert len(after) == len(before) and {r["margin"] for r in after} == {"0.5"}
    assert [r["estimate"] for r in after] == [r["estimate"] for r in before]
