"""The GPU benchmark script runs end to end on CPU with a tiny model (the integrator runs it on the GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def test_gpu_decode_script_runs_on_cpu(tmp_path: Path):
    env = {**os.environ, "OUT": str(tmp_path)}
    cmd = [sys.executable, "bench/gpu_decode_1b.py", "--device", "cpu", "--tiny", "--iters", "5"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert json.loads((tmp_path / "gpu_decode_1b.json").read_text()) == printed
    assert printed["eager_ms"] > 0 and printed["floor_ms"] > 0 and printed["copy_bandwidth_gbps"] > 0
    # Attending over the whole preallocated cache (what a CUDA graph needs) gives the same logits.
    assert printed["static_vs_eager"]["same_tokens"] and printed["static_vs_eager"]["max_rel_logit_diff"] <= 1e-5
    assert printed["weight_bytes"] == printed["num_parameters"] * 4  # fp32, tied: every parameter read once
    assert not any(k.endswith("_error") for k in printed), printed
