"""The A/B lifecycle end to end against the mock server: launch mode (mock servers started as the "engine"),
two-URL mode, ABBA order, streaming to disk, interruption and crashes leaving a usable partial run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.errors import EndpointError, UserError
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.process import free_port, port_in_use
from speculab.harness.verdict.build import build_report
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread
from speculab.report.phrases import reason_text

SRC = str(Path(__file__).resolve().parents[2] / "src")


def mock_cmd(port: int, tokens_per_chunk: int | str) -> str:
    """A YAML flow list: the mock server as a launched engine (this interpreter, this checkout's code)."""
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "5", "--gap-ms", "3"]
    args += ["--tokens-per-chunk", str(tokens_per_chunk), "--output-tokens", "24"]
    return json.dumps(args)


def launch_yaml(port: int, *, repeats: int = 2, base_tpc: int = 1, cand_tpc: int = 3, prompts: int = 10) -> str:
    return f"""
name: mock A/B
workload: {{spec: "synthetic:input=20,output=16", num_prompts: {prompts}, warmup_requests: 2}}
sampling: {{max_tokens: 24}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 4}}}}
repeats: {repeats}
baseline:
  launch:
    engine: other
    command: {mock_cmd(port, base_tpc)}
    port: {port}
    env: {{PYTHONPATH: "{SRC}"}}
    ready_timeout_s: 60
speculation: {{method: ngram, num_speculative_tokens: 2}}
candidate:
  command: {mock_cmd(port, cand_tpc)}
"""


@pytest.mark.slow
def test_launch_mode_abba_acceptance_cold_start_and_report(tmp_path: Path) -> None:
    port = free_port()
    plan = plan_experiment(parse_experiment(launch_yaml(port)))
    assert plan.changes[0].verified is None  # engine `other`: cannot be verified, the report says so
    assert plan.changes[0].diff_lines == ("~ --tokens-per-chunk: 1 -> 3",)
    out = tmp_path / "run"
    outcome = asyncio.run(run_plan(plan, out))
    assert not outcome.interrupted and outcome.runs == 8
    assert not port_in_use("127.0.0.1", port)  # every launched server was stopped

    inputs = load_inputs(out)
    order = sorted(inputs.runs, key=lambda r: r.order)
    # ABBA: repeat 1 runs baseline then candidate, repeat 2 candidate then baseline; levels in order per launch
    assert [(r.arm, r.level, r.repeat) for r in order] == [
        ("baseline", "c1", 1),
        ("baseline", "c4", 1),
        ("ngram-k2", "c1", 1),
        ("ngram-k2", "c4", 1),
        ("ngram-k2", "c1", 2),
        ("ngram-k2", "c4", 2),
        ("baseline", "c1", 2),
        ("baseline", "c4", 2),
    ]
    for r in inputs.runs:
        measured = [x for x in r.records if not x.warmup]
        assert sorted(x.index for x in measured) == list(range(10))  # same prompts, same pairing keys
        assert all(x.ok for x in measured)
        assert sum(x.warmup for x in r.records) == (2 if r.level == "c1" else 0)  # warmup once per launch
        assert r.memory and all(m.rss_bytes and m.rss_bytes > 1e6 for m in r.memory)
        assert not r.interrupted
        if r.arm == "baseline":
            assert r.acceptance is None  # a mock with one token per chunk exposes no spec-decode counters
        else:
            acc = r.acceptance
            assert acc is not None and acc.active and acc.acceptance_length == pytest.approx(3.0)
            # the warmup and the cold-start probe never count: drafts = measured chunks only
            chunks = sum(len(x.chunks) for x in measured)
            assert acc.drafts == chunks
    for arm in inputs.arms:
        assert arm.cold_start is not None and 0 < arm.cold_start.ready_s <= arm.cold_start.first_token_s
        assert arm.server_info["models"][0]["id"] == "speculab-mock"
    launches = json.loads((out / "launches.json").read_text())
    assert [(x["arm"], x["repeat"]) for x in launches] == [
        ("baseline", 1),
        ("ngram-k2", 1),
        ("ngram-k2", 2),
        ("baseline", 2),
    ]
    assert "--tokens-per-chunk 3" in (out / "logs" / "ngram-k2-r1.log").read_text()

    # identical text in both arms (the mock's text depends on prompt and seed only); the candidate streams 3 tokens
    # per chunk, so its TPOT (3 ms per chunk / 3 tokens) is clearly lower than the baseline's (3 ms per token)
    base = {x.index: x.output_text for x in inputs.runs_for("baseline", "c1")[0].records if not x.warmup}
    cand = {x.index: x.output_text for x in inputs.runs_for("ngram-k2", "c1")[0].records if not x.warmup}
    assert base == cand
    report = build_report(inputs)
    comp = report.level("c1").comparison("ngram-k2")
    assert comp.metric("tpot_s").verdict == "faster"


