"""bench/client_overhead.py runs end to end on a tiny load and matches every chunk to the server's write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_client_overhead_smoke(tmp_path: Path):
    out = tmp_path / "res.json"
    cmd = [sys.executable, "bench/client_overhead.py", "--levels", "2,4", "--rounds", "2", "--ttft-ms", "5"]
    cmd += ["--gap-ms", "5", "--output-tokens", "8", "--gc", "off", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["machine"]["nproc"] >= 1 and res["machine"]["cpu_model"]
    for level in res["levels"]:
        n = level["concurrency"] * 2
        assert level["requests"] == level["ok"] == n and level["requests_unmatched"] == 0
        assert level["chunks"] == n * 4  # 8 tokens, 2 per chunk: every chunk matched to its write
        # a chunk cannot be seen before it was written (one CLOCK_MONOTONIC for both processes)
        assert level["chunk_error_ms"]["p50"] >= 0 and level["client_peak_rss_mb"] > 0
