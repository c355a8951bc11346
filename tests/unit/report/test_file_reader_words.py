"""The notes the readers of other tools' result files (harness.imports) gave when they were sentences made below the
report (fixtures/file_reader_words.json, saved from the code before #48 item 3 reached them) are the words their
records give now, made by `report.phrases.warning_text`; and each such note is a record of its kind, not words."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fakes.words import words
from speculab.harness.imports import (
    aiperf_profile,
    guidellm_benchmarks,
    llmperf_responses,
    sglang_bench,
    vllm_bench,
    vllm_sweep,
)
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
SAID_BEFORE_FILE = Path(__file__).parent / "fixtures" / "file_reader_words.json"


def _json_with(tmp: Path, src: Path, name: str, change: Callable[[dict], object]) -> Path:
    """A copy of the JSON file `src` named `name` in `tmp`, changed by `change` (which edits the dict in place)."""
    d = json.loads(src.read_text(encoding="utf-8"))
    change(d)
    out = tmp / name
    out.write_text(json.dumps(d), encoding="utf-8")
    return out


def _sglang_with(tmp: Path, change: Callable[[dict], object]) -> Path:
    first = (FIXTURES / "sglang" / "baseline.jsonl").read_text(encoding="utf-8").splitlines()[0]
    d = json.loads(first)
    change(d)
    out = tmp / "run.jsonl"
    out.write_text(json.dumps(d) + "\n", encoding="utf-8")
    return out


def _llmperf_with(tmp: Path, change: Callable[[dict], object]) -> Path:
    run = tmp / "run"
    shutil.copytree(FIXTURES / "llmperf" / "baseline-c4", run)
    summary = next(run.glob("*_summary.json"))
    d = json.loads(summary.read_text(encoding="utf-8"))
    change(d)
    summary.write_text(json.dumps(d), encoding="utf-8")
    return next(run.glob("*_individual_responses.json"))


def _aiperf_early(tmp: Path) -> Path:
    run = tmp / "early"
    run.mkdir()
    shutil.copy(FIXTURES / "aiperf" / "baseline" / "profile_export_aiperf.json", run)
    rows = [json.loads(x) for x in (FIXTURES / "aiperf" / "baseline" / "profile_export.jsonl").read_text().splitlines()]
    for r in rows:
        r["metadata"]["timestamp_ns"] = r["metadata"].pop("request_start_ns")
        r["metadata"]["credit_phase"] = r["metadata"].pop("benchmark_phase")
    (run / "profile_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run / "profile_export.jsonl"


def _aiperf_unversioned(tmp: Path) -> Path:
    run = tmp / "unversioned"
    run.mkdir()
    shutil.copy(FIXTURES / "aiperf" / "baseline" / "profile_export.jsonl", run)
    _json_with(
        run,
        FIXTURES / "aiperf" / "baseline" / "profile_export_aiperf.json",
        "profile_export_aiperf.json",
        lambda d: d.pop("aiperf_version"),
    )
    return run / "profile_export.jsonl"


def _sweep_with_a_failure(tmp: Path) -> Path:
    shutil.copytree(FIXTURES / "vllm-sweep" / "sweep" / "SERVE--spec-BENCH--c4", tmp / "SERVE--spec-BENCH--c4")
    (tmp / "SERVE--spec-BENCH--c4" / "run=1.failure.json").write_text("{}", encoding="utf-8")
    return tmp / "SERVE--spec-BENCH--c4"


def _sweep_unversioned(tmp: Path) -> Path:
    combo = tmp / "SERVE--spec-BENCH--c1"
    shutil.copytree(FIXTURES / "vllm-sweep" / "sweep" / combo.name, combo)
    for f in combo.glob("run=*.json"):
        _json_with(combo, f, f.name, lambda d: d.pop("vllm_version"))
    return combo


VLLM, OLD_VLLM = FIXTURES / "vllm" / "baseline.json", FIXTURES / "summaries" / "vllm-0.6.3" / "baseline.json"
GUIDELLM = FIXTURES / "guidellm" / "baseline.json"


def _throughput(d: dict) -> None:
    d["benchmarks"][0]["config"]["strategy"] = {"type_": "throughput", "max_concurrency": 16}


# each case: the runs one reader reads from a file made as named (tmp: a folder of the test's own)
CASES: dict[str, Callable[[Path], tuple[ImportedRun, ...]]] = {
    "vllm": lambda tmp: vllm_bench.read_all(VLLM),
    "vllm_no_version": lambda tmp: vllm_bench.read_all(
        _json_with(tmp, VLLM, "b.json", lambda d: d.pop("vllm_version"))
    ),
    "vllm_all_at_once": lambda tmp: vllm_bench.read_all(
        _json_with(tmp, VLLM, "b.json", lambda d: d.update(max_concurrency=None))
    ),
    "vllm_no_latencies": lambda tmp: vllm_bench.read_all(_json_with(tmp, VLLM, "b.json", lambda d: d.pop("latencies"))),
    "vllm_no_sends": lambda tmp: vllm_bench.read_all(
        _json_with(tmp, VLLM, "b.json", lambda d: [d.pop("latencies"), d.pop("start_times")])
    ),
    "vllm_unsaid": lambda tmp: vllm_bench.read_all(
        _json_with(tmp, VLLM, "b.json", lambda d: [d.pop(k) for k in ("date", "backend", "model_id")])
    ),
    "vllm_0.6.3": lambda tmp: vllm_bench.read_all(OLD_VLLM),
    "vllm_sweep": lambda tmp: vllm_sweep.read_all(FIXTURES / "vllm-sweep" / "sweep" / "SERVE--spec"),
    "vllm_sweep_failed": lambda tmp: vllm_sweep.read_all(_sweep_with_a_failure(tmp)),
    "vllm_sweep_no_version": lambda tmp: vllm_sweep.read_all(_sweep_unversioned(tmp)),
    "sglang_unsaid": lambda tmp: sglang_bench.read_all(
        _sglang_with(tmp, lambda d: [d.pop(k) for k in ("backend", "dataset_name", "tag")])
    ),
    "sglang": lambda tmp: sglang_bench.read_all(FIXTURES / "sglang" / "two-runs.jsonl"),
    "sglang_no_duration": lambda tmp: sglang_bench.read_all(_sglang_with(tmp, lambda d: d.pop("duration"))),
    "sglang_all_at_once": lambda tmp: sglang_bench.read_all(
        _sglang_with(tmp, lambda d: d.update(max_concurrency=None, tag="t"))
    ),
    "guidellm": lambda tmp: guidellm_benchmarks.read_all(GUIDELLM),
    "guidellm_sweep": lambda tmp: guidellm_benchmarks.read_all(FIXTURES / "guidellm" / "sweep-baseline.json"),
    "guidellm_0.3": lambda tmp: guidellm_benchmarks.read_all(FIXTURES / "guidellm-0.3" / "baseline.json"),
    "guidellm_no_version": lambda tmp: guidellm_benchmarks.read_all(
        _json_with(tmp, GUIDELLM, "b.json", lambda d: d["metadata"].pop("guidellm_version"))
    ),
    "guidellm_throughput": lambda tmp: guidellm_benchmarks.read_all(_json_with(tmp, GUIDELLM, "b.json", _throughput)),
    "aiperf": lambda tmp: aiperf_profile.read_all(FIXTURES / "aiperf" / "baseline" / "profile_export.jsonl"),
    "aiperf_no_version": lambda tmp: aiperf_profile.read_all(_aiperf_unversioned(tmp)),
    "aiperf_early": lambda tmp: aiperf_profile.read_all(_aiperf_early(tmp)),
    "llmperf": lambda tmp: llmperf_responses.read_all(
        next((FIXTURES / "llmperf" / "baseline").glob("*_individual_responses.json"))
    ),
    "llmperf_c4": lambda tmp: llmperf_responses.read_all(
        next((FIXTURES / "llmperf" / "baseline-c4").glob("*_individual_responses.json"))
    ),
    "llmperf_no_rate": lambda tmp: llmperf_responses.read_all(
        _llmperf_with(
            tmp,
            lambda d: [
                d.pop(k, None)
                for k in ("results_num_completed_requests_per_min", "results_mean_output_throughput_token_per_s")
            ],
        )
    ),
    "llmperf_unnamed": lambda tmp: llmperf_responses.read_all(
        _llmperf_with(tmp, lambda d: [d.pop("version", None), d.pop("model", None), d.pop("llmperf_commit", None)])
    ),
}


def said(case: str, tmp: Path) -> list[list[str]]:
    """Each run's notes, as a person reads them."""
    return [words(r.notes) for r in CASES[case](tmp)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_reader_says_what_it_said_before(case: str, tmp_path: Path) -> None:
    before = json.loads(SAID_BEFORE_FILE.read_text(encoding="utf-8"))
    assert said(case, tmp_path) == before[case]


# the kinds each case's runs note, in order (every run of a case notes the same)
KINDS = {
    "vllm": [Kind.FILE_READ],
    "vllm_0.6.3": [Kind.FILE_READ, Kind.FILE_ALL_AT_ONCE, Kind.FILE_SENDS_FROM_LOAD, Kind.FILE_E2E_FROM_CHUNKS],
    "vllm_sweep_failed": [Kind.FILE_READ, Kind.FILE_RUNS_FAILED],
    "sglang_all_at_once": [Kind.FILE_READ, Kind.FILE_THROUGHPUT_WINDOW, Kind.FILE_ALL_AT_ONCE],
    "sglang_no_duration": [Kind.FILE_READ, Kind.FILE_NO_THROUGHPUT],
    "guidellm_throughput": [Kind.FILE_READ, Kind.FILE_THROUGHPUT_PROFILE],
    "aiperf_early": [Kind.FILE_READ, Kind.FILE_EARLY_LAYOUT],
    "llmperf_c4": [Kind.FILE_READ, Kind.FILE_SENDS_CLOSED_LOOP, Kind.FILE_THROUGHPUT_WINDOW],
    "llmperf_no_rate": [Kind.FILE_READ, Kind.FILE_SENDS_CLOSED_LOOP, Kind.FILE_NO_THROUGHPUT],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_note_is_a_record_of_its_kind_not_words(case: str, tmp_path: Path) -> None:
    """What a reader found is kept as its numbers and names (#48 item 3): no note of a reader is words."""
    for run in CASES[case](tmp_path):
        assert all(isinstance(n, ReportWarning) and n.kind is not Kind.NOTE for n in run.notes), run.notes
        if case in KINDS:
            assert [n.kind for n in run.notes] == KINDS[case]


def test_a_record_keeps_what_the_file_states_and_survives_a_saved_file(tmp_path: Path) -> None:
    (read,) = CASES["vllm"](tmp_path)[0].notes
    assert read.fields == {
        "file": "baseline.json",
        "tool": "vllm",
        "what": "a vLLM bench serve result",
        "named": "vLLM",
        "version": "0.32.0",
        "unstated": "vLLM version not stated in the file",
        "said": [["date", "20261203-083618"], ["backend", "openai"], ["model_id", "speculab-mock"]],
    }
    saved = json.loads(json.dumps(read.to_dict()))  # as an A/B's summary.json and run.json keep it
    assert ReportWarning.from_dict(saved) == read and words([saved]) == words([read])