def test_two_url_mode_interleaves_blocks_and_records_servers(tmp_path: Path) -> None:
    fast = MockConfig(ttft_s=0.003, gap_s=0.002, tokens_per_chunk=2, output_tokens=12, num_speculative_tokens=1)
    slow = MockConfig(ttft_s=0.003, gap_s=0.002, tokens_per_chunk=1, output_tokens=12)
    with mock_server_in_thread(slow) as url_a, mock_server_in_thread(fast) as url_b:
        y = f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 24, warmup_requests: 1}}
loads: {{operating: {{concurrency: 2}}}}
repeats: 1
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
"""
        plan = plan_experiment(parse_experiment(y))
        plan = dataclasses.replace(plan, block_size=8)
        asyncio.run(run_plan(plan, tmp_path / "run"))
    inputs = load_inputs(tmp_path / "run")
    assert inputs.setup.two_url_mode
    change = inputs.changes[0]  # its note as the report words it (a record now)
    assert change.verified is None and change.note is not None and "two-URL" in reason_text(change.note)
    for arm in inputs.arms:
        assert arm.server_info["version"]["server"] == "speculab-mock"
        assert arm.server_info["detected_engine"] in ("vllm", "other")
    runs = {r.arm: r for r in inputs.runs}
    assert set(runs) == {"baseline", "ngram-k1"}
    # blocks of 8 prompts alternate ABBA: block 0 baseline first, block 1 candidate first, ...
    blocks: list[tuple[float, str, int]] = []
    for arm, r in runs.items():
        measured = [x for x in r.records if not x.warmup]
        assert sorted(x.index for x in measured) == list(range(24))
        for b in range(3):
            in_block = [x.sent_s for x in measured if x.index // 8 == b]
            blocks.append((min(in_block), arm, b))
    sequence = [(arm, b) for _, arm, b in sorted(blocks)]
    assert sequence == [
        ("baseline", 0),
        ("ngram-k1", 0),
        ("ngram-k1", 1),
        ("baseline", 1),
        ("baseline", 2),
        ("ngram-k1", 2),
    ]
    assert runs["ngram-k1"].acceptance is not None and runs["ngram-k1"].acceptance.active


def test_interrupt_leaves_a_partial_run_the_report_reads(tmp_path: Path) -> None:
    port = free_port()
    plan = plan_experiment(parse_experiment(launch_yaml(port, repeats=1, prompts=40)))
    stop = asyncio.Event()

    class StopAfterThree:
        def phase(self, text: str) -> None:
            pass

        def level_start(self, arm: str, level: str, repeat: int, total: int) -> None:
            pass

        def progress(self, p: object) -> None:
            if getattr(p, "finished", 0) >= 3 and not getattr(p, "warmup", True):
                stop.set()

        def level_end(self) -> None:
            pass

    outcome = asyncio.run(run_plan(plan, tmp_path / "run", stop=stop, reporter=StopAfterThree()))
    assert outcome.interrupted
    assert not port_in_use("127.0.0.1", port)
    inputs = load_inputs(tmp_path / "run")
    assert inputs.interrupted
    assert [(r.arm, r.level, r.interrupted) for r in inputs.runs] == [("baseline", "c1", True)]
    measured = [x for x in inputs.runs[0].records if not x.warmup]
    assert 3 <= len(measured) < 40
    report = build_report(inputs)  # a partial run still makes a report, which says what is missing
    assert report.interrupted and report.missing


def test_server_that_dies_at_start_is_reported_and_stopped(tmp_path: Path) -> None:
    port = free_port()
    crash = json.dumps([sys.executable, "-c", "import sys; print('model not found'); sys.exit(3)"])
    y = f"""
