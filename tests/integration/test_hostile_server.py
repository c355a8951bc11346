"""The hostile-server fuzz, in CI (issue 25): `bench`, two-URL `run` and `diagnose` against a server whose every
answer is broken in a different way (tests/fakes/hostile_server.py: ~1,000 kinds across streams, bodies,
/v1/models, /version and /metrics). Every command must exit with a defined code and one `error:` line at most,
print no traceback, leave a complete results directory, and keep the client's peak memory under its cap; and
every entry of the catalogue must have been answered, so a kind that stopped being served cannot pass unseen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fakes.cli_runner import one_line_error, run_main
from fakes.hostile_server import BODY, METRICS, MODEL, MODELS, STREAM, VERSION, hostile_server_in_thread
from speculab.errors import EndpointError
from speculab.harness.client.endpoint import EndpointConfig
from speculab.harness.client.probe import probe_endpoint
from speculab.harness.client.request import make_session
from speculab.harness.results.strict_json import dumps
from speculab.harness.servers.scrape import scrape_metrics

# A client reading 16 broken answers at once, endless lines and 70 MB bodies among them, holds at most one capped
# line (4 MB) or body (64 MB) per request: without the caps one endless line alone grew it past 300 MB.
MEMORY_CAP_BYTES = 256 * 1024 * 1024
DEFINED_EXITS = {0, 3, 4}  # ok; the endpoint cannot be used; more requests failed than --max-error-rate allows
SMALL = ["--workload", "synthetic:input=8,output=4", "--max-tokens", "4"]


@pytest.fixture(scope="module")
def hostile():
    with hostile_server_in_thread() as (url, server):
        yield url, server


# Runs `python -m speculab ARGV` and, at exit, writes the process's own peak RSS (VmHWM: the high-water mark of its
# address space since exec) to the file named first. Not wait4's ru_maxrss: on Linux that also counts the copy of the
# parent made at fork, so after a few hundred tests it reports the pytest process's size (~600 MB), not the CLI's.
_PEAK_RSS_RUNNER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def peak():
    kb = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    open(out, "w").write(kb)
atexit.register(peak)
sys.argv[0] = "speculab"
runpy.run_module("speculab", run_name="__main__", alter_sys=True)
"""


