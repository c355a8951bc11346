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


@pytest.mark.slow
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
    if "transformers_eager_ms" in printed:  # transformers ran on our very tensors
        assert printed["transformers_prefill_max_rel_logit_diff"] <= 1e-5


@pytest.mark.slow
def test_engine_vs_transformers_runs_and_outputs_agree(tmp_path: Path):
    pytest.importorskip("transformers")
    out = tmp_path / "res.json"
    cmd = [sys.executable, "bench/engine_vs_transformers.py", "--tiny", "--concurrency", "1", "3"]
    cmd += ["--max-tokens", "5", "--repeats", "1", "--threads", "1", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert set(res["tokens_per_s"]) == {"1", "3"}
    for tps in res["tokens_per_s"].values():
        assert {"model-only", "hf-batched", "hf-sequential"} <= set(tps)
        assert all(v > 0 for k, v in tps.items() if k != "ours_row")
    # Greedy float32 outputs of our model (and engine, when present) equal transformers' token for token.
    assert res["outputs_identical"] == {"1": True, "3": True}


def test_loop_lag_floor_runs_and_writes_its_rounds(tmp_path: Path):
    """A smoke run of bench/loop_lag_floor.py (figures: bench/README.md); no timing is asserted."""
    out = tmp_path / "floor.json"
    cmd = [
        sys.executable,
        "bench/loop_lag_floor.py",
        "--seconds",
        "0.2",
        "--rounds",
        "1",
        "--busy",
        "1",
        "--json",
        str(out),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": "src"}, timeout=60)
    d = json.loads(out.read_text())
    assert set(d["series"]) == {"busy=0", "busy=1"} and all(len(v) == 1 for v in d["series"].values())


def test_burst_ttft_joins_every_request_with_the_truth_log(tmp_path: Path):
    """A smoke run of bench/burst_ttft.py (figures: bench/README.md): one burst of 2 streams, every request found
    in the mock's truth log; no timing is asserted."""
    out = tmp_path / "burst.json"
    cmd = [sys.executable, "bench/burst_ttft.py", "--streams", "2", "--repeats", "1", "--json", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": "src"}, timeout=120)
    level = json.loads(out.read_text())["levels"]["2"]["speculab"]
    assert level["all"]["n"] == 2 and level["missing"] == 0
