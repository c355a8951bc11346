"""`speculab bench` from the command line: bad input is one line and a non-zero exit before any load; a real
run writes its directory; Ctrl-C leaves a valid partial run and exits 130."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from fakes.cli_runner import one_line_error, run_main
from fakes.words import words
from integration.mock_process import mock_child, mock_process
from speculab.harness.servers.process import free_port

FAST = dict(ttft_s=0.01, gap_s=0.002, tokens_per_chunk=2, output_tokens=8)


def run_cli(capsys, *args):
    return run_main(capsys, "bench", *args)


@pytest.fixture(scope="module")
def mock_url():
    with mock_process(**FAST, models=("model-a", "model-b")) as url:
        yield url


@pytest.mark.parametrize(
    "flags,expect",
    [
        (["--concurrency", "abc"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--rate", "-2"], "--rate must be a positive"),
        (["--api", "responses"], "--api must be"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--arrival", "gamma"], "add --rate"),
        (["--rate", "2", "--arrival", "weibull"], "--arrival must be one of"),
        (["--timeout", "0"], "--timeout"),
        (["--extra-body", "{nope"], "--extra-body is not valid JSON"),
        (["--extra-body", '{"stream": false}'], "--extra-body sets 'stream', which speculab sets itself; use --stream"),
        (["--extra-body", '{"temperature": 1}'], "use --temperature instead"),
        (["--workload", "nope:thing"], "unknown workload"),
        (["--tokenizer", "/nonexistent/tok"], "--tokenizer"),
        (["--bogus-flag"], "No such option"),
    ],
)
def test_bad_flags_are_one_line_before_any_load(capsys, tmp_path, flags, expect):
    # the URL is unreachable: a flag error must come first, and nothing is sent
    code, _, err = run_cli(capsys, "--url", f"http://127.0.0.1:{free_port()}", "--output", str(tmp_path / "r"), *flags)
    assert code == 2
    assert expect in one_line_error(err)
    assert not (tmp_path / "r").exists()


def test_malformed_workload_names_file_and_line(capsys, tmp_path):
    wl = tmp_path / "w.jsonl"
    wl.write_text('{"prompt": "ok"}\n{"prompt": \n')
    code, _, err = run_cli(
        capsys, "--url", "http://127.0.0.1:9", "--workload", str(wl), "--output", str(tmp_path / "r")
    )
    line = one_line_error(err)
    assert code == 2 and "w.jsonl" in line and ":2" in line


def test_unreachable_url(capsys, tmp_path):
    code, _, err = run_cli(capsys, "--url", f"http://127.0.0.1:{free_port()}", "--output", str(tmp_path / "r"))
    assert code == 3 and "cannot reach" in one_line_error(err)


def test_wrong_model_lists_served(capsys, tmp_path, mock_url):
    code, _, err = run_cli(capsys, "--url", mock_url, "--model", "gpt-9", "--output", str(tmp_path / "r"))
    line = one_line_error(err)
    assert code == 3 and "model-a, model-b" in line and "--model" in line
    code, _, err = run_cli(capsys, "--url", mock_url, "--output", str(tmp_path / "r"))
    assert code == 3 and "several models" in one_line_error(err)


def test_existing_run_dir_refused(capsys, tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text("{}")
    code, _, err = run_cli(capsys, "--url", "http://127.0.0.1:9", "--output", str(tmp_path / "r"))
    assert code == 2 and "already holds a run" in one_line_error(err)


def test_successful_run_writes_directory_and_hides_key(capsys, tmp_path, mock_url):
    out = tmp_path / "run"
    code, stdout, _ = run_cli(
        capsys,
        "--url",
        mock_url + "/v1",
        "--model",
        "model-b",
        "--api",
        "chat",
        "--workload",
        "builtin:math",
        "--num-prompts",
        "6",
        "--concurrency",
        "3",
        "--output",
        str(out),
        "--api-key",
        "sk-very-secret",
    )
    assert code == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["counts"] == s["counts"] | {"sent": 6, "ok": 6, "error": 0}
    for key in ("ttft_s", "tpot_s", "e2e_s", "chunk_gap_s", "itl_s"):
        assert set(s["metrics"][key]) >= {"mean", "p50", "p90", "p99"}
    assert "mean" in s["metrics"]["tokens_per_chunk"] and "output_tok_s" in s["throughput"]
    assert len((out / "requests.jsonl").read_text().splitlines()) == 6
    for f in out.iterdir():
        assert "sk-very-secret" not in f.read_text()
    assert "TTFT" in stdout


def _running_at(url: str) -> float:
    """The mock's vllm:num_requests_running gauge (0 when /metrics cannot be read yet)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0
    for fam in text_string_to_metric_families(text):
        if fam.name == "vllm:num_requests_running":
            return sum(s.value for s in fam.samples)
    return 0.0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_ctrl_c_cancels_in_flight_and_exits_130(tmp_path, sig):
    out = tmp_path / "run"
    with mock_process(ttft_s=0.05, gap_s=0.05, tokens_per_chunk=1, output_tokens=400) as url:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "speculab",
                "bench",
                "--url",
                url,
                "--num-prompts",
                "40",
                "--concurrency",
                "4",
                "--max-tokens",
                "400",
                "--workload",
                "builtin:qa",
                "--warmup",  # no 20 s warmup requests first: the test is about the measured ones in flight
                "0",
                "--output",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        # Ctrl-C once all 4 requests are running at the server (each takes 20 s): a fixed sleep after the output
        # appeared raced the preflight and the metrics scrape on a slow machine
        deadline = time.monotonic() + 60
        while _running_at(url) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(sig)
        out_text, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    s = json.loads((out / "summary.json").read_text())
    assert s["interrupted"] is True
    c = s["counts"]
    # issue 36: cancelled requests count as neither sent nor failed, in the summary as on screen
    assert c["sent"] == c["ok"] + c["error"] == 0 and c["errors_by_category"] == {} and c["cancelled"] == 4
    assert "cancelled 4" in out_text and "error 0" in out_text and "requests failed" not in out_text
    assert len((out / "requests.jsonl").read_text().splitlines()) == 4
    assert json.loads((out / "manifest.json").read_text())["interrupted"] is True


