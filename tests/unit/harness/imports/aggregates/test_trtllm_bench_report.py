"""trtllm-bench reports (harness.imports.aggregates.trtllm_bench) on files of its documented layout
(tests/fixtures/imports/trtllm-bench/README.md): its percentiles in seconds, its acceptance as it states it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.aggregates import trtllm_bench
from speculab.harness.imports.registry import summary_reader
from speculab.harness.imports.summaries.summary import LENGTH, PER_REQUEST_MEAN, RATE

HERE = Path(__file__).resolve().parents[4] / "fixtures" / "imports" / "trtllm-bench"


def test_a_report_is_one_run_of_its_own_figures() -> None:
    path = HERE / "eagle3.json"
    assert summary_reader(path) is trtllm_bench
    (run,) = trtllm_bench.read(path)
    raw = json.loads(path.read_text())
    assert run.version == "1.1.0" and run.model == "meta-llama/Llama-3.1-8B-Instruct" and run.completed == 512
    assert run.level.key == "c32"  # 31.8 measured, rounded: the report keeps no asked load
    assert run.info["measured_load"] == "request_info.avg_num_concurrent_requests"
    tpot = raw["streaming_metrics"]["tpot_percentiles"]
    assert run.aggregates.get("tpot_median_s") == pytest.approx(tpot["p50"] / 1e3)
    assert run.aggregates.get("e2e_p99_s") == pytest.approx(2.55)
    assert run.aggregates.get("output_tok_s") == 8310.2 and run.aggregates.get("request_rps") == 16.23
    assert run.aggregates.get("itl_median_s") is None  # not a figure trtllm-bench reports
    assert [(a.kind, a.value, a.weighting) for a in run.acceptance] == [
        (LENGTH, 2.83, PER_REQUEST_MEAN),
        (RATE, 0.687, PER_REQUEST_MEAN),
    ]
    assert run.acceptance[0].source == "decoding_stats.acceptance_length_percentiles.average"


def test_a_report_without_speculation_states_no_acceptance() -> None:
    (run,) = trtllm_bench.read(HERE / "baseline.json")
    assert run.acceptance == () and run.aggregates.get("tpot_median_s") == pytest.approx(0.0079)


def test_a_report_s_setup_is_its_row_so_a_directory_of_setups_is_split_not_pooled(tmp_path: Path) -> None:
    (base,) = trtllm_bench.read(HERE / "baseline.json")
    (spec,) = trtllm_bench.read(HERE / "eagle3.json")
    assert base.row is not None and spec.row is not None
    assert (base.row.fields["mode"], spec.row.fields["mode"]) == ("none", "Eagle")
    assert base.row.fields["tp_size"] == "1" and base.row.fields["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_report_without_streaming_has_no_ttft_or_tpot(tmp_path: Path) -> None:
    d = json.loads((HERE / "baseline.json").read_text())
    del d["streaming_metrics"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    (run,) = trtllm_bench.read(path)
    assert run.aggregates.get("ttft_median_s") is None and run.aggregates.get("e2e_median_s") == pytest.approx(4.08)


def test_a_report_without_request_info_is_one_line(tmp_path: Path) -> None:
    d = json.loads((HERE / "baseline.json").read_text())
    del d["request_info"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=r"read as a trtllm-bench report \(--report_json\): no `request_info`"):
        trtllm_bench.read(path)


def test_an_early_2025_report_s_acceptance_percentiles_are_a_length(tmp_path: Path) -> None:
    """Before acceptance_length_percentiles, trtllm-bench wrote `acceptance_percentiles`: each request's generated
    tokens per decoding iteration (its console called it a rate; it is a length)."""
    d = json.loads((HERE / "eagle3.json").read_text())
    d["decoding_stats"] = {"mode": "Eagle", "acceptance_percentiles": {"p50": 2.1, "p99": 2.9, "average": 2.2}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    (run,) = trtllm_bench.read(path)
    assert [(a.kind, a.value, a.source) for a in run.acceptance] == [
        (LENGTH, 2.2, "decoding_stats.acceptance_percentiles.average")
    ]
