"""`speculab compare` reading GuideLLM `benchmarks.json` and AIPerf `profile_export.jsonl` files (issue 27).

The fixtures are real files GuideLLM 0.8.1 and AIPerf 0.13.0 wrote against `speculab mock-server` scripted to a known
TPOT (tests/fixtures/imports/{guidellm,aiperf}/README.md): the candidate is 1.5x faster per token; baseline-again is
a second run of the baseline's script (A vs A). The 1.5x-faster and A-vs-A comparisons of every format are in
test_compare_tool_files.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from tests.fakes.words import words

from fakes.cli_runner import one_line_error, run_main, summary_tpot
from speculab.commands.bench.run import BenchConfig, run_bench
from speculab.commands.compare.pairing import inputs_from_results
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.imports import aiperf_profile, guidellm_benchmarks
from speculab.harness.imports.registry import result_format
from speculab.harness.load.runner import LoadConfig
from speculab.harness.records import TokenCountSource
from speculab.harness.verdict.build import build_report
from speculab.harness.workload.sources import load_workload
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
GL = FIXTURES / "guidellm"
AP = FIXTURES / "aiperf"
RUNS = {
    "guidellm": (GL / "baseline.json", GL / "candidate.json", GL / "baseline-again.json"),
    "aiperf": tuple(AP / n / "profile_export.jsonl" for n in ("baseline", "candidate", "baseline-again")),
}


def test_guidellm_tpot_is_speculabs_not_the_files_time_per_output_token() -> None:
    raw = json.loads(GL.joinpath("candidate.json").read_text())["benchmarks"][0]["requests"]["successful"]
    run = guidellm_benchmarks.read(GL / "candidate.json")
    by_prompt = {json.loads(r["request_args"])["body"]["prompt"]: r for r in raw}
    for rec, item in zip(run.records, run.items, strict=True):
        r = by_prompt[item.prompt]
        first, last = rec.chunks[0].t_s - rec.sent_s, rec.chunks[-1].t_s - rec.sent_s
        assert first == pytest.approx(r["time_to_first_token_ms"] / 1000)
        assert (last - first) / (rec.completion_tokens - 1) == pytest.approx(r["inter_token_latency_ms"] / 1000)
        assert rec.token_count_source is TokenCountSource.RESULT_FILE and rec.output_text == r["output"]
    prompts = [json.loads(line)["prompt"] for line in GL.joinpath("prompts.jsonl").read_text().splitlines()]
    assert [it.prompt for it in run.items] == prompts  # the dataset's order, though completed out of it


def test_aiperf_records_follow_the_sent_order_and_units() -> None:
    run = aiperf_profile.read(RUNS["aiperf"][1])
    assert run.level.key == "c4" and len(run.records) == 40 and run.name == "candidate"
    assert run.prompt_keys[:2] == ("session_000000/0", "session_000001/0")
    assert all(a.sent_s <= b.sent_s for a, b in zip(run.records, run.records[1:], strict=False))
    assert run.records[0].completion_tokens == 16 and run.info["version"] == "0.13.0"


@pytest.mark.parametrize("fmt", ["guidellm", "aiperf"])
def test_runs_of_other_prompts_are_compared_unpaired(tmp_path: Path, fmt: str) -> None:
    base = RUNS[fmt][0]
    if fmt == "guidellm":
        raw = json.loads(base.read_text())
        ok = raw["benchmarks"][0]["requests"]["successful"]
        args = json.loads(ok[5]["request_args"])
        args["body"]["prompt"] = "something else"
        ok[5]["request_args"] = json.dumps(args)
        other = tmp_path / "other.json"
        other.write_text(json.dumps(raw))
    else:
        (tmp_path / "run").mkdir()
        other = tmp_path / "run" / "profile_export.jsonl"
        rows = [json.loads(line) for line in base.read_text().splitlines()]
        rows[3]["metadata"]["conversation_id"] = "session_999999"
        other.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (tmp_path / "run" / aiperf_profile.SIBLING).write_text(base.with_name(aiperf_profile.SIBLING).read_text())
    inputs = inputs_from_results(base, other)  # compared unpaired, saying why
    assert not inputs.setup.paired
    assert any(re.search(r"cannot be paired per prompt \(prompt \d+: ", n) for n in words(inputs.notes)), inputs.notes


def test_a_guidellm_sweep_against_one_load_needs_benchmark_n(tmp_path: Path, capsys) -> None:
    raw = json.loads((GL / "baseline.json").read_text())
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps(raw | {"benchmarks": raw["benchmarks"] * 2}))
    code, _, err = run_main(capsys, "compare", str(sweep), str(GL / "candidate.json"), "--output", str(tmp_path / "o"))
    line = one_line_error(err)
    assert code == 2 and str(sweep) in line and "holds 2 GuideLLM benchmark(s)" in line and "--benchmark N" in line
    code, _, err = run_main(
        capsys, "compare", str(sweep), str(GL / "candidate.json"), "--benchmark", "1", "--output", str(tmp_path / "p")
    )
    assert code == 0, err
    # two benchmarks at one load cannot be told apart as a sweep: pick one
    code, _, err = run_main(capsys, "compare", str(sweep), str(sweep), "--output", str(tmp_path / "q"))
    assert code == 2 and "two GuideLLM benchmark(s) at one load" in one_line_error(err)


def test_a_guidellm_sweep_is_compared_load_by_load_with_the_crossover(tmp_path: Path, capsys) -> None:
    # real sweeps (GuideLLM's concurrent profile at 1 and 2 streams, 12 prompts each) of the 30 ms and the 20 ms mock
    out = tmp_path / "sweep"
    code, _, err = run_main(
        capsys, "compare", str(GL / "sweep-baseline.json"), str(GL / "sweep-candidate.json"), "--output", str(out)
    )
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert [lv["key"] for lv in summary["levels"]] == ["c1", "c2"]
    for lv in summary["levels"]:
        (cmp,) = lv["comparisons"]
        tpot = next(m for m in cmp["metrics"] if m["metric"] == "tpot_s")
        assert abs(tpot["speedup"] - 1.5) < 0.15 and tpot["decision"] == "faster", (lv["key"], tpot)
        assert tpot["n_pairs"] == 12
    # a sweep's roles: the lowest load is the low one, the highest the operating point; the crossover is computed
    assert summary["levels"][0]["roles"] == ["low", "sweep"] and summary["levels"][1]["roles"] == ["operating", "sweep"]
    (cand,) = summary["candidates"]
    assert cand["crossover"] is not None and "above 1 at every load" in cand["verdict_line"]


@pytest.mark.parametrize("fmt", ["guidellm", "aiperf"])
def test_a_cut_or_incomplete_file_is_one_line_and_exit_2(tmp_path: Path, capsys, fmt: str) -> None:
    base, cand, _ = RUNS[fmt]
    name = {"guidellm": "a GuideLLM benchmarks file", "aiperf": "an AIPerf profile_export.jsonl"}[fmt]
    cut = tmp_path / "cut" / base.name
    cut.parent.mkdir()
    cut.write_text(base.read_text()[:3000])
    if fmt == "aiperf":
        (cut.parent / aiperf_profile.SIBLING).write_text(base.with_name(aiperf_profile.SIBLING).read_text())
    code, _, err = run_main(capsys, "compare", str(cut), str(cand), "--output", str(tmp_path / "o1"))
    line = one_line_error(err)
    assert code == 2 and str(cut) in line and f"read as {name}" in line and "not JSON" in line, line
    missing = tmp_path / "missing" / base.name
    missing.parent.mkdir()
    if fmt == "guidellm":
        raw = json.loads(base.read_text())
        del raw["benchmarks"][0]["requests"]["successful"][7]["time_to_first_token_ms"]
        missing.write_text(json.dumps(raw))
        field = "time_to_first_token_ms"
    else:
        rows = [json.loads(line) for line in base.read_text().splitlines()]
        del rows[7]["metrics"]["time_to_first_token"]
        missing.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (missing.parent / aiperf_profile.SIBLING).write_text(base.with_name(aiperf_profile.SIBLING).read_text())
        field = "metrics.time_to_first_token"
    code, _, err = run_main(capsys, "compare", str(missing), str(cand), "--output", str(tmp_path / "o2"))
    line = one_line_error(err)
    assert code == 2 and str(missing) in line and f"read as {name}" in line and f"{field}`" in line, line


def test_a_bench_dir_against_a_guidellm_file_pairs_by_prompt_text(tmp_path: Path) -> None:
    # the baseline's script measured by speculab, the candidate by GuideLLM: the same prompts in the same order.
    # GuideLLM counts a prompt's tokens itself (21 here, the server's usage says 22): equal texts are the check
    spec = str(GL / "prompts.jsonl")
    wl = load_workload(spec, seed=0, num_prompts=None)
    with mock_server_in_thread(MockConfig(ttft_s=0.02, gap_s=0.03, output_tokens=16)) as url:
        cfg = BenchConfig(
            endpoint=EndpointConfig(base_url=url, model=""),
            sampling=RequestSampling(max_tokens=16),
            load=LoadConfig(concurrency=4),
            output_dir=tmp_path / "base",
            workload={"spec": spec, "name": wl.name, "source": wl.source, "n_items": len(wl.items)},
        )
        asyncio.run(run_bench(cfg, wl.items))
    inputs = inputs_from_results(tmp_path / "base", GL / "candidate.json")
    assert [a.server_info["tool"] for a in inputs.arms] == ["speculab bench", "guidellm"]
    assert any("their prompts equal" in n for n in words(inputs.notes))
    tpot = build_report(inputs).level("c4").comparison("candidate").metric("tpot_s")
    assert abs(tpot.speedup / 1.5 - 1) < 0.10 and tpot.n_pairs == 40, tpot


def test_a_guidellm_yaml_file_reads_as_its_json_does(tmp_path: Path, capsys) -> None:
    yaml_file = GL / "baseline.yaml"  # written by GuideLLM's `--output kind=yaml`: its keys sorted
    assert result_format(yaml_file) == "guidellm"
    code, _, err = run_main(
        capsys, "compare", str(yaml_file), str(GL / "candidate.json"), "--output", str(tmp_path / "y")
    )
    assert code == 0, err
    tp = summary_tpot(tmp_path / "y")
    assert abs(tp["speedup"] / 1.5 - 1) < 0.10 and tp["n_pairs"] == 40, tp


def test_two_sweeps_at_different_loads_are_refused_naming_the_benchmark(tmp_path: Path, capsys) -> None:
    raw = json.loads((GL / "sweep-candidate.json").read_text())
    raw["benchmarks"][1]["config"]["strategy"]["streams"] = 4
    other = tmp_path / "other.json"
    other.write_text(json.dumps(raw))
    code, _, err = run_main(capsys, "compare", str(GL / "sweep-baseline.json"), str(other), "--output", str(tmp_path))
    line = one_line_error(err)
    assert code == 2 and "benchmark 1 is at concurrency 2 in A and concurrency 4 in B" in line, line


def test_aiperf_per_request_acceptance_is_read_and_shown(tmp_path: Path, capsys) -> None:
    # candidate-spec: AIPerf against the 20 ms mock whose responses carry vLLM's per-request
    # metrics.speculative_decoding (k = 1, every draft accepted), which AIPerf wrote as spec_decode_* per record
    run = aiperf_profile.read(AP / "candidate-spec" / "profile_export.jsonl")
    acc = run.acceptance
    assert acc is not None and acc.active and acc.acceptance_length == 2.0 and acc.acceptance_rate == 1.0
    assert acc.drafts == sum(r.speculation["drafts"] for r in run.records) and "summed over 40 requests" in acc.source
    assert aiperf_profile.read(AP / "candidate" / "profile_export.jsonl").acceptance is None  # none reported
    base, cand = (AP / d / "profile_export.jsonl" for d in ("baseline", "candidate-spec"))
    code, out, err = run_main(capsys, "compare", str(base), str(cand), "--output", str(tmp_path / "ab"))
    assert code == 0, err
    assert "acceptance length 2.00 (AIPerf file: per-record spec_decode_*" in out
    assert "per request: acc.len 2.00" in out and "token-weighted" in out  # with its interval over prompts
