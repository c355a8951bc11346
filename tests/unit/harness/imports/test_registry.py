"""The registry: every reader has the same face, and a path's format is detected in one order (directories first)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.registry import (
    FORMATS,
    READERS,
    SUMMARY_READERS,
    TABLE,
    read_runs,
    result_format,
    result_path,
    summary_members,
    summary_reader,
)

FIXTURES = Path(__file__).parents[3] / "fixtures" / "imports"


def test_every_reader_has_the_face_and_the_format_names_users_were_promised() -> None:
    assert FORMATS[:7] == ("speculab", "vllm", "vllm-sweep", "guidellm", "aiperf", "sglang", "llmperf")
    assert {"inference-perf", "genai-perf"} <= set(FORMATS[7:])
    for name, reader in READERS.items():
        assert name == reader.FORMAT and reader.TOOL and reader.NAME
        assert callable(reader.detect) and callable(reader.read_all)


def test_one_entry_per_format_finds_both_its_readers() -> None:
    """One registry: a format's summary reader (its files without requests) is found from the same entry as its
    per-request reader, is of the same tool, and is asked in the same order as the file readers."""
    by_name = {f.name: f for f in TABLE}
    assert tuple(by_name) == FORMATS
    with_summaries = {n for n, f in by_name.items() if f.summaries is not None}
    assert {"vllm", "vllm-sweep", "guidellm", "sglang", "llmperf", "inference-perf"} <= with_summaries
    for n in with_summaries - {"vllm-sweep"}:  # a sweep's run files are vLLM bench serve results
        assert by_name[n].summaries.TOOL == by_name[n].reader.TOOL
    # the suites' aggregate readers (no per-request reader) first: a draftbench file names a `backend` as vLLM's does
    aggregates = ["InferenceX", "draftbench", "SpecForge bench_model_speedup", "trtllm-bench"]
    in_order = ("guidellm", "sglang", "llmperf", "inference-perf", "vllm")
    assert [r.TOOL for r in SUMMARY_READERS] == aggregates + [READERS[n].TOOL for n in in_order]
    summaries = FIXTURES / "summaries"
    assert summary_reader(summaries / "vllm" / "baseline" / "r1.json") is by_name["vllm"].summaries
    assert summary_reader(summaries / "sglang" / "baseline.jsonl") is by_name["sglang"].summaries
    assert summary_reader(FIXTURES / "aiperf" / "baseline" / "profile_export.jsonl") is None  # AIPerf: per request


def test_a_sweeps_run_files_are_found_by_its_entry_alone(tmp_path: Path) -> None:
    """The sweep's layout is known by its reader (vllm_sweep) alone: the summary side asks the registry for the run
    files a combination, an experiment or a `SERVE--` prefix names, in run order."""
    sweep = FIXTURES / "summaries" / "sweep"
    reader, files = summary_members(sweep / "SERVE--plain") or (None, [])
    assert [f"{f.parent.name}/{f.name}" for f in files] == [f"SERVE--plain-BENCH--c4/run={n}.json" for n in range(3)]
    assert reader is not None and reader.TOOL == READERS["vllm"].TOOL
    assert summary_members(sweep / "SERVE--plain-BENCH--c4") == (reader, files)
    assert summary_members(tmp_path) is None and summary_members(tmp_path / "SERVE--nothing") is None


def test_detection_asks_the_directories_readers_first(tmp_path: Path) -> None:
    assert result_format(FIXTURES / "vllm-sweep" / "sweep" / "SERVE--spec") == "vllm-sweep"  # a prefix, no directory
    assert result_format(tmp_path) == "speculab"
    assert result_format(FIXTURES / "vllm" / "baseline.json") == "vllm"
    assert result_format(FIXTURES / "guidellm" / "baseline.json") == "guidellm"
    with pytest.raises(UserError, match=r"no such file or directory; give a `speculab bench` output directory"):
        result_format(tmp_path / "nope.json")


def test_a_file_of_several_runs_reads_all_or_the_one_picked() -> None:
    sweep = FIXTURES / "guidellm" / "sweep-baseline.json"
    runs = read_runs(sweep, "guidellm")
    assert len(runs) > 1
    assert read_runs(sweep, "guidellm", 1)[0].level == runs[1].level
    assert len(read_runs(FIXTURES / "vllm" / "baseline.json", "vllm", 1)) == 1  # one run: nothing to pick


def test_a_tools_output_directory_stands_for_the_one_result_in_it(tmp_path: Path) -> None:
    """Issue 37: AIPerf's artifact directory and LLMPerf's results directory (what users have in hand) were refused
    with "no manifest.json"."""
    aiperf = FIXTURES / "aiperf" / "baseline"
    assert result_path(aiperf) == aiperf / "profile_export.jsonl"  # its sibling summary is no result of its own
    llmperf = FIXTURES / "llmperf" / "baseline-c4"
    assert result_path(llmperf).name.endswith("_individual_responses.json")  # not its *_summary.json
    out = tmp_path / "guidellm-out"  # GuideLLM's output folder: the JSON beside its CSV, HTML and notes
    out.mkdir()
    shutil.copy(FIXTURES / "guidellm" / "baseline.json", out / "benchmarks.json")
    (out / "benchmarks.csv").write_text("guidellm_version,x\n")
    (out / "README.md").write_text("written by guidellm_version 0.4\n")
    assert result_path(out) == out / "benchmarks.json"
    shutil.copytree(aiperf, tmp_path / "artifacts" / "run-c4")  # one directory down: AIPerf's artifacts/<run>/
    assert result_path(tmp_path / "artifacts") == tmp_path / "artifacts" / "run-c4" / "profile_export.jsonl"
    assert result_path(out / "benchmarks.json") == out / "benchmarks.json"  # a file is itself


def test_a_directory_of_several_results_lists_them_and_one_of_none_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        result_path(FIXTURES / "vllm")
    msg = str(e.value)
    assert "holds 3 results (baseline-again.json (vllm), baseline.json (vllm), candidate.json (vllm)): give one" in msg
    with pytest.raises(UserError, match=r"no result speculab reads in it .*; give a `speculab bench` output directory"):
        result_path(tmp_path)
    # the directories speculab reads as they are: a vLLM sweep's, a bench run's, an A/B run's (whose reader says so)
    sweep = FIXTURES / "vllm-sweep" / "sweep"
    assert result_path(sweep) == sweep
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "manifest.json").write_text("{}")
    assert result_path(tmp_path / "bench") == tmp_path / "bench" and result_format(tmp_path / "bench") == "speculab"
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "inputs.json").write_text("{}")
    assert result_path(tmp_path / "ab") == tmp_path / "ab"


def test_format_named_finds_its_file_in_a_directory(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "aiperf" / "baseline", tmp_path / "run")
    assert result_path(tmp_path / "run", "aiperf") == tmp_path / "run" / "profile_export.jsonl"
    (tmp_path / "none").mkdir()
    assert result_path(tmp_path / "none", "vllm") == tmp_path / "none"  # --format's own "a directory" line follows


def test_a_directory_of_bench_runs_or_a_sweep_below_it_names_them(tmp_path: Path) -> None:
    for run in ("plain", "ngram"):  # what a bench run's directory holds first: its manifest and its requests
        (tmp_path / "runs" / run).mkdir(parents=True)
        (tmp_path / "runs" / run / "manifest.json").write_text('{"backend": "x"}')
        (tmp_path / "runs" / run / "requests.jsonl").write_text("")
    with pytest.raises(UserError, match=r"runs holds 2 results \(ngram \(speculab\), plain \(speculab\)\): give one"):
        result_path(tmp_path / "runs")
    shutil.rmtree(tmp_path / "runs" / "ngram")
    assert result_path(tmp_path / "runs") == tmp_path / "runs" / "plain"
    shutil.copytree(FIXTURES / "vllm-sweep" / "sweep", tmp_path / "exp" / "sweep")  # the sweep one directory down
    assert result_path(tmp_path / "exp") == tmp_path / "exp" / "sweep"
