"""`speculab compare` of summary-only files (#37 item 4): real files vLLM's `bench serve` (no --save-detailed), its
`bench sweep serve` and SGLang's `bench_serving` (no --output-details) wrote against `speculab mock-server` scripted
to a known TPOT (tests/fixtures/imports/summaries/README.md): the candidate is 1.5x faster per token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.cli_runner import one_line_error, run_main

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "summaries"
VLLM = HERE / "vllm"


def _metric(out: Path, name: str, load: int = 0) -> dict:
    """One figure at one load as summary.json states it (the A/B grammar): B against A from `comparisons`, each
    side's run values (`a`, `b`) and typical value from its `levels[].arms[].figures`."""
    s = json.loads((out / "summary.json").read_text())
    assert s["schema"] == "speculab.report.run-level/3" and s["unit"] == "run"
    level = s["levels"][load]
    m = next(m for m in level["comparisons"][0]["metrics"] if m["metric"] == name)
    fa, fb = (arm["figures"][name] for arm in level["arms"])
    return m | {"a": fa["runs"], "b": fb["runs"], "a_value": fa["value"], "b_value": fb["value"]}


def test_two_single_summaries_are_side_by_side_and_exit_0(capsys, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code, stdout, _ = run_main(
        capsys, "compare", str(VLLM / "baseline" / "r1.json"), str(VLLM / "candidate" / "r1.json"), "--output", str(out)
    )
    assert code == 0
    assert "no per-request data: no interval, no verdict" in stdout and "the unit is the run" in stdout
    tpot = _metric(out, "tpot_median_s")
    raw_a = json.loads((VLLM / "baseline" / "r1.json").read_text())
    assert tpot["a"] == [pytest.approx(raw_a["median_tpot_ms"] / 1e3)]  # the file's own figure, in seconds
    assert tpot["ratio"] is None and tpot["decision"] is None
    e2e = _metric(out, "e2e_median_s")
    assert e2e["a"] == [] and e2e["a_value"] is None  # vLLM's default --percentile-metrics leave E2E out: absent
    assert "not in the file" in stdout


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (VLLM / "baseline", VLLM / "candidate"),  # a directory of three files a side
        (HERE / "sweep" / "SERVE--plain", HERE / "sweep" / "SERVE--spec"),  # a sweep's run=N.json
        (HERE / "sglang" / "baseline.jsonl", HERE / "sglang" / "candidate.jsonl"),  # three lines at one load
    ],
    ids=["vllm-files", "vllm-sweep", "sglang-lines"],
)
def test_three_runs_a_side_decide_tpot_over_runs(capsys, tmp_path: Path, a: Path, b: Path) -> None:
    out = tmp_path / "cmp"
    code, stdout, _ = run_main(capsys, "compare", str(a), str(b), "--output", str(out))
    assert code == 0, stdout
    tpot = _metric(out, "tpot_median_s")
    assert len(tpot["a"]) == 3 and len(tpot["b"]) == 3
    assert tpot["decision"] == "faster"  # TPOT 30 ms vs 20 ms, scripted
    assert 0.6 < tpot["ratio"]["low"] <= tpot["ratio"]["estimate"] <= tpot["ratio"]["high"] < 0.75
    assert "faster" in stdout and "over runs" in stdout


def test_different_loads_are_refused_in_one_line(capsys, tmp_path: Path) -> None:
    code, _, err = run_main(
        capsys, "compare", str(VLLM / "baseline-c1"), str(VLLM / "candidate"), "--output", str(tmp_path / "x")
    )
    assert code == 2
    assert "ran at different loads (concurrency 1 vs concurrency 4)" in one_line_error(err)


def test_a_summary_beside_a_file_only_read_per_request_is_refused_in_one_line(capsys, tmp_path: Path) -> None:
    aiperf = HERE.parent / "aiperf" / "baseline"
    code, _, err = run_main(
        capsys, "compare", str(VLLM / "baseline" / "r1.json"), str(aiperf), "--output", str(tmp_path / "x")
    )
    assert code == 2
    assert "keeps no per-request data" in one_line_error(err)


