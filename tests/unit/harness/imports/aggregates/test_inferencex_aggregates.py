"""InferenceX aggregates (harness.imports.aggregates.inferencex) on files its own process_result.py and
collect_results.py wrote (tests/fixtures/imports/inferencex/README.md): each layout claimed by its marks and read
as the vLLM result it was made from states it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.aggregates import inferencex
from speculab.harness.imports.registry import summary_reader

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures" / "imports"
HERE = FIXTURES / "inferencex"
VLLM = FIXTURES / "summaries" / "vllm"


@pytest.mark.parametrize(
    ("folder", "layout"),
    [
        ("single-node", inferencex.SINGLE_NODE),
        ("multi-node", inferencex.MULTI_NODE),
        ("inferencemax-2025", inferencex.FIRST),
    ],
)
def test_each_layout_is_read_as_the_vllm_result_it_was_made_from(folder: str, layout: str) -> None:
    path = HERE / folder / "agg_candidate.json"
    assert summary_reader(path) is inferencex  # claimed before vLLM's reader, by its own marks
    (run,) = inferencex.read(path)
    made_from = json.loads((VLLM / "candidate" / "r1.json").read_text())
    assert run.info["layout"] == layout and run.tool == "InferenceX"
    assert run.level.key == "c4" and run.model == made_from["model_id"]
    assert run.aggregates.get("tpot_median_s") == pytest.approx(made_from["median_tpot_ms"] / 1e3)
    assert run.aggregates.get("itl_p99_s") == pytest.approx(made_from["p99_itl_ms"] / 1e3)
    # output tok/s per GPU times the GPUs process_result.py divided by: the bench's own output throughput
    assert run.aggregates.get("output_tok_s") == pytest.approx(made_from["output_throughput"])
    # what InferenceX does not keep stays absent, never filled in
    assert run.aggregates.get("request_rps") is None and run.completed is None and run.failed is None
    assert run.acceptance == ()
    # a lone aggregate is its file's row 1: a directory of them is split by their fields, never one arm's repeats
    assert run.row is not None and run.row.index == 1 and run.row.fields["conc"] == "4"


def test_a_collection_is_one_row_per_aggregate_with_its_load_apart_from_its_configuration() -> None:
    runs = inferencex.read(HERE / "collected" / "agg_demo.json")
    assert [r.row.index for r in runs if r.row] == [1, 2, 3]
    by = {(r.row.fields["spec_decoding"], r.level.key): r for r in runs if r.row}
    assert set(by) == {("none", "c4"), ("mtp", "c4"), ("none", "c1")}
    row = by[("none", "c4")].row
    assert row is not None and row.fields["conc"] == "4" and "conc" not in row.config  # the load: not a config
    assert dict(row.configuration)["tp"] == "1"
    # the MTP row's own figures are faster per token than the baseline's at the same load
    assert by[("mtp", "c4")].aggregates.get("tpot_median_s") < by[("none", "c4")].aggregates.get("tpot_median_s")


def test_a_vllm_result_and_a_plain_list_are_not_inferencex(tmp_path: Path) -> None:
    assert not inferencex.detect(VLLM / "baseline" / "r1.json")
    other = tmp_path / "x.json"
    other.write_text(json.dumps([{"hw": "h100", "conc": 4}]))
    assert not inferencex.detect(other)


def test_a_row_without_a_concurrency_is_one_line_naming_it(tmp_path: Path) -> None:
    d = json.loads((HERE / "single-node" / "agg_baseline.json").read_text())
    bad = tmp_path / "agg.json"
    bad.write_text(json.dumps([d, d | {"conc": 0}]))
    with pytest.raises(UserError, match=r"read as an InferenceX aggregate .*`\[1\]\.conc` is 0"):
        inferencex.read(bad)
