"""draftbench sweep results (harness.imports.aggregates.draftbench) on its own published file
(tests/fixtures/imports/draftbench/README.md): target × draft rows, each draft row's acceptance rate as stated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.aggregates import draftbench
from speculab.harness.imports.registry import summary_reader
from speculab.harness.imports.summaries.summary import LAST_REQUEST, RATE

HERE = Path(__file__).resolve().parents[4] / "fixtures" / "imports" / "draftbench"
FILE = HERE / "m4max-128gb_llamacpp_qwen25-14b.json"


def test_the_file_is_draftbench_s_not_vllm_s_though_it_names_a_backend() -> None:
    assert summary_reader(FILE) is draftbench


def test_every_row_is_a_run_at_concurrency_1_with_tpot_from_its_median_tps() -> None:
    raw = json.loads(FILE.read_text())["results"]
    runs = draftbench.read(FILE)
    assert len(runs) == len(raw) == 92
    base, draft = runs[23], runs[25]  # 14B Q8_0 alone, with the 0.5B Q8_0 draft
    assert base.row is not None and dict(base.row.fields) == {"target": "14B Q8_0", "draft": "none"}
    assert draft.row is not None and draft.row.fields["draft"] == "0.5B Q8_0" and draft.row.index == 26
    assert base.level.key == draft.level.key == "c1"
    assert base.aggregates.get("tpot_median_s") == pytest.approx(1 / raw[23]["median_tps"])
    assert draft.aggregates.get("tpot_median_s") < base.aggregates.get("tpot_median_s")  # the author's numbers
    assert base.model == draft.model == "Qwen2.5 14B Q8_0"
    assert base.acceptance == ()  # a baseline row states none
    (stated,) = draft.acceptance
    assert (stated.kind, stated.value, stated.weighting, stated.source) == (
        RATE,
        raw[25]["acceptance_rate"],
        LAST_REQUEST,
        "acceptance_rate",
    )


def test_an_error_row_holds_no_run_but_keeps_its_number(tmp_path: Path) -> None:
    d = json.loads(FILE.read_text())
    d["results"] = [{"target": "7B", "draft": None, "error": "server_failed"}, *d["results"][:2]]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    runs = draftbench.read(path)
    assert [r.row.index for r in runs if r.row] == [2, 3]


def test_rows_that_are_all_errors_are_one_line(tmp_path: Path) -> None:
    d = json.loads(FILE.read_text()) | {"results": [{"target": "7B", "draft": None, "error": "server_failed"}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    with pytest.raises(
        UserError,
        match=r"read as a draftbench sweep result \(sweep.py.s results JSON\): no row of `results` holds a run",
    ):
        draftbench.read(path)
