"""bench/spec_decode.py runs end to end on tiny random models, and every speculative row (n-gram, draft, EAGLE, fixed
and adaptive k) reproduces plain greedy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_spec_decode_bench_smoke(tmp_path: Path):
    out = tmp_path / "res.json"
    cmd = [sys.executable, "bench/spec_decode.py", "--tiny", "--threads", "1", "--num-prompts", "2"]
    cmd += [
        "--concurrency",
        "1",
        "2",
        "--max-tokens",
        "8",
        "--rounds",
        "2",
        "--policy-clock",
        "cpu",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert set(res["results"]) == {"input-grounded", "open-ended"}
    for by_c in res["results"].values():
        assert set(by_c) == {"1", "2"}
        engine_rows = {"plain", "ngram", "draft", "eagle", "eagle-adaptive", "ngram-adaptive"}
        assert engine_rows | {"hf-plain", "hf-prompt-lookup", "hf-assisted"} <= set(by_c["1"])
        for rows in by_c.values():
            for name, row in rows.items():
                assert row["tokens_per_s"] > 0, name
                if name != "plain":
                    assert row["outputs_equal_plain"], name  # greedy fp32: speculation changes nothing
            assert rows["draft"]["drafts"] > 0 and rows["eagle"]["drafts"] > 0
            assert sum(rows["eagle-adaptive"]["steps_by_k"]) > 0
    assert set(res["goals"]) == {"input-grounded", "open-ended"}
    for clock in ("wall", "cpu"):
        assert "met_adaptive_ge_0.95x_plain_at_c2" in res["goals"]["open-ended"][clock]
