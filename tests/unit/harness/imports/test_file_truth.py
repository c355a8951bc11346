"""Only what the file holds (issue 37): a quantity a result file does not record is absent, never made up.

The real tools' files (tests/fixtures/imports, each with its README): GuideLLM and LLMPerf keep only the first and
last token's times, so chunk gaps, tokens per chunk, per-token ITL and stalls are not in them; LLMPerf and SGLang
keep no send times, so throughput is over the tool's own measured time (its summary), never over a rebuilt
schedule; and n requests started together at concurrency n are n in flight.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fakes.words import words
from speculab.commands.compare.pairing import inputs_from_results
from speculab.harness.analysis.metrics import CHUNK_QUANTITIES, aggregate, quantities_not_held
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.imports.registry import read_runs, result_format
from speculab.harness.records import RequestRecord
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.arm_level import repeat_metrics, throughput_known
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.report.html.sections import arm_rows, comparison_rows
from speculab.report.phrases import NOT_IN_FILE, warning_text
from speculab.report.summary import summary_dict


def _read(path: Path) -> tuple[ImportedRun, ...]:
    return read_runs(path, result_format(path))


FAST = ReportOptions(n_resamples=200)
F = Path(__file__).resolve().parents[3] / "fixtures" / "imports"
LLMPERF = "speculab-mock_60_16_individual_responses.json"
GL_BASE, GL_CAND = F / "guidellm" / "baseline.json", F / "guidellm" / "candidate.json"


def _report(inputs: ABRun) -> Report:
    return build_report(inputs, FAST)


@pytest.mark.parametrize(
    ("path", "held"),
    [
        (GL_BASE, False),
        (F / "llmperf" / "baseline-c4" / LLMPERF, False),
        (F / "vllm" / "baseline.json", True),
        (F / "aiperf" / "baseline" / "profile_export.jsonl", True),
        (F / "sglang" / "baseline.jsonl", True),  # an OpenAI backend: its itls are the chunks
    ],
)
def test_first_and_last_token_files_have_no_chunk_quantities(path: Path, held: bool) -> None:
    (run,) = _read(path)
    ok = [r for r in run.records if r.ok]
    assert all(r.all_chunks is held for r in ok)
    m = aggregate(run.records)
    # a 20 s "gap" between the first and last token is no gap (per-token ITL needs per-chunk counts, which no file
    # keeps: it is absent from every one of them)
    for name in CHUNK_QUANTITIES if not held else ("chunk_gap_s", "tokens_per_chunk", "stall_count", "stalled_s"):
        assert (m.distributions[name].n > 0) is held, name
    assert (m.stalled_requests is not None) is held
    # per-token ITL needs each chunk's tokens, which no file keeps
    assert quantities_not_held(run.records) == (("itl_s",) if held else CHUNK_QUANTITIES)
    if not held:  # what a first/last record would have read: one gap, and its tokens over 2 "chunks"
        made_up = aggregate(replace(r, all_chunks=True) for r in run.records)
        assert made_up.distributions["chunk_gap_s"].n == len(ok) and made_up.distributions["tokens_per_chunk"].n


def test_a_first_last_record_round_trips_and_others_keep_their_shape() -> None:
    r = RequestRecord(0, 0.0, 0.0, 1.0, all_chunks=False)
    assert RequestRecord.from_dict(json.loads(json.dumps(r.to_dict()))).all_chunks is False
    assert "all_chunks" not in RequestRecord(0, 0.0, 0.0, 1.0).to_dict()
    run = RepeatRun("a", "c4", 1, sends_rebuilt=True, duration_s=5.5)
    back = RepeatRun.from_meta(json.loads(json.dumps(run.meta_dict())))
    assert (back.sends_rebuilt, back.duration_s) == (True, 5.5)


def test_no_warning_reason_and_no_number_from_what_the_file_lacks() -> None:
    """GuideLLM A vs A streamed "512 tokens per chunk, like the baseline: it may not have speculated" (its output
    tokens over the two times it keeps); now no reason is given, and every view says the quantity is not in it."""
    inputs = inputs_from_results(GL_BASE, F / "guidellm" / "baseline-again.json")
    r = _report(inputs)
    lv = r.levels[0]
    assert all(set(CHUNK_QUANTITIES) <= set(a.not_in_file) for a in lv.arms)
    (no_acc,) = [w for w in r.warnings if w.kind is WarningKind.NO_ACCEPTANCE]
    assert no_acc.fields["tokens_per_chunk"] is None and "tokens per chunk" not in warning_text(no_acc)
    d = summary_dict(r)["levels"][0]["arms"][0]
    assert d["distributions"]["chunk_gap_s"]["mean"] is None and d["distributions"]["tokens_per_chunk"]["p50"] is None
    assert d["stalled_requests"] is None and "chunk_gap_s" in d["not_in_file"]
    row = arm_rows(r, lv)[0]
    assert [row[k] for k in ("gap", "itl", "tpc", "stalls")] == [NOT_IN_FILE] * 4
    (comp,) = comparison_rows(r, lv)
    itl = next(m for m in comp["metrics"] if m["metric"] == "ITL")
    assert itl["verdict"] == NOT_IN_FILE
    # the same records as if the file held every chunk: the reason comes back (the test can fail)
    held = inputs.with_runs([replace(x, records=tuple(replace(y, all_chunks=True) for y in x.records))
                             for x in inputs.runs])  # fmt: skip
    (w,) = [w for w in _report(held).warnings if w.kind is WarningKind.NO_ACCEPTANCE]
    assert w.fields["tokens_per_chunk"] is not None


def _tool_tok_s(path: Path) -> float:
    """The tool's own output tok/s, as its file or summary states it."""
    if path.name == LLMPERF:
        return json.loads(path.with_name(path.name.replace("individual_responses", "summary")).read_text())[
            "results_mean_output_throughput_token_per_s"
        ]
    if path.suffix == ".jsonl" and path.parent.parent.name == "sglang":
        return json.loads(path.read_text().splitlines()[0])["output_throughput"]
    if path.name == "profile_export.jsonl":
        return json.loads(path.with_name("profile_export_aiperf.json").read_text())["output_token_throughput"]["avg"]
    d = json.loads(path.read_text())
    if "benchmarks" in d:  # GuideLLM: its successful requests' output tokens over its benchmark's duration
        b = d["benchmarks"][0]
        return sum(r["output_tokens"] for r in b["requests"]["successful"]) / b["duration"]
    return d["output_throughput"]  # vLLM bench serve


