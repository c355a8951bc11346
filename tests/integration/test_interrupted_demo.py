"""Issue 36: an interrupted `speculab demo` recommends nothing. Ctrl-C once the plain arm is answering: the run exits
130 and prints no `recommendation: ship…` or `keep plain…` line, but what finished, what did not, and how to finish
it; an arm that never ran is "not run", with no other reason."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculab.harness.results.ab_dir import load_inputs

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.slow
def test_an_interrupted_demo_prints_no_ship_or_keep_plain_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "demo"
    proc = subprocess.Popen(
        [sys.executable, "-m", "speculab", "demo", "--quick", "--output", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"},
    )
    # interrupt mid-run: once the first arm has answered a few measured requests (about 25 s in on a 2-core machine)
    requests = out / "runs" / "baseline" / "c1" / "r1" / "requests.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if requests.is_file() and len(requests.read_text(encoding="utf-8").splitlines()) >= 3:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    lines = stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith(("recommendation: ship", "recommendation: keep plain"))], stdout
    assert "recommendation: none yet: the run did not finish" in stdout
    assert any(ln.startswith("  not finished: ") for ln in lines), stdout
    assert f"finish it: speculab run --resume {out}" in stdout
    # arms that never ran say so, and nothing else about themselves
    inputs = load_inputs(out)
    never = [
        a.label for a in inputs.candidates if not inputs.runs_for(a.name, "c1") and not inputs.runs_for(a.name, "c4")
    ]
    assert never, "the interrupt came too late to leave an arm unrun"
    for label in never:
        assert f"{label}: not run" in lines, stdout
    assert "acceptance unknown (engine reports none)" not in stdout
