"""bench/server_soak.py runs end to end (a short smoke run on the demo model) and finds no 5xx."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_server_soak_script_smoke():
    cmd = [sys.executable, "bench/server_soak.py", "--rounds", "1", "--soak-s", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["refuse_10mb"]["statuses"] == [413] and res["refuse_1mb_header"]["statuses"] == [431]
    assert res["refuse_long_prompt"]["statuses"] == [400] and res["refuse_10mb"]["bystander_statuses"] == [200]
    assert res["soak"]["server_errors_5xx"] == 0 and res["health_at_end"] == 200
