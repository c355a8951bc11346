"""`speculab diagnose` from the command line: bad input is one line and a non-zero exit before any load; a run
prints the findings first and writes diagnosis.json/html and requests.jsonl; Ctrl-C keeps what ran and exits 130."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fakes.cli_runner import one_line_error, run_main
from integration.mock_process import mock_process
from speculab.harness.servers.process import free_port

SMALL = ["--sweep-points", "3", "--sweep-repeats", "1", "--num-prompts", "2", "--max-tokens", "8"]


def run_cli(capsys, *args):
    return run_main(capsys, "diagnose", *args)


@pytest.mark.parametrize(
    "flags,expect",
    [
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--sweep-points", "2"], "--sweep-points"),
        (["--idle", "-1"], "--idle"),
        (["--api", "responses"], "--api must be"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--timeout", "0"], "--timeout"),
        (["--extra-body", "[1]"], "--extra-body must be a JSON object"),
        (["--workload", "nope:thing"], "unknown workload"),
        (["--engine", "vllm"], "--engine only applies with --launch-cmd"),
        (["--launch-cmd", "'unclosed"], "--launch-cmd"),
        (["--experiment", "/nonexistent/exp.yaml"], "no such file"),
    ],
)
def test_bad_flags_are_one_line_before_any_load(capsys, tmp_path, flags, expect):
    code, _, err = run_cli(capsys, "--url", f"http://127.0.0.1:{free_port()}", "--output", str(tmp_path / "r"), *flags)
    assert code == 2
    assert expect in one_line_error(err)
    assert not (tmp_path / "r").exists()


def test_unreachable_url_and_missing_url(capsys, tmp_path):
    code, _, err = run_cli(capsys, "--url", f"http://127.0.0.1:{free_port()}", "--output", str(tmp_path / "r"))
    assert code == 3 and "cannot reach" in one_line_error(err)
    code, _, err = run_cli(capsys, "--output", str(tmp_path / "r"))
    assert code == 2 and "--url" in one_line_error(err)


def test_wrong_model_and_no_context_length(capsys, tmp_path):
    with mock_process(models=["m-a", "m-b"]) as url:
        code, _, err = run_cli(capsys, "--url", url, "--model", "gpt-9", "--output", str(tmp_path / "r"))
        line = one_line_error(err)
        assert code == 3 and "m-a, m-b" in line
    with mock_process(max_model_len=40) as url:
        code, _, err = run_cli(capsys, "--url", url, "--output", str(tmp_path / "r"), "--workload", "builtin:qa")
        assert code == 2 and "context" in one_line_error(err)
    assert not (tmp_path / "r").exists()


def test_run_prints_findings_first_and_writes_files(capsys, tmp_path):
    out = tmp_path / "d"
    with mock_process(ttft_s=0.01, gap_s=0.01, output_tokens=8, max_model_len=512) as url:
        code, stdout, _ = run_cli(
            capsys, "--url", url, "--output", str(out), "--workload", "synthetic:input=32,output=8", *SMALL,
            "--api-key", "sk-very-secret",
        )  # fmt: skip
    assert code == 0, stdout
    assert stdout.lstrip().startswith("Diagnosis:")
    assert stdout.index("generation after the first token") < stdout.index("prefill")
    doc = json.loads((out / "diagnosis.json").read_text())
    assert doc["findings"][0]["cause"] == "decode" and doc["interrupted"] is False
    for key in ("prefill_s_per_token", "prefill_tokens_per_s", "cold_start_s", "decode_share", "queueing_wait_s"):
        assert key in doc["summary"]
    assert (out / "diagnosis.html").read_text().startswith("<!doctype html>")
    assert (out / "requests.jsonl").read_text().count("\n") >= 10
    for f in out.iterdir():
        assert "sk-very-secret" not in f.read_text()


@pytest.mark.slow
def test_ctrl_c_keeps_what_ran_and_exits_130(tmp_path):
    out = tmp_path / "d"
    # long decode (400 x 50 ms): the workload phase's first request is in flight when Ctrl-C comes
    with mock_process(ttft_s=0.01, gap_s=0.05, output_tokens=400, max_model_len=1024) as url:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "speculab", "diagnose", "--url", url, "--output", str(out), "--workload",
             "synthetic:input=32,output=400", "--sweep-points", "3", "--sweep-repeats", "1", "--max-tokens", "400"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rj = out / "requests.jsonl"
            # the third (last) prefix control has finished: the workload phase starts next
            if rj.exists() and rj.read_text().count('"prefix-control"') == 3:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    doc = json.loads((out / "diagnosis.json").read_text())
    assert doc["interrupted"] is True
    assert doc["prefill"]["s_per_token"] is not None  # the phases that finished are diagnosed
    lines = (out / "requests.jsonl").read_text().splitlines()
    phases = [json.loads(ln)["extra"]["phase"] for ln in lines]
    assert "prefill" in phases and "workload-c1" in phases
    cancelled = [json.loads(ln) for ln in lines if json.loads(ln)["error"]]
    assert cancelled and all(r["error"]["category"] == "cancelled" for r in cancelled)
    assert json.loads((out / "manifest.json").read_text())["interrupted"] is True


def test_experiment_file_supplies_url_workload_and_operating_point(capsys, tmp_path):
    with mock_process(ttft_s=0.01, gap_s=0.004, output_tokens=8, max_model_len=512) as url:
        exp = tmp_path / "exp.yaml"
        exp.write_text(
            f"workload: {{spec: 'synthetic:input=24,output=8', num_prompts: 2}}\n"
            "sampling: {max_tokens: 8}\n"
            "loads: {operating: {concurrency: 2}}\n"
            f"baseline: {{url: '{url}'}}\n"
            f"candidate: {{url: '{url}'}}\n"
            "speculation: {method: ngram, num_speculative_tokens: 3}\n"
        )
        out = tmp_path / "d"
        code, stdout, _ = run_cli(
            capsys, "--experiment", str(exp), "--output", str(out), "--sweep-points", "3", "--sweep-repeats", "1"
        )
    assert code == 0, stdout
    doc = json.loads((out / "diagnosis.json").read_text())
    assert doc["options"]["concurrency"] == 2 and doc["options"]["workload"] == "synthetic:input=24,output=8"
    assert doc["queueing"]["measured"] and doc["run"]["base_url"] == url


def test_requests_the_server_refuses_stop_the_diagnosis_with_its_reason(capsys, tmp_path):
    with mock_process(max_model_len=512) as url:  # the mock refuses n > 1 with HTTP 400
        code, _, err = run_cli(
            capsys,
            "--url",
            url,
            "--output",
            str(tmp_path / "d"),
            "--extra-body",
            '{"n": 2}',
            "--workload",
            "builtin:qa",
        )
    last = err.strip().splitlines()[-1]
    assert code == 3 and "Traceback" not in err
    assert last.startswith("error:") and "HTTP 400" in last and "--extra-body" in last
    assert (tmp_path / "d" / "requests.jsonl").read_text().strip()  # what was sent is on disk


def test_launch_on_a_port_in_use_is_one_line_and_leaves_no_directory(capsys, tmp_path):
    with mock_process() as url:
        port = url.rsplit(":", 1)[1]
        out = tmp_path / "d"
        server = f"{sys.executable} -m speculab mock-server --port {port}"
        code, _, err = run_cli(capsys, "--launch-cmd", server, "--url", url, "--output", str(out), *SMALL)
    assert code == 2 and one_line_error(err) and f"launched: port {port}" in err and "already in use" in err
    assert not out.exists()


def test_a_diagnosis_whose_requests_failed_exits_4_after_writing_it(capsys, tmp_path):
    """Issue 17's error gate covers diagnose too: the diagnosis is written and printed, then exit 4."""
    out = tmp_path / "d"
    with mock_process(ttft_s=0.01, gap_s=0.01, output_tokens=8, max_model_len=512, fault_5xx_rate=0.3, seed=1) as url:
        code, stdout, err = run_cli(
            capsys, "--url", url, "--output", str(out), "--workload", "synthetic:input=32,output=8", *SMALL
        )
    assert code == 4, stdout + err
    last = err.strip().splitlines()[-1]  # after the phase lines on stderr
    assert last.startswith("error: ") and "more than --max-error-rate 2% allows" in last and "Traceback" not in err
    assert (out / "diagnosis.json").is_file() and (out / "diagnosis.html").is_file()
