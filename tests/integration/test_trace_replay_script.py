"""bench/trace_replay.py runs end to end on a short trace (the figures in bench/README.md come from a longer run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_trace_replay_script_measures_both_pacing_modes(tmp_path: Path) -> None:
    out = tmp_path / "res.json"
    cmd = [sys.executable, "bench/trace_replay.py", "--requests", "40", "--rate", "200", "--burst", "5"]
    cmd += ["--rounds", "1", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    for mode in ("spin", "sleep"):
        (r,) = res["rounds"][mode]
        assert r["schedule_max_abs_error_ms"] < 1e-3  # the schedule is the trace's, exactly
        assert r["send_error_ms"]["p50"] >= 0 and r["client_cpu_s"] > 0