def test_files_with_requests_still_pair_per_prompt(capsys, tmp_path: Path) -> None:
    detailed = HERE.parent / "vllm"
    out = tmp_path / "cmp"
    code, _, _ = run_main(
        capsys, "compare", str(detailed / "baseline.json"), str(detailed / "candidate.json"), "--output", str(out)
    )
    assert code == 0
    assert not json.loads((out / "summary.json").read_text()).get("schema").startswith("speculab.report.run-level/")


def test_guidellm_0_3_summaries_are_side_by_side(capsys, tmp_path: Path) -> None:
    g03 = HERE.parent / "guidellm-0.3"
    out = tmp_path / "cmp"
    args = ("compare", str(g03 / "baseline-summary.json"), str(g03 / "candidate-summary.json"), "--output", str(out))
    code, stdout, _ = run_main(capsys, *args)
    assert code == 0 and "no per-request data: no interval, no verdict" in stdout
    tpot = _metric(out, "tpot_median_s")
    assert tpot["point"] < 0.75  # 20 ms against 30 ms, scripted; no interval from one run a side
    assert tpot["ratio"] is None


def test_benchmark_or_unpaired_on_summaries_is_one_line(capsys, tmp_path: Path) -> None:
    sg = HERE / "sglang"
    args = ("compare", str(sg / "baseline.jsonl"), str(sg / "candidate.jsonl"), "--output", str(tmp_path / "x"))
    code, _, err = run_main(capsys, *args, "--benchmark", "0")
    assert code == 2 and "summary-only files are compared run by run" in one_line_error(err)


def test_sglang_0_4_lines_keep_what_they_have_and_leave_the_rest_absent(capsys, tmp_path: Path) -> None:
    s4 = HERE / "sglang-0.4.0"
    out = tmp_path / "cmp"
    code, stdout, _ = run_main(
        capsys, "compare", str(s4 / "baseline.jsonl"), str(s4 / "candidate.jsonl"), "--output", str(out)
    )
    assert code == 0 and "the layout of SGLang 0.4" in stdout
    e2e, tpot = _metric(out, "e2e_median_s"), _metric(out, "tpot_median_s")
    assert len(e2e["a"]) == 3 and e2e["decision"] == "faster"  # 16 tokens at 30 ms vs 20 ms a token, scripted
    assert tpot["a"] == [] and tpot["decision"] is None  # 0.4.0 writes no TPOT: absent, not filled in


def test_summaries_of_two_target_models_are_refused_unless_allowed(capsys, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps(json.loads((VLLM / "candidate" / "r1.json").read_text()) | {"model_id": "gpt-oss-20b"}))
    base = str(VLLM / "baseline" / "r1.json")
    code, _, err = run_main(capsys, "compare", base, str(other), "--output", str(tmp_path / "x"))
    assert code == 2 and "gpt-oss-20b" in one_line_error(err) and "speculab-mock" in err
    out = tmp_path / "y"
    code, _, _ = run_main(capsys, "compare", base, str(other), "--output", str(out), "--allow-different-models")
    notes = json.loads((out / "summary.json").read_text())["warnings"]  # records; the model check's words as a note
    assert code == 0 and any("different target models" in n["fields"].get("text", "") for n in notes)


def test_report_reprints_a_run_level_comparison_and_re_decides_with_margin(capsys, tmp_path: Path) -> None:
    """`speculab report DIR` of a run-level compare directory (only DIR/summary.json): the same table again, exit 0;
    `--margin` re-decides it (TPOT 1.5x faster is within a 60 % margin) and writes the answers back."""
    out = tmp_path / "cmp"
    assert run_main(capsys, "compare", str(VLLM / "baseline"), str(VLLM / "candidate"), "--output", str(out))[0] == 0
    saved = (out / "summary.json").read_text()
    code, stdout, err = run_main(capsys, "report", str(out))
    assert code == 0, err
    assert "the unit is the run" in stdout and "faster" in stdout and "no inputs.json" not in err
    assert (out / "summary.json").read_text() == saved  # nothing asked to change: nothing written
    code, stdout, err = run_main(capsys, "report", str(out), "--margin", "60%")
    assert code == 0, err
    tpot = _metric(out, "tpot_median_s")
    assert tpot["decision"] == "equivalent" and tpot["margin"] == pytest.approx(0.6)
    assert f"wrote {out / 'summary.json'}" in stdout
    # the re-decided answers gate a CI job like an A/B run's: equivalent at a 60 % margin, not slower
    assert run_main(capsys, "report", str(out), "--fail-on", "slower")[0] == 0
    code, _, err = run_main(capsys, "report", str(out), "--fail-on", "equivalent")
    assert code == 5 and "equivalent" in one_line_error(err), err


