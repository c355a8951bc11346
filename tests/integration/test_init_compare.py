"""`speculab init` (detect the engine, write a starter file that loads) and `speculab compare` (two bench runs ->
report inputs), against the mock server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from speculab.commands.bench.run import BenchConfig, run_bench
from speculab.commands.compare.pairing import inputs_from_bench_dirs
from speculab.commands.init.starter import starter_yaml
from speculab.config import load_experiment, parse_experiment
from speculab.errors import EndpointError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.runner import LoadConfig
from speculab.harness.servers.look import ServerLook, look_at_server
from speculab.harness.verdict.build import build_report
from speculab.harness.workload.sources import load_workload
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.slow
def test_init_detects_the_mock_and_writes_a_loadable_file(tmp_path: Path) -> None:
    cfg = MockConfig(tokens_per_chunk=2, num_speculative_tokens=1)  # exposes vllm:spec_decode_* counters
    with mock_server_in_thread(cfg) as url:
        out = tmp_path / "experiment.yaml"
        proc = subprocess.run(
            [sys.executable, "-m", "speculab", "init", "--url", url, "--output", str(out)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert "engine: vllm" in proc.stderr
        again = subprocess.run(
            [sys.executable, "-m", "speculab", "init", "--url", url, "--output", str(out)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        assert again.returncode == 2 and "--force" in again.stderr and "Traceback" not in again.stderr
    exp = load_experiment(out)
    assert exp.baseline.launch is not None and exp.baseline.launch.engine == "vllm"
    port = url.rsplit(":", 1)[1]
    assert exp.baseline.launch.port == int(port) and "vllm.entrypoints.openai.api_server" in exp.baseline.launch.command
    assert exp.speculation.method == "ngram" and exp.repeats == 3  # the launches its intervals need (#36)
    # a small grid: n-gram at k=2 and k=4, each its own candidate
    assert [(sp.method, sp.num_speculative_tokens) for sp in exp.speculations] == [("ngram", 2), ("ngram", 4)]


@pytest.mark.parametrize("engine", ["speculab", "vllm", "sglang", "llamacpp", "tgi", "other"])
def test_starter_file_loads_for_every_engine(engine: str) -> None:
    look = ServerLook("http://10.0.0.5:30000", engine, ({"id": "my-model", "root": "/models/m"},), None, ())
    text = starter_yaml(look)
    assert text.endswith("\n") and not text.endswith("\n\n")  # one final newline, as editors and git expect
    exp = parse_experiment(text, "starter.yaml")
    if engine == "other":  # unknown flags: two-URL mode with a placeholder candidate
        assert exp.two_url_mode and exp.baseline.url == "http://10.0.0.5:30000"
    else:
        assert exp.baseline.launch is not None and exp.baseline.launch.engine == engine
        assert "/models/m" in exp.baseline.launch.command and exp.baseline.launch.host == "10.0.0.5"


def test_init_unreachable_url_is_one_clear_error() -> None:
    with pytest.raises(EndpointError, match=r"cannot reach http://127\.0\.0\.1:9"):
        asyncio.run(look_at_server("http://127.0.0.1:9"))


def _bench(url: str, out: Path, concurrency: int = 2, prompts: int = 12) -> None:
    wl = load_workload("synthetic:input=10,output=8", seed=0, num_prompts=prompts)
    cfg = BenchConfig(
        endpoint=EndpointConfig(base_url=url, model=""),
        sampling=RequestSampling(max_tokens=16),
        load=LoadConfig(concurrency=concurrency),
        output_dir=out,
        workload={"spec": "synthetic:input=10,output=8", "name": wl.name, "source": wl.source, "n_items": prompts},
    )
    asyncio.run(run_bench(cfg, wl.items))


def test_compare_exits_4_when_an_arm_failed_beyond_the_error_gate(tmp_path: Path, capsys) -> None:
    """Issue 17: a run whose candidate failed most requests exited 0 and its report said "no difference"."""
    from fakes.cli_runner import one_line_error, run_main

    ok = MockConfig(ttft_s=0.003, gap_s=0.003, output_tokens=16)
    broken = MockConfig(ttft_s=0.003, gap_s=0.003, output_tokens=16, fault_5xx_rate=0.5, seed=3)
    with mock_server_in_thread(ok) as a, mock_server_in_thread(broken) as b:
        _bench(a, tmp_path / "a")
        _bench(b, tmp_path / "b")
    code, _, err = run_main(
        capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(tmp_path / "ab")
    )
    assert code == 4
    line = one_line_error(err)
    assert line.startswith("error: B: b at concurrency 2: 4 of 12 requests failed (33.3%: http 4)"), line
    assert "more than --max-error-rate 2% allows" in line and str(tmp_path / "ab") in line
    summary = json.loads((tmp_path / "ab" / "summary.json").read_text())  # the report was written first
    corr = summary["candidates"][0]["correctness"]
    assert corr is None or corr["verdict"]["text"].startswith("not judged")  # a record, its words beside it
    assert summary["levels"][0]["comparisons"][0]["gate"] == "errors"


def test_compare_and_report_refuse_to_overwrite_a_bench_result(tmp_path: Path, capsys) -> None:
    from fakes.cli_runner import one_line_error, run_main

    ok = MockConfig(ttft_s=0.003, gap_s=0.003, output_tokens=16)
    with mock_server_in_thread(ok) as a:
        _bench(a, tmp_path / "a")
        _bench(a, tmp_path / "b")
    before = (tmp_path / "a" / "summary.json").read_bytes()
    code, _, err = run_main(
        capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(tmp_path / "a")
    )
    assert code == 2 and "already holds a run" in one_line_error(err)
    assert (tmp_path / "a" / "summary.json").read_bytes() == before  # A can still be compared
    code, _, err = run_main(
        capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(tmp_path / "ab")
    )
    assert code == 0, err
    code, _, err = run_main(capsys, "report", str(tmp_path / "ab"), "--output", str(tmp_path / "b"))
    assert code == 2 and "which the report would overwrite" in one_line_error(err)
    code, _, err = run_main(capsys, "report", str(tmp_path / "ab"), "--output", str(tmp_path / "again"))
    assert code == 0, err
    code, _, err = run_main(capsys, "report", str(tmp_path / "ab"), "--output", str(tmp_path / "again"))
    assert code == 0, err  # its own rendering may be rendered again


def _says(version: dict | None, out: Path) -> None:
    """A bench run's manifest as if its server had been `speculab serve` saying `version` at /version."""
    m = json.loads((out / "manifest.json").read_text())
    m["server"] |= {"detected_engine": "speculab", "version": version}
    (out / "manifest.json").write_text(json.dumps(m))


