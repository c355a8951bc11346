"""bench/client_soak.py runs end to end: a few seconds of `speculab bench` against the mock, RSS of both sampled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_client_soak_smoke(tmp_path: Path):
    out = tmp_path / "soak.json"
    cmd = [sys.executable, "bench/client_soak.py", "--minutes", "0.05", "--interval-s", "0.5", "--concurrency", "4"]
    cmd += ["--warmup-requests", "4", "--keep", str(tmp_path / "run"), "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == res
    r = res["requests"]
    assert r["sent"] > 0 and r["sent"] == r["ok"] and r["error"] == 0 and r["warmup"] == 4
    lines = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
    assert len(lines) == r["sent"] + r["warmup"] and res["records_timeline"][-1][1] <= len(lines)
    for proc_rss in (res["client"], res["server"]):
        assert proc_rss["samples"] >= 2 and proc_rss["rss_end_mb"] > 0 and isinstance(proc_rss["flat"], bool)
    assert res["requests_per_s"] > 0 and res["verdict"].startswith("client RSS")
