"""`speculab compare` reading vLLM `bench serve --save-result --save-detailed` files (issue 27, first slice).

The fixtures are real files vLLM's benchmark client wrote against `speculab mock-server` scripted to a known TPOT
(tests/fixtures/imports/vllm/README.md): the candidate is 1.5x faster per token; baseline-again is a second run of the
baseline's script (A vs A).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from tests.fakes.words import words

from fakes.cli_runner import one_line_error, run_main
from speculab.commands.bench.run import BenchConfig, run_bench
from speculab.commands.compare.pairing import inputs_from_results, result_format
from speculab.errors import UserError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.imports import vllm_bench
from speculab.harness.load.runner import LoadConfig
from speculab.harness.records import ErrorCategory, TokenCountSource
from speculab.harness.verdict.build import build_report
from speculab.harness.workload.sources import load_workload
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

VLLM = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "vllm"
BASE, CAND, AGAIN = VLLM / "baseline.json", VLLM / "candidate.json", VLLM / "baseline-again.json"


def test_a_vllm_file_reads_as_per_request_records() -> None:
    raw = json.loads(CAND.read_text())
    run = vllm_bench.read(CAND)
    assert run.level.key == "c4" and len(run.records) == 40 == raw["num_prompts"]
    r = run.records[3]
    assert r.index == 3 and r.sent_s == raw["start_times"][3] and r.completion_tokens == raw["output_lens"][3]
    assert r.token_count_source is TokenCountSource.RESULT_FILE and r.output_text == raw["generated_texts"][3]
    assert r.chunks[0].t_s - r.sent_s == pytest.approx(raw["ttfts"][3])
    assert [b.t_s - a.t_s for a, b in zip(r.chunks, r.chunks[1:], strict=False)] == pytest.approx(raw["itls"][3])
    assert r.end_s - r.sent_s == pytest.approx(raw["latencies"][3]) and r.prompt_tokens == raw["input_lens"][3]
    assert run.acceptance is not None and run.acceptance.acceptance_length == pytest.approx(2.0)
    assert run.acceptance.acceptance_rate == pytest.approx(1.0)  # the file's 100 (%) as a fraction
    assert run.info["tool"] == "vllm bench serve" and run.info["version"] == "0.32.0"
    assert run.info["backend"] == "openai" and run.info["date"] == raw["date"]
    assert result_format(CAND) == "vllm" and result_format(VLLM) == "speculab"


def _bench(url: str, out: Path) -> None:
    """A speculab bench run of the fixtures' prompts, as vLLM sent them: in order, 16 tokens, 4 at a time."""
    spec = str(VLLM / "prompts.jsonl")
    wl = load_workload(spec, seed=0, num_prompts=None)
    cfg = BenchConfig(
        endpoint=EndpointConfig(base_url=url, model=""),
        sampling=RequestSampling(max_tokens=16),
        load=LoadConfig(concurrency=4),
        output_dir=out,
        workload={"spec": spec, "name": wl.name, "source": wl.source, "n_items": len(wl.items)},
    )
    asyncio.run(run_bench(cfg, wl.items))


@pytest.mark.slow
@pytest.mark.serial  # its baseline is a mock measured live, held to the scripted 1.5x within 10%
def test_a_bench_dir_against_a_vllm_file_pairs_when_the_prompts_match(tmp_path: Path, capsys) -> None:
    # the baseline's script (make_fixtures.sh), measured by speculab; the candidate measured by vLLM
    with mock_server_in_thread(MockConfig(ttft_s=0.02, gap_s=0.03, output_tokens=16)) as url:
        _bench(url, tmp_path / "base")
    inputs = inputs_from_results(tmp_path / "base", CAND)
    assert [a.server_info["tool"] for a in inputs.arms] == ["speculab bench", "vllm bench serve"]
    assert len(inputs.setup.items) == 40 and inputs.setup.levels[0].key == "c4"
    report = build_report(inputs)
    tpot = report.level("c4").comparison("candidate").metric("tpot_s")
    assert abs(tpot.speedup / 1.5 - 1) < 0.10 or tpot.speedup_low <= 1.5 <= tpot.speedup_high, tpot
    assert tpot.n_pairs == 40
    # the other way round, through the CLI
    code, _, err = run_main(capsys, "compare", str(CAND), str(tmp_path / "base"), "--output", str(tmp_path / "ba"))
    assert code == 0, err
    # a bench run of other prompts is compared unpaired, naming the first prompt that differs
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps({"prompt": f"word {i}"}) + "\n" for i in range(40)))
    with mock_server_in_thread(MockConfig(ttft_s=0.001, gap_s=0.001, output_tokens=4)) as url:
        wl = load_workload(str(short), seed=0, num_prompts=None)
        cfg = BenchConfig(
            endpoint=EndpointConfig(base_url=url, model=""),
            sampling=RequestSampling(max_tokens=4),
            load=LoadConfig(concurrency=4),
            output_dir=tmp_path / "other",
            workload={"spec": str(short), "name": wl.name, "source": wl.source, "n_items": 40},
        )
        asyncio.run(run_bench(cfg, wl.items))
    code, _, err = run_main(capsys, "compare", str(tmp_path / "other"), str(CAND), "--output", str(tmp_path / "x"))
    assert code == 0, err
    summary = json.loads((tmp_path / "x" / "summary.json").read_text())
    assert any(
        "cannot be paired per prompt (prompt 0: 2 vs 22 input tokens)" in w
        for w in (x["text"] for x in summary["warnings"])
    )
    assert summary["setup"]["paired"] is False