def test_compare_labels_and_checks_speculab_servers_from_what_they_say_they_run(tmp_path: Path) -> None:
    """Issue 36: a compare of two `speculab serve demo` servers labelled the n-gram arm `speculation: none` beside an
    acceptance length of 4.50; the servers now say what they run (/version), and compare reads it."""
    import shutil

    args = {"model": "demo", "max_num_seqs": 8, "max_model_len": 512, "dtype": "float32", "metrics_public": True}
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}

    def version(spec: dict | None, **more: object) -> dict:
        sa = args | more | {"speculative_config": spec}
        return {"name": "speculab", "version": "0", "speculative_config": spec, "server_args": sa}

    with mock_server_in_thread(MockConfig(ttft_s=0.003, gap_s=0.003, output_tokens=16)) as url:
        _bench(url, tmp_path / "a")
    for name in ("b", "wider", "old"):
        shutil.copytree(tmp_path / "a", tmp_path / name)
    _says(version(None), tmp_path / "a")
    _says(version(ngram), tmp_path / "b")
    _says(version(ngram, max_num_seqs=16), tmp_path / "wider")
    _says({"name": "speculab", "version": "0", "speculative_methods": ["ngram"]}, tmp_path / "old")  # says nothing

    inputs = inputs_from_bench_dirs(tmp_path / "a", tmp_path / "b")
    base, cand = inputs.arms
    assert (base.method, base.num_speculative_tokens) == (None, None)
    assert (cand.method, cand.num_speculative_tokens) == ("ngram", 4)
    check = inputs.changes[0]
    assert check.verified is True and len(check.diff_lines) == 1 and "--speculative-config" in check.diff_lines[0]
    report = build_report(inputs)
    assert report.candidates[0].single_change is True and report.arms[1].method == "ngram"

    wider = inputs_from_bench_dirs(tmp_path / "a", tmp_path / "wider").changes[0]
    assert wider.verified is False and any("--max-num-seqs" in ln for ln in wider.diff_lines)
    old = inputs_from_bench_dirs(tmp_path / "a", tmp_path / "old")
    assert old.changes[0].verified is None and old.arms[1].method is None  # unknown, never "plain" or a guess
