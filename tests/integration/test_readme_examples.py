"""README.md's demo-server block, run as written: bench, serve with speculation, compare, Spec-Bench through bench,
diagnose, init -> run --dry-run -> run, each exiting 0 against `speculab serve demo` (issue 24's "done means").

Only the ports and the starter's size change (free ports instead of 8000/8001, which another process may hold;
`--minutes 0.5`, init's smallest starter, instead of 3, and that starter's `repeats: 3` edited to 1 and its
`max_tokens: 64` to 32 before the dry run, as its comments invite: the workflow is what is tested, and the suite's
time is bounded; one repeat halves the run's launches and requests, and launch mode's ABBA over two repeats is
test_experiment_lifecycle's; shorter answers halve the demo engine's decoding, most of the run's CPU), `speculab` is
this checkout's (a shim on PATH, as are `python` for the starter's launch command). The commands run in a scratch
directory that holds the clone's shipped files they name (`examples/`, linked), so every path is the README's and
every file it reads is the one a clean clone has: each file path in the block must exist in the clone (the
Spec-Bench line reads the shipped sample, examples/spec-bench/README.md). About three minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from speculab.harness.servers.process import free_port

ROOT = Path(__file__).resolve().parents[2]
MARKER = "tests/integration/test_readme_examples.py` runs this block"


def readme_block() -> list[str]:
    """The command lines of README's demo-server block (comment lines dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index(MARKER) :]
    block = re.search(r"```bash\n(.*?)```", after, re.S)
    assert block is not None, "README.md: the demo-server block is gone"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _shims(bin_dir: Path) -> None:
    bin_dir.mkdir()
    python = shlex.quote(sys.executable)
    for name, cmd in (("speculab", f"{python} -m speculab"), ("python", python)):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {cmd} "$@"\n')
        (bin_dir / name).chmod(0o755)


def _files_read(lines: list[str]) -> list[str]:
    """The files the block's commands read from the clone: `--workload KIND:PATH` and `PATH.jsonl` words."""
    words = [w for ln in lines for w in shlex.split(ln.split("   #")[0])]
    paths = [w.split(":", 1)[1] for w in words if re.match(r"^(specbench|mtbench|sharegpt|trace|jsonl):", w)]
    return [*paths, *(w for w in words if w.endswith(".jsonl") and ":" not in w)]


def _clone_files(cwd: Path, lines: list[str]) -> None:
    """The shipped files the block reads, where a clean clone has them (relative to its root): linked, not written."""
    read = _files_read(lines)
    assert read, "the README block reads no file: update _files_read"
    for rel in read:
        assert (ROOT / rel).is_file(), f"README block reads {rel}, which a clean clone does not have"
        top = Path(rel).parts[0]
        if not (cwd / top).exists():
            (cwd / top).symlink_to(ROOT / top, target_is_directory=True)


def _one_repeat(starter: Path) -> list[tuple[str, str]]:
    """The starter init wrote, edited to one repeat and 32-token answers (its size, as `--minutes` is); the candidates
    it lists."""
    text = starter.read_text(encoding="utf-8")
    assert re.search(r"^repeats: 3 ", text, re.M), "init's starter no longer has `repeats: 3`: update the edit"
    assert re.search(r"^  max_tokens: 64$", text, re.M), "init's starter's `max_tokens: 64` changed: update the edit"
    text = re.sub(r"^repeats: 3 ", "repeats: 1 ", text, flags=re.M)
    starter.write_text(re.sub(r"^  max_tokens: 64$", "  max_tokens: 32", text, flags=re.M), encoding="utf-8")
    return re.findall(r"^  - \{method: (\w+), num_speculative_tokens: (\d+)", text, re.M)


def _wait_ready(port: int, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server on port {port} exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the server on port {port} did not become ready")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_readme_demo_block_runs_as_written(tmp_path: Path) -> None:
    lines = readme_block()
    assert any("speculab run experiment.yaml --dry-run" in ln for ln in lines)
    assert any("--minutes 3 " in ln for ln in lines), "README's init line changed: update the size swapped below"
    _shims(tmp_path / "bin")
    _clone_files(tmp_path, lines)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    ports = {"8000": str(free_port()), "8001": str(free_port())}

    def port_swapped(line: str) -> str:
        line = line.replace("--minutes 3 ", "--minutes 0.5 ")
        return re.sub(r"\b(8000|8001)\b", lambda m: ports[m.group(1)], line)

    def serve(cmd: str) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, shell=True, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        servers.append(proc)
        return proc

    servers: list[subprocess.Popen] = []
    candidates: list[tuple[str, str]] = []
    try:
        plain = serve(f"exec speculab serve demo --port {ports['8000']}")
        _wait_ready(int(ports["8000"]), plain)
        for line in lines:
            cmd = port_swapped(line.split("   #")[0].strip())
            if cmd.endswith("&"):  # a server beside the plain one
                _wait_ready(int(ports["8001"]), serve("exec " + cmd.rstrip("&").strip()))
                continue
            done = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stderr[-3000:]}"
            assert "Traceback" not in done.stderr, done.stderr
            if "then stop the server on port 8000" in line:
                _stop(plain)
                candidates = _one_repeat(tmp_path / "experiment.yaml")
            if "--dry-run" in cmd:
                assert "estimated duration: ~" in done.stderr and "requests: " in done.stderr, done.stderr
    finally:
        for proc in servers:
            _stop(proc)
    # issue 36: the two demo servers say what they run, so compare labels the n-gram arm and verifies the change
    pair = json.loads((tmp_path / "runs" / "plain-vs-ngram" / "summary.json").read_text())
    assert [(a["method"], a["num_speculative_tokens"]) for a in pair["arms"]] == [(None, None), ("ngram", 4)]
    assert pair["candidates"][0]["single_change"] is True, pair["candidates"][0]["diff_lines"]
    summary = json.loads((tmp_path / "runs" / "ab1" / "summary.json").read_text())
    assert summary["levels"], "the A/B run wrote no levels"
    # every candidate the starter listed ran, at every load, once (the edit changed the repeats and nothing else)
    assert len(candidates) >= 2 and [c["name"] for c in summary["candidates"]] == [f"{m}-k{k}" for m, k in candidates]
    for level in summary["levels"]:
        assert {a["arm"]: a["repeats"] for a in level["arms"]} == dict.fromkeys(
            ["baseline", *(f"{m}-k{k}" for m, k in candidates)], 1
        )
    fitted = json.loads((tmp_path / "runs" / "plain" / "manifest.json").read_text())["fit"]
    assert fitted["context"] == 512 and fitted["left_out"]  # builtin:grounded has prompts too long for the demo
