"""`speculab compare` of inference-perf report directories and GenAI-Perf profile exports through the CLI (issue 51,
item 4): the candidate's files show TPOT 1.5x faster (tests/fixtures/imports/inference-perf/README.md,
tests/fixtures/imports/genai-perf/README.md), and compare says so with exit 0, per request, each inference-perf stage
a load; inference-perf's stage reports alone compare at the run level, stage by stage."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from fakes.cli_runner import run_main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "imports"


def _tpots(out: Path) -> list[dict]:
    """Each load's TPOT comparison, as compare wrote them to OUT/summary.json."""
    s = json.loads((out / "summary.json").read_text())
    return [next(m for m in lv["comparisons"][0]["metrics"] if m["metric"] == "tpot_s") for lv in s["levels"]]


@pytest.mark.parametrize(
    ("a", "b", "loads"),
    [
        (FIX / "inference-perf" / "baseline", FIX / "inference-perf" / "candidate", 2),  # stages at 4 and 8 req/s
        (
            FIX / "genai-perf" / "baseline" / "profile_export.json",
            FIX / "genai-perf" / "candidate" / "profile_export.json",
            1,
        ),
    ],
    ids=["inference-perf", "genai-perf"],
)
def test_the_candidate_is_faster_per_request_at_every_load(
    capsys, tmp_path: Path, a: Path, b: Path, loads: int
) -> None:
    code, stdout, err = run_main(capsys, "compare", str(a), str(b), "--output", str(tmp_path / "cmp"))
    assert code == 0, err
    tpots = _tpots(tmp_path / "cmp")
    assert len(tpots) == loads
    for tp in tpots:  # scripted: 30 ms vs 20 ms a token
        assert abs(tp["speedup"] / 1.5 - 1) < 0.05 and tp["n_pairs"] >= 12, tp
    assert "their prompts equal" in stdout + err


def test_stage_reports_alone_compare_stage_by_stage_at_the_run_level(capsys, tmp_path: Path) -> None:
    sides = []
    for side in ("baseline", "candidate"):
        d = tmp_path / side
        d.mkdir()
        for f in (FIX / "inference-perf" / side).glob("stage_*_lifecycle_metrics.json"):
            shutil.copy(f, d / f.name)  # the default report: no per-request file
        shutil.copy(FIX / "inference-perf" / side / "config.yaml", d / "config.yaml")
        sides.append(str(d))
    code, stdout, err = run_main(capsys, "compare", *sides, "--output", str(tmp_path / "cmp"))
    assert code == 0, err
    assert "the unit is the run" in stdout and "4 req/s" in stdout and "8 req/s" in stdout
    # inference-perf's own TPOT (over its tokenizer's count): B's is 2/3 of A's at both stages
    ratios = [float(m) for m in re.findall(r"TPOT median .*?(\d\.\d{3}) ", stdout)]
    assert len(ratios) == 2 and all(0.6 < r < 0.72 for r in ratios), stdout
