"""`speculab compare` on every other tool's real result files (issue 27): the candidate 1.5x faster per token, and A
vs A equivalent, for each of the five formats.

The fixtures are files vLLM 0.32.0, GuideLLM 0.8.1, AIPerf 0.13.0, SGLang 0.5.23's bench_serving and LLMPerf (commit
f1d6bed) wrote against `speculab mock-server` scripted to a known TPOT (tests/fixtures/imports/*/README.md): the
candidate is 1.5x faster per token; baseline-again is a second run of the baseline's script. What is particular to
one format is tested beside its others, in test_compare_{vllm,guidellm_aiperf,sglang_llmperf}_files.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.cli_runner import run_main, summary_tpot
from fakes.words import words
from speculab.commands.compare.pairing import result_format
from speculab.harness.imports import aiperf_profile, guidellm_benchmarks, llmperf_responses, sglang_bench, vllm_bench

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
_LP = "speculab-mock_60_16_individual_responses.json"
_NAMES = ("baseline", "candidate", "baseline-again")
# per format: (baseline, candidate, baseline-again), its reader, the load, what each file's note says of its version
FORMATS = {
    "vllm": (tuple(FIXTURES / "vllm" / f"{n}.json" for n in _NAMES), vllm_bench, 4, "vLLM 0.32.0"),
    "guidellm": (tuple(FIXTURES / "guidellm" / f"{n}.json" for n in _NAMES), guidellm_benchmarks, 4, "GuideLLM 0.8.1"),
    "aiperf": (
        tuple(FIXTURES / "aiperf" / n / "profile_export.jsonl" for n in _NAMES),
        aiperf_profile,
        4,
        "AIPerf 0.13.0",
    ),
    "sglang": (
        tuple(FIXTURES / "sglang" / f"{n}.jsonl" for n in _NAMES),
        sglang_bench,
        4,
        "SGLang's version is not in the file",
    ),
    "llmperf": (
        tuple(FIXTURES / "llmperf" / n / _LP for n in _NAMES),
        llmperf_responses,
        1,
        "LLMPerf results version 2023-08-31",
    ),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_candidate_is_1_5x_faster_paired_per_prompt(tmp_path: Path, capsys, fmt: str) -> None:
    (base, cand, _), reader, load, version = FORMATS[fmt]
    assert result_format(base) == fmt == result_format(cand)
    code, out, err = run_main(capsys, "compare", str(base), str(cand), "--output", str(tmp_path / "ab"))
    assert code == 0, err
    tp = summary_tpot(tmp_path / "ab")  # speedup: baseline TPOT / candidate TPOT
    assert abs(tp["speedup"] / 1.5 - 1) < 0.10, tp
    assert tp["decision"] == "faster" and tp["n_pairs"] == 40
    assert "TPOT 1.5" in out and "temperature not recorded" in out.split("\n")[0] and f"concurrency {load}" in out
    inputs = json.loads((tmp_path / "ab" / "inputs.json").read_text())
    notes = words(inputs["notes"])  # as the report says them
    assert inputs["arms"][1]["server_info"]["tool"] == reader.TOOL and reader.NOTE in notes  # the reader's own words
    assert version in out and sum(version in n for n in notes) == 2  # each file's own
    assert sum(n["kind"] == "file_read" for n in inputs["notes"]) == 2  # kept as records, worded by the report
    # the page says the sampling is unknown rather than showing made-up defaults (max_tokens 0, seed 0)
    page = (tmp_path / "ab" / "report.html").read_text(encoding="utf-8")
    assert "not recorded in the files" in page and "max_tokens 0" not in page
    assert "<th>repeats</th><td>1 (two separate runs compared afterwards: the arms were not interleaved)" in page


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.slow
def test_a_vs_a_says_equivalent(tmp_path: Path, capsys, fmt: str) -> None:
    (base, _, again), _, load, _ = FORMATS[fmt]
    code, out, err = run_main(capsys, "compare", str(base), str(again), "--output", str(tmp_path / "aa"))
    assert code == 0, err
    assert summary_tpot(tmp_path / "aa")["decision"] == "equivalent"
    assert f"TPOT equivalent at concurrency {load}" in out


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.slow
def test_unpaired_the_candidate_is_still_1_5x_faster_and_a_vs_a_equivalent(tmp_path: Path, capsys, fmt: str) -> None:
    # --unpaired: the same files as two samples, each arm's requests against the other's (the rank-sum interval)
    (base, cand, again), _, load, _ = FORMATS[fmt]
    code, out, err = run_main(capsys, "compare", str(base), str(cand), "--unpaired", "--output", str(tmp_path / "ab"))
    assert code == 0, err
    tp = summary_tpot(tmp_path / "ab")
    assert tp["unit"] == "unpaired" and tp["samples"] == [40, 40] and tp["n_pairs"] == 0
    assert tp["speedup_low"] <= 1.5 <= tp["speedup_high"] or abs(tp["speedup"] / 1.5 - 1) < 0.02, tp
    assert tp["decision"] == "faster"
    assert out.split("\n")[0].endswith("40 prompts (A) vs 40 (B) · unpaired · temperature not recorded · 1 repeat")
    assert f"at concurrency {load} (unpaired)" in out and "unpaired: 40 B vs 40 A requests" in out
    code, out, err = run_main(capsys, "compare", str(base), str(again), "--unpaired", "--output", str(tmp_path / "aa"))
    assert code == 0, err
    assert summary_tpot(tmp_path / "aa")["decision"] == "equivalent"
    assert f"TPOT equivalent at concurrency {load} (unpaired)" in out


def test_files_of_different_prompts_are_compared_unpaired_saying_why(tmp_path: Path, capsys) -> None:
    # the candidate's file without its last 6 requests (a run of 34 prompts): the counts differ, so nothing is paired
    (base, cand, _), reader, _, _ = FORMATS["vllm"]
    raw = json.loads(cand.read_text())
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(raw | {k: raw[k][:34] for k in (*reader.PER_REQUEST, "generated_texts")}))
    code, _out, err = run_main(capsys, "compare", str(base), str(cut), "--output", str(tmp_path / "ab"))
    assert code == 0, err
    tp = summary_tpot(tmp_path / "ab")
    assert tp["unit"] == "unpaired" and tp["samples"] == [34, 40] and tp["decision"] == "faster"
    assert abs(tp["speedup"] / 1.5 - 1) < 0.05, tp
    summary = json.loads((tmp_path / "ab" / "summary.json").read_text())
    assert summary["setup"]["paired"] is False
    why = next(w for w in (x["text"] for x in summary["warnings"]) if w.startswith("unpaired:"))
    assert "cannot be paired per prompt (40 prompts vs 34)" in why and "rank-sum interval" in why
    assert "--disable-shuffle" in why  # how to pair them next time, in vLLM's terms
    page = (tmp_path / "ab" / "report.html").read_text(encoding="utf-8")
    assert "<th>pairing</th><td>unpaired" in page and "(unpaired)" in page
    # re-rendered from the saved inputs, it is still the unpaired comparison
    code, out, err = run_main(capsys, "report", str(tmp_path / "ab"))
    assert code == 0 and "· unpaired ·" in out.split("\n")[0], err
    assert summary_tpot(tmp_path / "ab")["samples"] == [34, 40]