def test_fail_on_gates_a_run_level_comparison(capsys, tmp_path: Path) -> None:
    """--fail-on on summary-only files (#40's CI gate, issue 37's run-level compare): the deciding metric's median
    figure over runs is the answer at each load, so the candidate as A (1.5x slower per token) fails `slower`; one
    run a side has no interval (`no-verdict`); correctness cannot be in such files, so `worse` is refused, and a
    misspelt --decide-on is one line before anything is written."""
    swapped = tmp_path / "swapped"
    code, _, err = run_main(
        capsys, "compare", str(VLLM / "candidate"), str(VLLM / "baseline"), "--output", str(swapped),
        "--fail-on", "slower",
    )  # fmt: skip
    assert code == 5 and "slower" in one_line_error(err) and str(swapped) in err, err
    assert (swapped / "summary.json").is_file()  # written before the gate
    # E2E is not in vLLM's default summary: no figure, no verdict
    code, _, err = run_main(
        capsys, "compare", str(VLLM / "baseline"), str(VLLM / "candidate"), "--output", str(tmp_path / "e2e"),
        "--decide-on", "e2e", "--fail-on", "no-verdict",
    )  # fmt: skip
    assert code == 5 and "no-verdict" in one_line_error(err), err
    single = [str(VLLM / "baseline" / "r1.json"), str(VLLM / "candidate" / "r1.json")]
    code, _, err = run_main(capsys, "compare", *single, "--output", str(tmp_path / "one"), "--fail-on", "no-verdict")
    assert code == 5 and "no-verdict" in one_line_error(err), err
    assert run_main(capsys, "compare", *single, "--output", str(tmp_path / "two"), "--fail-on", "slower")[0] == 0
    code, _, err = run_main(capsys, "compare", *single, "--output", str(tmp_path / "w"), "--fail-on", "worse")
    assert code == 2 and "correctness cannot be checked" in one_line_error(err), err
    code, _, err = run_main(capsys, "compare", *single, "--output", str(tmp_path / "d"), "--decide-on", "tpott")
    assert code == 2 and "--decide-on" in one_line_error(err) and not (tmp_path / "d").exists(), err


def test_a_run_whose_requests_all_failed_fails_the_error_gate_with_exit_4(capsys, tmp_path: Path) -> None:
    """Issue 51: a vLLM-layout file with 0 of 640 requests completed exited 0 ("requests failed 640" its only sign);
    the error gate reads each run's own counts, after summary.json is written; `--max-error-rate` takes a percent."""
    d = json.loads((VLLM / "candidate" / "r1.json").read_text())
    zeros = {k: 0.0 for k in d if k.endswith("_ms") or k.endswith("_throughput")}
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps(d | zeros | {"num_prompts": 640, "completed": 0, "failed": 640}))
    out = tmp_path / "cmp"
    code, stdout, err = run_main(capsys, "compare", str(VLLM / "baseline" / "r1.json"), str(dead), "--output", str(out))
    line = one_line_error(err)
    assert code == 4 and "640 of 640 requests failed (100.0%)" in line and "more than --max-error-rate 2%" in line
    assert "dead.json at concurrency 4" in line and (out / "summary.json").is_file()
    assert "the error gate (--max-error-rate 2%) reads each run's own counts" in stdout
    args = ("compare", str(VLLM / "baseline" / "r1.json"), str(dead), "--max-error-rate")
    assert run_main(capsys, *args, "100%", "--output", str(tmp_path / "all"))[0] == 0
    assert run_main(capsys, *args, "1.0", "--output", str(tmp_path / "one"))[0] == 0
    code, _, err = run_main(capsys, *args, "50", "--output", str(tmp_path / "bad"))
    assert code == 2 and "did you mean 50%?" in err and not (tmp_path / "bad").exists()