workload: "synthetic:input=10,output=8"
loads: {{operating: {{concurrency: 1}}}}
baseline: {{launch: {{engine: other, command: {crash}, port: {port}, ready_timeout_s: 30}}}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
candidate: {{command: {crash}}}
"""
    plan = plan_experiment(parse_experiment(y))
    with pytest.raises(EndpointError, match=r"exited with code 3 before it was ready.*model not found"):
        asyncio.run(run_plan(plan, tmp_path / "run"))
    inputs = load_inputs(tmp_path / "run")  # inputs.json was written first and marked interrupted at the end
    assert inputs.interrupted and not inputs.runs


def test_launch_refuses_a_port_already_in_use(tmp_path: Path) -> None:
    with mock_server_in_thread(MockConfig()) as url:
        port = int(url.rsplit(":", 1)[1])
        plan = plan_experiment(parse_experiment(launch_yaml(port, repeats=1)))
        with pytest.raises(UserError, match=f"port {port} .* already in use"):
            asyncio.run(run_plan(plan, tmp_path / "run"))


def test_output_dir_with_a_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "inputs.json").write_text("{}")
    plan = plan_experiment(parse_experiment(launch_yaml(free_port(), repeats=1)))
    with pytest.raises(UserError, match="already holds a run"):
        asyncio.run(run_plan(plan, tmp_path))


def _cli(*args: str, **kw: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "160"}
    return subprocess.Popen(
        [sys.executable, "-m", "speculab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


@pytest.mark.slow
def test_cli_run_prints_the_verdict_and_writes_the_report(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(launch_yaml(free_port(), repeats=1, prompts=8))
    proc = _cli("run", str(exp), "--output", str(tmp_path / "run"))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "single change not verified" in stderr and "~ --tokens-per-chunk: 1 -> 3" in stderr
    assert "ngram k=2" in stdout and "faster" in stdout
    assert (tmp_path / "run" / "report.html").is_file() and (tmp_path / "run" / "summary.json").is_file()


@pytest.mark.slow
def test_cli_ctrl_c_exits_130_with_a_report_of_what_ran(tmp_path: Path) -> None:
    port = free_port()
    exp = tmp_path / "exp.yaml"
    exp.write_text(launch_yaml(port, repeats=1, prompts=400))
    out = tmp_path / "run"
    proc = _cli("run", str(exp), "--output", str(out))
    requests = out / "runs" / "baseline" / "c1" / "r1" / "requests.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not requests.is_file() or len(requests.read_text().splitlines()) < 6):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert not port_in_use("127.0.0.1", port)  # the launched server was stopped
    assert (out / "report.html").is_file()
    again = subprocess.run(
        [sys.executable, "-m", "speculab", "report", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert load_inputs(out).interrupted


def test_cli_refuses_an_extra_difference_in_one_line(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    cmd = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000"]
    cand = [*cmd, "--max-num-seqs", "8", "--speculative-config", "{}"]
    exp.write_text(
        f"""
workload: "synthetic:input=10,output=8"
loads: {{operating: {{concurrency: 1}}}}
baseline: {{launch: {{engine: vllm, command: {json.dumps(cmd)}, port: 8000}}}}
candidate: {{command: {json.dumps(cand)}}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""
    )
    proc = _cli("run", str(exp), "--output", str(tmp_path / "run"))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Traceback" not in stderr
    assert "more than speculation differs" in stderr and "+ --max-num-seqs 8" in stderr
    assert "error: candidate ngram-k2 differs from the baseline in more than speculation (+ --max-num-seqs 8)" in stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_cli_server_dying_mid_run_stops_the_run_with_exit_3_and_a_report(tmp_path: Path) -> None:
    """A launched server that exits mid-level: the run stops at once (no run of connection errors), the partial
    level is kept and reported, and the error is one line naming the server, its exit code and its log."""
    import psutil

    port = free_port()
    exp = tmp_path / "exp.yaml"
    exp.write_text(launch_yaml(port, repeats=1, prompts=400))
    out = tmp_path / "run"
    proc = _cli("run", str(exp), "--output", str(out))
    requests = out / "runs" / "baseline" / "c1" / "r1" / "requests.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not requests.is_file() or len(requests.read_text().splitlines()) < 6):
        time.sleep(0.2)
    servers = [p for p in psutil.Process(proc.pid).children(recursive=True) if "mock-server" in " ".join(p.cmdline())]
    assert len(servers) == 1
    servers[0].kill()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3, stderr
    lines = [ln for ln in stderr.splitlines() if "exited with code" in ln]
    assert lines and "baseline server exited with code -9 during level" in lines[-1] and "Traceback" not in stderr
    assert (out / "report.html").is_file()
    inputs = load_inputs(out)
    assert inputs.interrupted and [(r.arm, r.level, r.interrupted) for r in inputs.runs] == [("baseline", "c1", True)]
    measured = [r for r in inputs.runs[0].records if not r.warmup]
    assert sum(r.ok for r in measured) >= 4 and len(measured) < 60  # stopped, not 390 connection errors later


@pytest.mark.slow
def test_a_key_in_a_launch_command_is_written_and_printed_nowhere(tmp_path: Path, capsys, monkeypatch) -> None:
    """`command: [..., --api-key, KEY]` reaches the launched server and no file, log or terminal line (issue 17)."""
    from fakes.cli_runner import run_main

    secret = "sk-speculab-test-0123456789"
    monkeypatch.setenv("SPECULAB_TEST_KEY", secret)
    port = free_port()
    args = [*json.loads(mock_cmd(port, 1)), "--api-key", secret]
    text = launch_yaml(port, repeats=1, prompts=4).replace(mock_cmd(port, 1), json.dumps(args), 1)
    text = text.replace("    ready_timeout_s: 60\n", "    ready_timeout_s: 60\n  api_key_env: SPECULAB_TEST_KEY\n")
    cand = [*json.loads(mock_cmd(port, 3)), f"--api-key={secret}"]
    text = text.replace(mock_cmd(port, 3), json.dumps(cand))
    exp = tmp_path / "exp.yaml"
    exp.write_text(text)
    out = tmp_path / "run"
    code, stdout, stderr = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, stderr
    assert secret not in stdout + stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"inputs.json", "summary.json", "report.html"} <= {p.name for p in files}
    assert any(p.suffix == ".log" for p in files)
    for p in files:
        assert secret not in p.read_text(errors="replace"), p
    inputs = load_inputs(out)
    assert all(r.ok for run in inputs.runs for r in run.records)  # the server got the key: every request passed
    assert "--api-key" in inputs.baseline.command and "***" in inputs.baseline.command
