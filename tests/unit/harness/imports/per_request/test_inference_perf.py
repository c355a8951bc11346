"""inference-perf lifecycle reports: the per-request report read stage by stage (each stage a load, its requests cut
by the stage reports' counts) and the stage reports read at the run level, on the real report directories
inference-perf 0.7.0 wrote (tests/fixtures/imports/inference-perf/README.md) and small in-test copies of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from speculab.errors import UserError
from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.imports import registry
from speculab.harness.imports.per_request import inference_perf, inference_perf_stages
from speculab.harness.imports.summaries.read import read_side
from speculab.harness.records import ErrorCategory
from speculab.harness.results.warnings import WarningKind as Kind

FIX = Path(__file__).resolve().parents[4] / "fixtures" / "imports"
IP = FIX / "inference-perf"
PER_REQUEST = inference_perf_stages.PER_REQUEST


def _one_stage(d: Path, keep: int) -> None:
    """The config.yaml in `d` as a run of its stage `keep` alone."""
    cfg = yaml.safe_load((d / "config.yaml").read_text())
    cfg["load"]["stages"] = [cfg["load"]["stages"][keep]]
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))


def _copy(tmp_path: Path, *names: str, side: str = "baseline") -> Path:
    d = tmp_path / side
    d.mkdir()
    for n in names:
        shutil.copy(IP / side / n, d / n)
    return d


def test_each_stage_is_a_load_of_its_own_requests() -> None:
    runs = inference_perf.read_all(IP / "baseline")
    assert [(r.level.key, r.level.arrival, len(r.records)) for r in runs] == [
        ("r4", "constant", 12),
        ("r8", "constant", 24),
    ]
    rec = runs[0].records[0]
    assert rec.completion_tokens == 16 and rec.prompt_tokens == 4  # the server's usage, not inference-perf's count
    assert len(rec.chunks) == 16 and rec.chunks[1].text and rec.output_text.startswith(rec.chunks[0].text)
    assert request_metrics(rec).tpot_s == pytest.approx(0.030, rel=0.1)
    assert [i.prompt for i in runs[0].items[:2]] == ["1 2 3 1", "1 2 3 2"] and runs[1].items[0].prompt == "1 2 3 1"
    assert runs[0].model == "speculab-mock" and runs[0].name == "baseline"
    (b0, _) = inference_perf.read_all(IP / "candidate")
    assert len(b0.records[0].chunks) == 8  # two tokens a chunk


def test_the_report_directory_a_stage_report_and_the_file_are_all_claimed() -> None:
    d = IP / "baseline"
    for p in (d, d / PER_REQUEST, d / "stage_1_lifecycle_metrics.json"):
        assert registry.result_format(p) == "inference-perf", p
    assert registry.result_path(d) == d
    (only,) = inference_perf.read_all(d / "stage_1_lifecycle_metrics.json")  # that stage's requests
    assert only.level.key == "r8" and len(only.records) == 24
    assert not inference_perf.detect(d / "summary_lifecycle_metrics.json") and not inference_perf.detect(
        d / "config.yaml"
    )
    others = [p for p in FIX.rglob("*.json*") if "inference-perf" not in p.parts]
    assert others and not [p for p in others if inference_perf.detect(p) or inference_perf_stages.detect(p)]


def test_without_stage_reports_the_requests_are_one_stage_only_where_the_config_says_so(tmp_path: Path) -> None:
    d = _copy(tmp_path, PER_REQUEST, "config.yaml")
    with pytest.raises(UserError, match=r"no stage_N_lifecycle_metrics\.json beside it") as e:
        inference_perf.read_all(d)
    assert "\n" not in str(e.value)
    _one_stage(d, 0)
    (run,) = inference_perf.read_all(d / PER_REQUEST)
    assert run.level.key == "r4" and len(run.records) == 36


def test_stage_counts_that_do_not_add_up_are_refused(tmp_path: Path) -> None:
    d = _copy(tmp_path, PER_REQUEST, "stage_0_lifecycle_metrics.json", "stage_1_lifecycle_metrics.json")
    entries = json.loads((d / PER_REQUEST).read_text())
    (d / PER_REQUEST).write_text(json.dumps(entries[:-1]))
    with pytest.raises(UserError, match="it holds 35 requests, its stage reports count 36"):
        inference_perf.read_all(d)


def test_a_failed_request_keeps_its_http_status(tmp_path: Path) -> None:
    d = _copy(tmp_path, PER_REQUEST, "stage_0_lifecycle_metrics.json", "stage_1_lifecycle_metrics.json")
    entries = json.loads((d / PER_REQUEST).read_text())
    entries[0]["error"] = {"error_type": "HTTP Error 503", "error_msg": '{"error": {"message": "busy"}}'}
    (d / PER_REQUEST).write_text(json.dumps(entries))
    err = inference_perf.read_all(d)[0].records[0].error
    assert err is not None and err.category is ErrorCategory.HTTP and err.status == 503 and "busy" in err.message


def test_an_earlier_layout_keeps_its_times_in_info(tmp_path: Path) -> None:
    d = _copy(tmp_path, "stage_0_lifecycle_metrics.json", "stage_1_lifecycle_metrics.json")
    early = [
        {"start_time": 10.0 + k, "end_time": 10.5 + k, "request": json.dumps({"prompt": f"p{k}"}),
         "info": {"input_tokens": 3, "output_tokens": 4,
                  "output_token_times": [10.1 + k, 10.2 + k, 10.2 + k, 10.4 + k]},
         "error": None}
        for k in range(36)
    ]  # fmt: skip
    (d / PER_REQUEST).write_text(json.dumps(early, indent=2))
    rec = inference_perf.read_all(d)[0].records[0]
    # a time per SSE message or line, not only those carrying text: the first and the last alone
    assert [round(c.t_s, 3) for c in rec.chunks] == [10.1, 10.4] and not rec.all_chunks
    assert rec.completion_tokens == 4 and rec.prompt_tokens == 3
    for e in early:  # 0.5: the response under `info.response_info`, its chunk_times the text-carrying chunks'
        times = e["info"].pop("output_token_times")
        e["info"]["response_info"] = {"chunk_times": times, "output_token_times": times, "output_tokens": 4}
        e["info"].pop("output_tokens")
    (d / PER_REQUEST).write_text(json.dumps(early, indent=2))
    rec = inference_perf.read_all(d)[0].records[0]
    assert [round(c.t_s, 3) for c in rec.chunks] == [10.1, 10.2, 10.4] and rec.all_chunks  # a time twice: one chunk
    assert rec.completion_tokens == 4


def test_stage_reports_are_the_tools_aggregates_at_each_stages_load(tmp_path: Path) -> None:
    d = _copy(tmp_path, "stage_0_lifecycle_metrics.json", "stage_1_lifecycle_metrics.json", "config.yaml")
    runs = read_side(d)
    assert runs is not None and [r.level.key for r in runs] == ["r4", "r8"] and not any(r.per_request for r in runs)
    s0 = runs[0]
    assert s0.completed == 12 and s0.failed == 0 and s0.model == "speculab-mock"
    assert 0.4 < s0.aggregates.get("e2e_median_s") < 0.55 and s0.aggregates.get("tpot_median_s") is not None
    assert s0.aggregates.get("itl_median_s") is None  # its gaps are not speculab's per-token ITL
    beside = read_side(IP / "baseline")  # the per-request report beside them: compared per request
    assert beside is not None and all(r.per_request for r in beside) and len(beside) == 2


def test_an_early_stage_report_keeps_no_tpot_and_takes_its_load_from_the_config(tmp_path: Path) -> None:
    d = _copy(tmp_path, "stage_0_lifecycle_metrics.json", "config.yaml")
    report = json.loads((d / "stage_0_lifecycle_metrics.json").read_text())
    successes = report["successes"]
    successes.pop("token_count_mismatches")
    successes["latency"]["time_to_first_token"] = {"mean": 0.02, "p50": 0.021, "p90": 0.03}  # 0.1's statistics
    (d / "stage_0_lifecycle_metrics.json").write_text(json.dumps({"load_summary": {"count": 12}} | {
        k: v for k, v in report.items() if k != "load_summary"}))  # fmt: skip
    (s,) = read_side(d) or ()
    assert s.level.key == "r4" and s.aggregates.get("tpot_median_s") is None and s.info["layout"]
    assert s.aggregates.get("ttft_median_s") == pytest.approx(0.021) and s.aggregates.get("ttft_p99_s") is None
    (d / "config.yaml").unlink()
    with pytest.raises(UserError, match=r"no `load_summary\.requested_rate` or `concurrency`"):
        read_side(d)


def test_the_run_summary_is_read_only_without_stage_reports(tmp_path: Path) -> None:
    d = _copy(tmp_path, "summary_lifecycle_metrics.json", "config.yaml")
    assert inference_perf_stages.detect(d / "summary_lifecycle_metrics.json")
    assert not inference_perf_stages.detect(IP / "baseline" / "summary_lifecycle_metrics.json")
    with pytest.raises(UserError, match="the summary of 2 stages together, at no one load"):
        read_side(d / "summary_lifecycle_metrics.json")
    _one_stage(d, 1)
    (s,) = read_side(d / "summary_lifecycle_metrics.json") or ()
    assert s.level.key == "r8" and s.completed == 36


def test_a_long_prompt_does_not_hide_the_reports_marks(tmp_path: Path) -> None:
    entry = {"start_time": 1.0, "end_time": 2.0, "request": json.dumps({"prompt": "x " * 50_000}), "info": {}}
    f = tmp_path / PER_REQUEST
    f.write_text(json.dumps([entry | {"error": None}], indent=2))
    assert inference_perf.detect(f) and inference_perf.detect(tmp_path)
    f.write_text(json.dumps([{"end_time": 2.0, "start_time": 1.0}]))  # another tool's list of the same words
    assert not inference_perf.detect(f)


def test_made_up_prompts_are_said_to_make_acceptance_not_the_users() -> None:
    run = inference_perf.read_all(IP / "baseline")[0]  # the config's data.type: mock
    kinds = [n.kind for n in run.notes if not isinstance(n, str)]
    assert Kind.ACCEPTANCE_SYNTHETIC_PROMPTS in kinds and Kind.ACCEPTANCE_IGNORE_EOS not in kinds