def test_a_sweep_combinations_own_summary_json_is_its_runs(capsys, tmp_path: Path) -> None:
    """Issue 51: the summary.json `vllm bench sweep serve` writes beside a combination's run=N.json (those results
    again, as one list) is read alone, each entry a run (what users keep)."""
    sides = []
    for name in ("plain", "spec"):
        combo = HERE / "sweep" / f"SERVE--{name}-BENCH--c4"
        runs = [json.loads((combo / f"run={n}.json").read_text()) | {"run_number": n} for n in range(3)]
        kept = tmp_path / combo.name
        kept.mkdir()
        (kept / "summary.json").write_text(json.dumps(runs, indent=4))
        sides.append(str(kept / "summary.json"))
    out = tmp_path / "cmp"
    code, stdout, _ = run_main(capsys, "compare", *sides, "--output", str(out))
    assert code == 0, stdout
    tpot = _metric(out, "tpot_median_s")
    assert len(tpot["a"]) == 3 and tpot["decision"] == "faster" and "vllm bench sweep serve" in stdout


def test_a_vllm_file_keeping_lens_but_no_ttfts_compares_at_the_run_level(capsys, tmp_path: Path) -> None:
    lens = {"input_lens": [22] * 20, "output_lens": [16] * 20, "errors": [""] * 20}
    a, b = (tmp_path / "a.json", tmp_path / "b.json")
    for src, dst in ((VLLM / "baseline" / "r1.json", a), (VLLM / "candidate" / "r1.json", b)):
        dst.write_text(json.dumps(json.loads(src.read_text()) | lens))
    code, stdout, err = run_main(capsys, "compare", str(a), str(b), "--output", str(tmp_path / "cmp"))
    assert code == 0, err
    assert "the unit is the run" in stdout and "--save-detailed" not in stdout + err
    assert _metric(tmp_path / "cmp", "tpot_median_s")["point"] < 0.75


def test_llmperf_summaries_alone_compare_at_the_run_level(capsys, tmp_path: Path) -> None:
    """Issue 51: LLMPerf's *_summary.json kept without its responses is read at the run level (its quantiles and its
    own throughput); TPOT and ITL are not in it (LLMPerf's inter-token figure counts the first token)."""
    llmperf = HERE.parent / "llmperf"
    sides = []
    for name in ("baseline", "candidate"):
        (src,) = (llmperf / name).glob("*_summary.json")
        (tmp_path / name).mkdir()
        sides.append(tmp_path / name / src.name)
        sides[-1].write_text(src.read_text())
    out = tmp_path / "cmp"
    code, stdout, err = run_main(capsys, "compare", *map(str, sides), "--output", str(out))
    assert code == 0, err
    raw = json.loads(sides[0].read_text())
    assert _metric(out, "e2e_median_s")["a"] == [pytest.approx(raw["results_end_to_end_latency_s_quantiles_p50"])]
    assert _metric(out, "output_tok_s")["a"] == [pytest.approx(raw["results_mean_output_throughput_token_per_s"])]
    assert _metric(out, "tpot_median_s")["a"] == [] and "llmperf" in stdout
    # beside its responses, a summary is the responses' run: give them (read per request)
    with_responses = [str(next((llmperf / n).glob("*_summary.json"))) for n in ("baseline", "candidate")]
    code, _, err = run_main(capsys, "compare", *with_responses, "--output", str(tmp_path / "x"))
    assert code == 2 and "give LLMPerf's *_individual_responses.json beside it" in one_line_error(err)


@pytest.mark.parametrize(
    ("name", "tool"), [("draftbench.json", "draftbench"), ("profile_export_genai_perf.json", "GenAI-Perf")]
)
def test_another_tools_json_is_never_a_vllm_summary(capsys, tmp_path: Path, name: str, tool: str) -> None:
    """Issue 51: draftbench's and GenAI-Perf's JSON (a `backend` in each) were read as vLLM summaries with every figure
    "not in the file", exit 0. Against a vLLM summary, or each other, they are refused in one line naming their tool
    (until a reader of that tool, registered, claims them: then never as vLLM's)."""
    other = HERE.parent / "recognition" / name
    for n, (a, b) in enumerate(((VLLM / "baseline" / "r1.json", other), (other, other))):
        out = tmp_path / f"x{n}"
        code, _, err = run_main(capsys, "compare", str(a), str(b), "--output", str(out))
        if code == 0:  # its own reader claims it
            arms = json.loads((out / "summary.json").read_text())["arms"]
            assert arms[-1].get("tool") != "vllm bench serve", arms
        else:
            assert code == 2 and tool in one_line_error(err), err