def test_vllm_runs_at_other_loads_are_refused_and_of_other_lengths_unpaired(tmp_path: Path) -> None:
    raw = json.loads(BASE.read_text())
    other = tmp_path / "c8.json"
    other.write_text(json.dumps(raw | {"max_concurrency": 8}))
    with pytest.raises(UserError, match=r"ran at different loads \(concurrency 4 vs concurrency 8\): an A/B compares"):
        inputs_from_results(BASE, other)
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps(raw | {k: raw[k][:39] for k in (*vllm_bench.PER_REQUEST, "generated_texts")}))
    inputs = inputs_from_results(BASE, fewer)
    assert not inputs.setup.paired and any(
        "cannot be paired per prompt (40 prompts vs 39)" in n for n in words(inputs.notes)
    )
    lens = tmp_path / "lens.json"
    lens.write_text(json.dumps(raw | {"input_lens": [*raw["input_lens"][:5], 999, *raw["input_lens"][6:]]}))
    inputs = inputs_from_results(BASE, lens)
    assert not inputs.setup.paired and any(
        re.search(r"prompt 5: \d+ vs 999 input tokens", n) for n in words(inputs.notes)
    )


def test_a_failed_request_in_a_vllm_file_is_an_error_record(tmp_path: Path) -> None:
    raw = json.loads(BASE.read_text())
    errors = ["Internal Server Error", *raw["errors"][1:]]
    f = tmp_path / "failed.json"
    f.write_text(json.dumps(raw | {"errors": errors, "ttfts": [0.0, *raw["ttfts"][1:]]}))
    r = vllm_bench.read(f).records[0]
    assert not r.ok and r.error is not None and r.error.category is ErrorCategory.HTTP
    assert "Internal Server Error" in r.error.message and not r.chunks


def test_a_cut_or_incomplete_vllm_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(BASE.read_text()[:3000])  # a file cut short
    code, _, err = run_main(capsys, "compare", str(cut), str(CAND), "--output", str(tmp_path / "o1"))
    line = one_line_error(err)
    assert code == 2 and str(cut) in line and "read as a vLLM bench serve result: not JSON" in line, line
    raw = json.loads(BASE.read_text())
    plain = tmp_path / "no-detail.json"  # written without --save-detailed
    plain.write_text(json.dumps({k: v for k, v in raw.items() if k not in ("ttfts", "itls", "errors")}))
    code, _, err = run_main(capsys, "compare", str(BASE), str(plain), "--output", str(tmp_path / "o2"))
    line = one_line_error(err)
    assert code == 2 and str(plain) in line and "vLLM bench serve" in line and "no `ttfts`" in line, line
    assert "--save-detailed" in line
    code, _, err = run_main(
        capsys, "compare", str(BASE), str(CAND), "--format", "lmdeploy", "--output", str(tmp_path / "o3")
    )
    assert code == 2 and "--format: 'lmdeploy' is not one of speculab, vllm" in one_line_error(err)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    code, _, err = run_main(capsys, "compare", str(other), str(CAND), "--output", str(tmp_path / "o4"))
    assert code == 2 and "not a result speculab reads" in one_line_error(err)
    code, _, err = run_main(
        capsys, "compare", str(other), str(CAND), "--format", "vllm", "--output", str(tmp_path / "o5")
    )
    assert code == 2 and "read as a vLLM bench serve result: not JSON" in one_line_error(err)
