"""`speculab compare` reading SGLang `bench_serving` JSONL and LLMPerf `*_individual_responses.json` files (issue 27).

The fixtures are real files SGLang 0.5.23's bench_serving and LLMPerf (commit f1d6bed) wrote against `speculab
mock-server` scripted to a known TPOT (tests/fixtures/imports/{sglang,llmperf}/README.md): the candidate is 1.5x
faster per token; baseline-again is a second run of the baseline's script (A vs A). The 1.5x-faster and A-vs-A
comparisons of every format are in test_compare_tool_files.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from tests.fakes.words import words

from fakes.cli_runner import one_line_error, run_main
from speculab.commands.compare.pairing import inputs_from_results
from speculab.harness.imports import llmperf_responses, sglang_bench
from speculab.harness.imports.registry import result_format
from speculab.harness.records import TokenCountSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
SG = FIXTURES / "sglang"
LP = FIXTURES / "llmperf"
LP_FILE = "speculab-mock_60_16_individual_responses.json"
LP_SUMMARY = "speculab-mock_60_16_summary.json"
RUNS = {
    "sglang": (SG / "baseline.jsonl", SG / "candidate.jsonl", SG / "baseline-again.jsonl"),
    "llmperf": tuple(LP / n / LP_FILE for n in ("baseline", "candidate", "baseline-again")),
}


def _copy(src: Path, to: Path, text: str | None = None) -> Path:
    """`src` (with an LLMPerf file's summary beside it) into the folder `to`, its text replaced by `text`."""
    to.mkdir(parents=True, exist_ok=True)
    (to / src.name).write_text(src.read_text() if text is None else text)
    if src.name.endswith(llmperf_responses.SUFFIX):
        shutil.copy(src.with_name(LP_SUMMARY), to / LP_SUMMARY)
    return to / src.name


def test_sglang_chunks_are_the_files_ttft_and_gaps_and_sends_are_rebuilt() -> None:
    line = json.loads(RUNS["sglang"][1].read_text())
    run = sglang_bench.read(RUNS["sglang"][1])
    assert run.level.key == "c4" and len(run.records) == 40
    for rec, ttft, gaps, n in zip(run.records, line["ttfts"], line["itls"], line["output_lens"], strict=True):
        assert rec.chunks[0].t_s - rec.sent_s == pytest.approx(ttft) and len(rec.chunks) == len(gaps) + 1
        assert rec.end_s - rec.sent_s == pytest.approx(ttft + sum(gaps)) and rec.completion_tokens == n
        assert rec.token_count_source is TokenCountSource.RESULT_FILE
    assert [r.sent_s for r in run.records[:4]] == [0.0] * 4  # the first 4 at once, each next as one ends
    assert run.records[4].sent_s == pytest.approx(min(r.end_s for r in run.records[:4]))
    assert [r.prompt_tokens for r in run.records] == line["input_lens"]


def test_llmperf_reads_ttft_e2e_and_output_tokens_only() -> None:
    raw = json.loads(RUNS["llmperf"][1].read_text())
    run = llmperf_responses.read(RUNS["llmperf"][1])
    assert run.level.key == "c1" and run.name == "candidate" and run.info["version"] == "2023-08-31"
    for rec, r in zip(run.records, raw, strict=True):
        assert rec.chunks[0].t_s - rec.sent_s == pytest.approx(r["ttft_s"]) and len(rec.chunks) == 2
        assert rec.end_s - rec.sent_s == pytest.approx(r["end_to_end_latency_s"])
        assert rec.completion_tokens == r["number_output_tokens"] and rec.prompt_tokens == r["number_input_tokens"]
    assert all(a.end_s == pytest.approx(b.sent_s) for a, b in zip(run.records, run.records[1:], strict=False))


@pytest.mark.parametrize("fmt", ["sglang", "llmperf"])
def test_runs_of_other_prompts_are_compared_unpaired(tmp_path: Path, fmt: str) -> None:
    base = RUNS[fmt][0]
    if fmt == "sglang":
        line = json.loads(base.read_text())
        line["input_lens"][5] += 1
        other = _copy(base, tmp_path / "o", json.dumps(line) + "\n")
    else:
        raw = json.loads(base.read_text())
        raw[5]["number_input_tokens"] += 1
        other = _copy(base, tmp_path / "o", json.dumps(raw))
    inputs = inputs_from_results(base, other)  # compared unpaired, saying why
    assert not inputs.setup.paired
    why = r"cannot be paired per prompt \(prompt 5: .*input tokens"
    assert any(re.search(why, n) for n in words(inputs.notes)), inputs.notes


@pytest.mark.parametrize("fmt", ["sglang", "llmperf"])
def test_a_cut_or_incomplete_file_is_one_line_and_exit_2(tmp_path: Path, capsys, fmt: str) -> None:
    base, cand, _ = RUNS[fmt]
    name = {"sglang": "an SGLang bench_serving result", "llmperf": "an LLMPerf individual_responses file"}[fmt]
    cut = _copy(base, tmp_path / "cut", base.read_text()[:3000])
    code, _, err = run_main(capsys, "compare", str(cut), str(cand), "--output", str(tmp_path / "o1"))
    line = one_line_error(err)
    assert code == 2 and str(cut) in line and f"read as {name}" in line and "not JSON" in line, line
    if fmt == "sglang":
        d = json.loads(base.read_text())
        del d["ttfts"]
        text, field = json.dumps(d) + "\n", "ttfts"
    else:
        raw = json.loads(base.read_text())
        del raw[7]["ttft_s"]
        text, field = json.dumps(raw), "[7].ttft_s"
    missing = _copy(base, tmp_path / "missing", text)
    code, _, err = run_main(capsys, "compare", str(missing), str(cand), "--output", str(tmp_path / "o2"))
    line = one_line_error(err)
    assert code == 2 and str(missing) in line and f"read as {name}" in line and f"{field}`" in line, line


def test_sglang_failed_requests_as_sglang_wrote_them() -> None:
    # errors.jsonl: the mock answered some requests with HTTP 500; SGLang keeps "Internal Server Error: <body>"
    run = sglang_bench.read(SG / "errors.jsonl")
    failed = [r for r in run.records if r.error is not None]
    assert failed and len(failed) + json.loads((SG / "errors.jsonl").read_text())["completed"] == 40
    assert all(r.error.status == 500 and not r.chunks for r in failed)
    assert "mock fault" in failed[0].error.message


def test_an_sglang_file_of_two_runs_against_one_needs_benchmark_n(tmp_path: Path, capsys) -> None:
    # two-runs.jsonl: bench_serving appended two runs, at --max-concurrency 2 then 4
    two = SG / "two-runs.jsonl"
    code, _, err = run_main(capsys, "compare", str(two), str(RUNS["sglang"][1]), "--output", str(tmp_path / "o"))
    line = one_line_error(err)
    assert code == 2 and str(two) in line and "holds 2 SGLang run(s)" in line, line
    assert "--benchmark N (0-based, 0 to 1)" in line, line
    args = ("compare", str(two), str(RUNS["sglang"][1]), "--benchmark")
    code, _, err = run_main(capsys, *args, "0", "--output", str(tmp_path / "p"))
    assert code == 2 and "different loads (concurrency 2 vs concurrency 4)" in one_line_error(err)
    code, out, err = run_main(capsys, *args, "1", "--output", str(tmp_path / "q"))
    assert code == 0 and "concurrency 4" in out, err


def test_two_sglang_files_of_several_runs_are_compared_load_by_load(tmp_path: Path, capsys) -> None:
    two = SG / "two-runs.jsonl"  # A vs A: the same file on both sides, its two loads each a comparison
    code, out, err = run_main(capsys, "compare", str(two), str(two), "--output", str(tmp_path / "o"))
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [lv["label"] for lv in summary["levels"]] == ["concurrency 2", "concurrency 4"]
    assert summary["levels"][0]["roles"] == ["low", "sweep"] and summary["levels"][1]["roles"] == ["operating", "sweep"]
    assert "TPOT equivalent at concurrency 2" in out and "TPOT equivalent at concurrency 4" in out


def test_every_tools_fixture_is_detected_as_its_own() -> None:
    # SGLang's line holds vLLM's per-request keys too (input_lens, ttfts, itls, ...): detected before vLLM's by its tag
    from speculab.harness.imports import aiperf_profile, guidellm_benchmarks, vllm_bench

    files = {
        "vllm": [FIXTURES / "vllm" / "baseline.json"],
        "guidellm": [FIXTURES / "guidellm" / "baseline.json", FIXTURES / "guidellm" / "baseline.yaml"],
        "aiperf": [FIXTURES / "aiperf" / "baseline" / "profile_export.jsonl"],
        "sglang": [*RUNS["sglang"], SG / "errors.jsonl", SG / "two-runs.jsonl"],
        "llmperf": list(RUNS["llmperf"]),
    }
    for fmt, paths in files.items():
        assert [result_format(p) for p in paths] == [fmt] * len(paths), fmt
    readers = (vllm_bench, guidellm_benchmarks, aiperf_profile, sglang_bench, llmperf_responses)
    # each reader claims its own tool's files only (issue 51: vLLM's claimed any JSON object naming `backend`,
    # GuideLLM's and SGLang's among them)
    for fmt, paths in files.items():
        assert {m.FORMAT for m in readers if m.detect(paths[0])} == {fmt}, fmt


def test_an_llmperf_run_of_four_requests_at_a_time_is_compared_unpaired(tmp_path: Path, capsys) -> None:
    # real files LLMPerf wrote at --num-concurrent-requests 4 (the 30 ms and the 20 ms mock): listed as completed
    base, cand = (LP / d / LP_FILE for d in ("baseline-c4", "candidate-c4"))
    code, _out, err = run_main(capsys, "compare", str(base), str(cand), "--output", str(tmp_path / "ab"))
    assert code == 0, err
    summary = json.loads((tmp_path / "ab" / "summary.json").read_text())
    level = summary["levels"][0]
    tp = next(m for m in level["comparisons"][0]["metrics"] if m["metric"] == "tpot_s")
    assert level["label"] == "concurrency 4" and tp["unit"] == "unpaired" and tp["samples"] == [40, 40]
    assert tp["decision"] == "faster" and tp["speedup_low"] <= 1.5 <= tp["speedup_high"], tp
    # the rebuilt closed loop holds about four requests in flight, so the load gate is open
    assert all(a["achieved_concurrency"] > 3.5 for a in level["arms"]), level["arms"]
    why = next(w for w in (x["text"] for x in summary["warnings"]) if w.startswith("unpaired:"))
    assert "--num-concurrent-requests 4 lists its requests as they completed" in why
    assert any("rebuilt as the closed loop of 4 streams" in w for w in (x["text"] for x in summary["warnings"]))
    # against a run of one request at a time: another load, refused
    one = LP / "baseline" / LP_FILE
    code, _, err = run_main(capsys, "compare", str(one), str(cand), "--output", str(tmp_path / "x"))
    assert code == 2 and "different loads (concurrency 1 vs concurrency 4)" in one_line_error(err)


def test_llmperf_responses_without_their_summaries_compare_with_load_and_throughput_not_in_the_files(
    tmp_path: Path, capsys
) -> None:
    """#51: LLMPerf's responses files alone (no *_summary.json beside them) are read: per request as ever, the load
    unknown (never assumed, so it pairs only with another unknown load), throughput absent, and the notes say both;
    one alone against a file that states its load is refused in one line naming the summary to give it."""
    alone = {}
    for d in ("baseline", "candidate"):
        (tmp_path / d).mkdir()
        alone[d] = tmp_path / d / LP_FILE
        alone[d].write_text((LP / d / LP_FILE).read_text())  # the responses only, not the summary
    out = tmp_path / "ab"
    code, _out, err = run_main(capsys, "compare", str(alone["baseline"]), str(alone["candidate"]), "--output", str(out))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    level = summary["levels"][0]
    assert (level["kind"], level["key"], level["label"]) == ("unknown", "unknown", "load not in the file")
    tp = next(m for m in level["comparisons"][0]["metrics"] if m["metric"] == "tpot_s")
    assert tp["unit"] == "unpaired" and tp["decision"] == "faster" and tp["speedup_low"] <= 1.5 <= tp["speedup_high"]
    for arm in level["arms"]:
        assert "output_tok_s" in arm["not_in_file"] and arm["achieved_concurrency"] is None, arm
    said = [w["text"] for w in summary["warnings"]]
    assert sum("the load is not in the file (LLMPerf writes it in its summary" in w for w in said) == 2, said
    assert any("LLMPerf's measured time is in its summary" in w and "no throughput" in w for w in said), said
    # against a file that states its load (concurrency 1): refused, naming the summary that states this one's
    stated = LP / "candidate" / LP_FILE
    code, _, err = run_main(capsys, "compare", str(alone["baseline"]), str(stated), "--output", str(tmp_path / "x"))
    line = one_line_error(err)
    assert code == 2 and "does not state its load" in line and "ran at concurrency 1" in line
    assert f"give it LLMPerf's {LP_SUMMARY} beside it" in line and not (tmp_path / "x").exists()
