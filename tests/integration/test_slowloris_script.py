"""bench/slowloris.py runs end to end (a few hundred slow connections for a few seconds on the demo model): the
server stays up, answers the probes, closes and counts the slow connections and writes almost no log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_slowloris_script_smoke(tmp_path):
    cmd = [sys.executable, "bench/slowloris.py", "--connections", "200", "--duration-s", "6", "--probe-at-s", "4"]
    cmd += ["--probe-every-s", "2", "--receive-timeout-s", "2", "--log", str(tmp_path / "server.log")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["server_alive"] and res["probe_at"]["status"] == 200 and res["health_after"]["status"] == 200
    assert res["metrics"]["request_receive_timeouts_total"] >= 200
    assert sum(a["answered_408"] + a["closed_by_server"] for a in res["attackers"]) >= 200
    assert res["log_growth_bytes"] < 2000