def cli(*argv: str, out_dir: Path, limit_s: float = 150.0) -> tuple[int, str, int]:
    """`speculab ARGV` in a child process -> (exit code, stdout + stderr, the child's peak RSS in bytes)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200"}
    log = out_dir.parent / f"{out_dir.name}.log"
    hwm = out_dir.parent / f"{out_dir.name}.peak-rss-kb"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-c", _PEAK_RSS_RUNNER, str(hwm), *argv], stdout=f,
                                stderr=subprocess.STDOUT, env=env)  # fmt: skip
        killer = threading.Timer(limit_s, proc.kill)  # a hang fails the test (exit -9), it never blocks CI
        killer.start()
        proc.wait()
        killer.cancel()
    rss = int(hwm.read_text()) * 1024 if hwm.is_file() else 0  # no file: killed (exit -9), which fails the exit check
    return proc.returncode, log.read_text(errors="replace"), rss


def check_outcome(rc: int, output: str, rss: int) -> None:
    assert rc in DEFINED_EXITS, (rc, output[-3000:])
    assert "Traceback" not in output, output[-6000:]
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert len(errors) == (rc != 0), output[-3000:]
    assert rss < MEMORY_CAP_BYTES, f"client peak RSS {rss / 2**20:.0f} MB"


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_bench_meets_every_broken_stream_and_body(hostile, tmp_path):
    url, server = hostile
    runs = [
        ("completions", "--stream", len(STREAM)),
        ("chat", "--stream", len(STREAM)),
        ("completions", "--no-stream", len(BODY)),
    ]
    for api, stream, n in runs:
        out = tmp_path / f"{api}{stream}"
        rc, output, rss = cli(
            "bench", "--url", url, "--output", str(out), "--api", api, stream, *SMALL, "--num-prompts", str(n),
            "--concurrency", "16", "--timeout", "3", out_dir=out,
        )  # fmt: skip
        check_outcome(rc, output, rss)
        assert rc == 4  # most answers are broken: the error gate says so, after writing everything
        summary = json.loads((out / "summary.json").read_text())
        assert summary["counts"]["sent"] == n == summary["counts"]["ok"] + summary["counts"]["error"]
        recs = records(out / "requests.jsonl")
        assert len(recs) == n and json.loads((out / "manifest.json").read_text())
        # a broken answer is a categorised error, never an absurd number
        assert all(r["completion_tokens"] is None or 0 <= r["completion_tokens"] <= 10**9 for r in recs)
        assert not [r["error"]["message"] for r in recs if r["error"] and "\n" in r["error"]["message"]]
        assert {r["error"]["category"] for r in recs if r["error"]} <= {
            "http", "timeout", "dropped", "malformed", "error_event",
        }  # fmt: skip
    assert {b.name for b in STREAM + BODY} <= server.served


@pytest.mark.slow
def test_two_url_run_meets_broken_answers_in_both_arms(hostile, tmp_path):
    url, _ = hostile
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"""
workload: {{spec: "synthetic:input=8,output=4", num_prompts: 60}}
sampling: {{max_tokens: 4}}
loads: {{operating: {{concurrency: 8}}}}
baseline: {{url: "{url}/arm-a"}}
candidate: {{url: "{url}/arm-b"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""
    )
    out = tmp_path / "ab"
    rc, output, rss = cli("run", str(exp), "--output", str(out), out_dir=out)
    check_outcome(rc, output, rss)
    for name in ("inputs.json", "summary.json", "report.html"):
        assert (out / name).is_file(), name
    repeats = sorted(p for p in (out / "runs").glob("*/*/r*") if p.is_dir())
    assert len(repeats) == 4  # two arms x two loads (concurrency 1 and 8), one repeat each
    for rep in repeats:
        measured = [r for r in records(rep / "requests.jsonl") if not r["warmup"]]
        assert (rep / "run.json").is_file() and len(measured) == 60, rep


def test_diagnose_meets_broken_answers(hostile, tmp_path):
    url, _ = hostile
    out = tmp_path / "d"
    rc, output, rss = cli(
        "diagnose", "--url", url, "--output", str(out), *SMALL, "--sweep-points", "3", "--sweep-repeats", "2",
        "--num-prompts", "16", "--timeout", "3", out_dir=out,
    )  # fmt: skip
    check_outcome(rc, output, rss)
    for name in ("diagnosis.json", "diagnosis.html", "manifest.json", "requests.jsonl"):
        assert (out / name).is_file(), name
    assert json.loads((out / "diagnosis.json").read_text())["interrupted"] is False


async def test_every_broken_model_list_version_and_metrics_is_read_or_refused(hostile):
    """/v1/models is refused in one EndpointError or read into a ServerInfo that can be saved; /version and /metrics
    are read or left out (None), never a traceback, never a number that is not finite."""
    url, server = hostile
    async with make_session() as session:
        for i in range(len(MODELS)):
            try:
                info = await probe_endpoint(session, EndpointConfig(f"{url}/models-{i}", MODEL))
            except EndpointError as e:
                assert "\n" not in str(e)
                continue
            dumps(info.to_dict()).encode("utf-8")  # what manifest.json holds: strict JSON, writable
        for _ in range(len(METRICS)):
            snap = await scrape_metrics(session, url)
            if snap is not None:
                dumps(snap.to_dict()).encode("utf-8")
                assert all(abs(s.value) <= 1e300 for s in snap.samples)
    assert {b.name for b in MODELS + VERSION + METRICS} <= server.served


@pytest.mark.parametrize("i", range(1, len(MODELS)))
def test_a_broken_model_list_is_one_line_exit_3_or_a_run(hostile, capsys, tmp_path, i):
    url, _ = hostile
    out = tmp_path / "r"
    code, _, err = run_main(
        capsys, "bench", "--url", f"{url}/models-{i}", "--model", MODEL, "--output", str(out), *SMALL,
        "--num-prompts", "4", "--timeout", "3", "--max-error-rate", "1",
    )  # fmt: skip
    if code == 3:
        assert not out.exists() and one_line_error(err)
    else:  # the list still names the model (beside junk): the run goes on
        assert code == 0 and (out / "summary.json").is_file(), err


def test_diagnose_refuses_a_context_no_model_has(hostile, capsys, tmp_path):
    """A card saying max_model_len 10^30 would have the prefill sweep build prompts no machine can hold."""
    url, _ = hostile
    i = next(i for i, b in enumerate(MODELS) if b.kind == "huge-context")
    code, _, err = run_main(capsys, "diagnose", "--url", f"{url}/models-{i}", "--output", str(tmp_path / "d"), *SMALL)
    assert code == 3 and "context of 1e+30 tokens" in one_line_error(err)


@pytest.mark.parametrize("i", range(len(MODELS)))
@pytest.mark.slow
def test_init_looks_at_a_broken_server_and_writes_a_starter_or_refuses_in_one_line(hostile, capsys, tmp_path, i):
    url, _ = hostile
    out = tmp_path / "exp.yaml"
    code, _, err = run_main(capsys, "init", "--url", f"{url}/models-{i}", "--output", str(out))
    if code == 3:
        assert not out.exists() and one_line_error(err)
    else:
        assert code == 0 and out.is_file() and "Traceback" not in err, err
