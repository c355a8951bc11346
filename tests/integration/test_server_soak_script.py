"""bench/server_soak.py runs end to end (a short smoke run on the demo model) and finds no 5xx."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_server_soak_script_smoke():
    cmd = [sys.executable, "bench/server_soak.py", "--rounds", "1", "--soak-s", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["refuse_10mb"]["statuses"] == [413] and res["refuse_1mb_header"]["statuses"] == [431]
    assert res["refuse_long_prompt"]["statuses"] == [400] and res["refuse_10mb"]["bystander_statuses"] == [200]
    assert res["soak"]["server_errors_5xx"] == 0 and res["health_at_end"] == 200


@pytest.mark.slow
def test_server_soak_abuse_smoke():
    """A few seconds of the abuse soak: fuzzed bodies are refused with 4xx, dropped streams free their slots (the
    gauges are back to 0 once the load stops), slow-header connections block nobody, and nothing is a 5xx."""
    cmd = [sys.executable, "bench/server_soak.py", "--rounds", "0", "--soak-s", "0", "--abuse-s", "3", "--window-s",
           "3", "--warmup-s", "1", "--streams", "4", "--slow-headers", "3", "--fuzz-share", "0.4",
           "--disconnect-share", "0.2"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])["abuse_soak"]
    clean, abuse = res["clean"], res["abuse"]
    assert set(clean["statuses"]) == {"valid 200"} and clean["valid_completed"] > 0
    fuzz = {k: n for k, n in abuse["statuses"].items() if k.startswith("fuzz")}
    assert any(k.split()[-1].startswith("4") for k in fuzz), abuse["statuses"]
    assert abuse["statuses"].get("disconnect 200", 0) > 0 and abuse["valid_completed"] > 0
    assert clean["server_errors_5xx"] == abuse["server_errors_5xx"] == 0
    assert res["gauges_back_to_0"] and res["server_alive"] and res["health_after"] == 200