def test_a_run_whose_requests_fail_exits_4_after_writing_everything(capsys, tmp_path):
    """Issue 17: bench against a server that fails every request exited 0."""
    with mock_process(**FAST, fault_5xx_rate=1.0) as url:
        out = tmp_path / "r"
        args = ("--url", url, "--output", str(out), "--num-prompts", "8", "--workload", "builtin:qa")
        code, stdout, err = run_cli(capsys, *args)
        assert code == 4
        line = one_line_error(err)
        assert "8 of 8 requests failed (100.0%: http 8), more than --max-error-rate 2% allows" in line
        assert str(out) in line and "error 8" in stdout  # the summary was printed first
        assert json.loads((out / "summary.json").read_text())["counts"]["error"] == 8
        # the gate is the user's to set: everything may fail when they say so
        code, _, err = run_cli(capsys, *args[:3], str(tmp_path / "r2"), *args[4:], "--max-error-rate", "1")
        assert code == 0, err
    code, _, err = run_cli(capsys, "--url", url, "--output", str(tmp_path / "r3"), "--max-error-rate", "1.5")
    assert code == 2 and "--max-error-rate" in one_line_error(err)


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.slow
def test_a_server_killed_mid_run_stops_the_bench_with_exit_3_and_keeps_what_was_measured(tmp_path, concurrency):
    """Issue 36: bench against a server killed mid-run kept sending all remaining requests and exited 4; the README
    says 3. It now stops under `run`'s rule (a few refused connections, then /v1/models probed) and says why."""
    slow = {"ttft_s": 0.005, "gap_s": 0.01, "output_tokens": 6}  # ~60 ms requests
    out = tmp_path / "run"
    with mock_child(**slow) as (url, server):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200"}
        cmd = [sys.executable, "-m", "speculab", "bench", "--url", url, "--num-prompts", "400", "--concurrency"]
        cmd += [str(concurrency), "--workload", "builtin:qa", "--output", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        requests = out / "requests.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not requests.is_file() or len(requests.read_text().splitlines()) < 10):
            time.sleep(0.05)
        server.kill()
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    assert "Traceback" not in stderr
    line = one_line_error(stderr)
    assert line.startswith(f"error: endpoint {url} stopped answering mid-run (")
    assert f"what was measured is in {out}" in line
    assert "requests in a row could not connect" in line and "probes of /v1/models" in line
    s = json.loads((out / "summary.json").read_text())
    c = s["counts"]
    assert s["interrupted"] is True and c["ok"] >= 10
    assert c["errors_by_category"].get("connect", 0) >= 3 and c["error"] <= 3 + 2 * concurrency  # not 390 failures
    # a record with the client's evidence (summary.json /2): its numbers; the console words it as the error said it
    (gone,) = [w for w in s["warnings"] if w["kind"] == "server_gone"]
    assert gone["fields"]["failures"] >= 3 and gone["fields"]["probes"] == 3
    said = words([gone])[0].removeprefix("the server stopped answering mid-run, and the run stopped there: ")
    assert f"({said}); what was measured" in line
    manifest = json.loads((out / "manifest.json").read_text())  # the same record (manifest /2)
    assert manifest["interrupted"] is True and manifest["server_gone"] == gone
    assert manifest["schema"] == "speculab.bench.manifest/2"
    assert "results in" in stdout  # the summary was printed before the error