@pytest.mark.parametrize(
    "pair",
    [
        ("llmperf/baseline-c4/" + LLMPERF, "llmperf/candidate-c4/" + LLMPERF),  # read +22-108 % from a rebuilt loop
        ("llmperf/baseline/" + LLMPERF, "llmperf/candidate/" + LLMPERF),
        ("sglang/baseline.jsonl", "sglang/candidate.jsonl"),
        ("guidellm/baseline.json", "guidellm/candidate.json"),
        ("vllm/baseline.json", "vllm/candidate.json"),
        ("aiperf/baseline/profile_export.jsonl", "aiperf/candidate/profile_export.jsonl"),
    ],
)
def test_throughput_is_within_ten_percent_of_the_tools_own(pair: tuple[str, str]) -> None:
    a, b = (F / p for p in pair)
    r = _report(inputs_from_results(a, b))
    lv = r.levels[0]
    for arm, path in zip(("baseline", "candidate"), (a, b), strict=True):
        got = lv.arm(arm).output_tok_s.estimate
        assert got == pytest.approx(_tool_tok_s(path), rel=0.10), arm
    ratio = _tool_tok_s(b) / _tool_tok_s(a)
    assert lv.comparisons[0].throughput_ratio.estimate == pytest.approx(ratio, rel=0.10)


def _llmperf_copy(tmp: Path, name: str, drop: tuple[str, ...]) -> Path:
    src = F / "llmperf" / "baseline-c4"
    d = tmp / name
    d.mkdir()
    s = json.loads((src / LLMPERF.replace("individual_responses", "summary")).read_text())
    (d / LLMPERF.replace("individual_responses", "summary")).write_text(
        json.dumps({k: v for k, v in s.items() if k not in drop})
    )
    (d / LLMPERF).write_text((src / LLMPERF).read_text())
    return d / LLMPERF


