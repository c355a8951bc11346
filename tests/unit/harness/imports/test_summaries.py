"""Summary-only files read as their tools' own figures (harness.imports.summaries): what each reader takes from the
keys its tool writes, what it leaves absent, and how a side's runs are numbered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.summaries.read import read_side

VLLM_KEYS = {
    "date": "20261203-083618",
    "backend": "openai",
    "model_id": "m",
    "num_prompts": 20,
    "vllm_version": "0.32.0",
    "request_rate": "inf",
    "burstiness": 1.0,
    "max_concurrency": 4,
    "duration": 2.4,
    "completed": 18,
    "request_throughput": 7.5,
    "output_throughput": 120.0,
    "median_ttft_ms": 25.0,
    "p99_ttft_ms": 50.0,
    "median_tpot_ms": 30.0,
    "p99_tpot_ms": 31.0,
    "median_itl_ms": 29.0,
    "p99_itl_ms": 40.0,
}


def _write(path: Path, d: object) -> Path:
    path.write_text(json.dumps(d), encoding="utf-8")
    return path


def test_a_vllm_summary_is_read_in_seconds_and_what_it_lacks_stays_absent(tmp_path: Path) -> None:
    (run,) = read_side(_write(tmp_path / "a.json", VLLM_KEYS)) or ()
    agg = run.aggregates
    assert agg.get("ttft_median_s") == pytest.approx(0.025) and agg.get("tpot_p99_s") == pytest.approx(0.031)
    assert agg.get("output_tok_s") == 120.0 and agg.get("request_rps") == 7.5
    assert agg.get("e2e_median_s") is None and agg.get("e2e_p99_s") is None  # --percentile-metrics left e2el out
    assert run.level.key == "c4" and run.version == "0.32.0" and run.model == "m"
    assert run.completed == 18 and run.failed == 2  # no `failed`: num_prompts - completed
    assert not run.per_request


def test_a_vllm_file_with_requests_says_so(tmp_path: Path) -> None:
    detailed = VLLM_KEYS | {"failed": 0, "ttfts": [0.02]}  # benchmark_serving.py up to 0.6: no start_times
    (run,) = read_side(_write(tmp_path / "a.json", detailed)) or ()
    assert run.per_request and run.failed == 0


def test_sglang_lines_at_one_load_are_its_runs_and_a_rate_is_a_load(tmp_path: Path) -> None:
    line = {
        "tag": None,
        "backend": "sglang-oai",
        "dataset_name": "custom",
        "request_rate": float("inf"),
        "max_concurrency": 4,
        "completed": 20,
        "output_throughput": 130.0,
        "request_throughput": 8.0,
        "median_e2e_latency_ms": 470.0,
        "p99_e2e_latency_ms": 480.0,
        "median_ttft_ms": 24.0,
    }
    text = "\n".join(json.dumps(x) for x in (line, line, line | {"request_rate": 4.0, "max_concurrency": None}))
    (tmp_path / "s.jsonl").write_text(text + "\n", encoding="utf-8")  # inf as Python writes it: Infinity
    runs = read_side(tmp_path / "s.jsonl") or ()
    assert [(r.level.key, r.run) for r in runs] == [("c4", 1), ("c4", 2), ("r4", 1)]
    assert runs[0].aggregates.get("e2e_median_s") == pytest.approx(0.47)
    assert runs[0].failed is None  # SGLang counts none
    assert runs[0].aggregates.get("tpot_median_s") is None


def _guidellm(requests: list) -> dict:
    def dist(median: float, p99: float) -> dict:
        return {"successful": {"median": median, "mean": median, "percentiles": {"p99": p99}}}

    return {
        "metadata": {"guidellm_version": "0.8.1"},
        "benchmarks": [
            {
                "config": {"strategy": {"type_": "concurrent", "streams": 4}},
                "metrics": {
                    "request_totals": {"successful": 38, "errored": 1, "incomplete": 1, "total": 40},
                    "time_to_first_token_ms": dist(24.0, 52.0),
                    "time_per_output_token_ms": dist(30.0, 31.0),
                    "inter_token_latency_ms": dist(30.0, 31.0),
                    "request_latency": dist(0.47, 0.5),
                    "output_tokens_per_second": dist(130.0, 300.0),
                    "requests_per_second": dist(8.0, 9.0),
                },
                "requests": {"successful": requests, "errored": [], "incomplete": []},
            }
        ],
    }


def test_a_guidellm_file_with_empty_request_lists_is_a_summary(tmp_path: Path) -> None:
    (run,) = read_side(_write(tmp_path / "g.json", _guidellm([]))) or ()
    assert not run.per_request and run.level.key == "c4" and run.version == "0.8.1"
    assert run.aggregates.get("e2e_median_s") == pytest.approx(0.47)  # GuideLLM's request_latency is in seconds
    assert run.aggregates.get("ttft_p99_s") == pytest.approx(0.052) and run.aggregates.get("output_tok_s") == 130.0
    assert (run.completed, run.failed) == (38, 2)
    (full,) = read_side(_write(tmp_path / "h.json", _guidellm([{"request_start_time": 1.0}]))) or ()
    assert full.per_request


def test_a_directory_of_several_files_is_a_side_of_runs(tmp_path: Path) -> None:
    side = tmp_path / "plain"
    side.mkdir()
    for i in (1, 2, 3):
        _write(side / f"r{i}.json", VLLM_KEYS | {"median_tpot_ms": 30.0 + i})
    runs = read_side(side) or ()
    assert [r.run for r in runs] == [1, 2, 3] and {r.name for r in runs} == {"plain"}
    assert [r.aggregates.get("tpot_median_s") for r in runs] == pytest.approx([0.031, 0.032, 0.033])


def test_a_sweep_directory_numbers_its_runs(tmp_path: Path) -> None:
    combo = tmp_path / "exp" / "SERVE--plain-BENCH--c4"
    combo.mkdir(parents=True)
    for n in (0, 1, 2):
        _write(combo / f"run={n}.json", VLLM_KEYS)
    _write(combo / "run=3.failure.json", {"error": "x"})
    runs = read_side(tmp_path / "exp") or ()
    assert [r.run for r in runs] == [1, 2, 3] and runs[0].tool == "vllm bench sweep serve"


def test_a_side_of_two_tools_is_refused_and_an_unknown_file_is_none(tmp_path: Path) -> None:
    side = tmp_path / "mixed"
    side.mkdir()
    _write(side / "a.json", VLLM_KEYS)
    _write(side / "g.json", _guidellm([]))
    with pytest.raises(UserError, match="files of 2 tools"):
        read_side(side)
    assert read_side(_write(tmp_path / "other.json", {"hello": 1})) is None


def test_a_detailed_file_missing_a_list_is_not_a_summary(tmp_path: Path) -> None:
    # its other per-request lists say it was written with them: its reader names what it lacks, no run-level fallback
    broken = VLLM_KEYS | {"itls": [[0.03]], "input_lens": [22], "errors": [""]}
    (run,) = read_side(_write(tmp_path / "a.json", broken)) or ()
    assert run.per_request
    only_latencies = VLLM_KEYS | {"latencies": [0.5], "queue_times": [0.0]}  # vLLM 0.32 without --save-detailed
    (run,) = read_side(_write(tmp_path / "b.json", only_latencies)) or ()
    assert not run.per_request


def test_a_file_keeping_token_counts_but_no_timings_is_read_at_the_run_level(tmp_path: Path) -> None:
    """Issue 51: `input_lens`/`output_lens` and the aggregates but no `ttfts` were told to use --save-detailed while a
    plainer summary of the same tool was read: such a file is a summary, its layout named."""
    lens = VLLM_KEYS | {"input_lens": [22, 30], "output_lens": [16, 16], "errors": ["", ""]}
    (run,) = read_side(_write(tmp_path / "a.json", lens)) or ()
    assert not run.per_request and run.info["layout"].startswith("per-request token counts")
    assert run.aggregates.get("tpot_median_s") == pytest.approx(0.030)


def test_the_acceptance_vllm_and_sglang_summaries_state_is_the_arm_s_as_stated(tmp_path: Path) -> None:
    """#51 item 5: vLLM's `spec_decode_*` (its rate in %) and SGLang's `accept_length`, pooled as the tools define
    them; a file without speculation (SGLang's `null`) states none."""
    spec = VLLM_KEYS | {"spec_decode_acceptance_length": 2.5, "spec_decode_acceptance_rate": 37.5}
    (run,) = read_side(_write(tmp_path / "a.json", spec)) or ()
    assert [(a.kind, a.value, a.weighting, a.source) for a in run.acceptance] == [
        ("length", 2.5, "pooled", "spec_decode_acceptance_length"),
        ("rate", pytest.approx(0.375), "pooled", "spec_decode_acceptance_rate"),
    ]
    (plain,) = read_side(_write(tmp_path / "b.json", VLLM_KEYS)) or ()
    assert plain.acceptance == ()
    line = {"tag": None, "backend": "sglang", "request_rate": "inf", "max_concurrency": 4, "completed": 20}
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line | {"accept_length": v}) + "\n" for v in (3.1, None)))
    with_spec, without = read_side(path) or ()
    assert [(a.kind, a.value, a.source) for a in with_spec.acceptance] == [("length", 3.1, "accept_length")]
    assert without.acceptance == ()
