"""bench/client_overhead.py runs end to end on a tiny load and matches every chunk to the server's write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("client", "workers"), [("harness", "1"), ("raw", "1"), ("harness", "1,2")])
@pytest.mark.slow
def test_client_overhead_smoke(tmp_path: Path, client: str, workers: str):
    out = tmp_path / "res.json"
    cmd = [sys.executable, "bench/client_overhead.py", "--levels", "2,4", "--rounds", "3", "--ttft-ms", "5"]
    cmd += ["--client", client, "--workers", workers]
    cmd += ["--gap-ms", "5", "--output-tokens", "8", "--gc", "off", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["machine"]["nproc"] >= 1 and res["machine"]["cpu_model"]
    for level in res["levels"]:
        n = level["concurrency"] * 3
        assert level["requests"] == level["ok"] == n and level["requests_unmatched"] == 0
        assert level["chunks_matched"] == n * 4  # 8 tokens, 2 per chunk: every chunk matched to its write
        assert 0 < level["chunks"] <= n * 4  # those that arrived while all streams ran
        # a chunk cannot be seen long before it was written (one CLOCK_MONOTONIC for both processes; the mock
        # stamps a write once it returns, so a read can precede the stamp by microseconds)
        assert level["chunk_error_ms"]["p50"] > -0.5 and level["client_peak_rss_mb"] > 0
    counts = [int(w) for w in workers.split(",")]
    assert [(lv["concurrency"], lv["workers"]) for lv in res["levels"]] == [(c, w) for c in (2, 4) for w in counts]
    assert set(res["max_sustained_streams_by_workers"]) == {str(w) for w in counts}
    if 2 in counts:  # two processes hold more memory than one: their RSS is counted
        by = {(lv["concurrency"], lv["workers"]): lv for lv in res["levels"]}
        assert by[(4, 2)]["client_peak_rss_mb"] > by[(4, 1)]["client_peak_rss_mb"]