def test_a_rebuilt_run_without_a_stated_duration_has_no_throughput(tmp_path: Path) -> None:
    rates = ("results_num_completed_requests_per_min", "results_mean_output_throughput_token_per_s")
    a = _llmperf_copy(tmp_path, "a", rates)
    b = _llmperf_copy(tmp_path, "b", ())
    (run,) = _read(a)
    assert run.sends_rebuilt and run.duration_s is None
    r = _report(inputs_from_results(a, b))
    lv = r.levels[0]
    assert "output_tok_s" in lv.arm("baseline").not_in_file and "output_tok_s" not in lv.arm("candidate").not_in_file
    assert lv.comparisons[0].throughput_ratio is None  # no throughput comparison
    assert any("no throughput comparison" in warning_text(w) for w in r.warnings)  # said so
    assert arm_rows(r, lv)[0]["tok_s"] == NOT_IN_FILE and comparison_rows(r, lv)[0]["throughput"] == NOT_IN_FILE
    # the other pair of LLMPerf's rates gives the same duration: output tokens over output tok/s
    (only_tokens,) = _read(_llmperf_copy(tmp_path, "c", rates[:1]))
    (both,) = _read(b)
    assert only_tokens.duration_s == pytest.approx(both.duration_s, rel=1e-6)


def _started_together(src: Path, dst: Path, n: int, spread_s: float) -> Path:
    """The GuideLLM benchmark cut to its first `n` requests, their starts moved within `spread_s` of the first (a
    concurrent@n run whose n requests all started at once); every other field as GuideLLM wrote it."""
    raw: dict[str, Any] = json.loads(src.read_text())
    b = raw["benchmarks"][0]
    ok = sorted(b["requests"]["successful"], key=lambda r: r["request_start_time"])[:n]
    t0 = ok[0]["request_start_time"]
    for i, r in enumerate(ok):
        r["request_start_time"] = t0 + spread_s * i / (n - 1)
    b["requests"] = {**b["requests"], "successful": ok, "errored": [], "incomplete": []}
    raw["benchmarks"] = [b]
    dst.write_text(json.dumps(raw))
    return dst


def test_n_requests_started_together_at_concurrency_n_get_a_verdict(tmp_path: Path) -> None:
    """A GuideLLM concurrent@4 run of 4 requests started within 1.2 ms read "1.66 requests in flight of 4 requested
    (42%)", gated "load not achieved" (issue 37): its 4 requests were all in flight."""
    a = _started_together(GL_BASE, tmp_path / "a.json", 4, 0.0012)
    b = _started_together(GL_CAND, tmp_path / "b.json", 4, 0.0012)
    r = _report(inputs_from_results(a, b))
    lv = r.levels[0]
    assert lv.key == "c4"
    for arm in lv.arms:
        assert arm.achieved_concurrency == pytest.approx(4.0, abs=0.05)
        assert arm.load_fraction == pytest.approx(1.0, abs=0.02)
    comp = lv.comparisons[0]
    assert comp.gate == "ok", comp.gate_reason
    assert comp.verdict != "" and not comp.verdict.startswith("no verdict")


def test_sglang_native_lines_hold_first_and_last_only_and_duration_is_the_window(tmp_path: Path) -> None:
    line = {
        "tag": None, "backend": "sglang", "dataset_name": "custom", "request_rate": float("inf"), "max_concurrency": 2,
        "input_lens": [10, 11, 12], "output_lens": [4] * 3, "ttfts": [0.02] * 3, "itls": [[0.01, 0.01, 0.04]] * 3,
        "generated_texts": ["a b c d"] * 3, "errors": [""] * 3, "duration": 0.5,
    }  # fmt: skip
    f = tmp_path / "native.jsonl"
    f.write_text(json.dumps(line) + "\n" + json.dumps({**line, "backend": "sglang-oai", "duration": None}) + "\n")
    native, oai = _read(f)
    assert not any(r.all_chunks for r in native.records) and all(r.all_chunks for r in oai.records)
    assert native.sends_rebuilt and native.duration_s == 0.5 and oai.duration_s is None
    # 12 output tokens over SGLang's own 0.5 s, not over the rebuilt loop's 0.16 s
    run = RepeatRun("a", "c2", 1, native.records, sends_rebuilt=True, duration_s=native.duration_s)
    assert repeat_metrics(run).output_tok_s == pytest.approx(24.0)
    assert not throughput_known(replace(run, duration_s=None))
    assert any("no throughput comparison" in n for n in words(oai.notes))
