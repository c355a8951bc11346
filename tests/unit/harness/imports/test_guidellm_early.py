"""GuideLLM 0.2-0.3's layout (#37 item 5), on real files GuideLLM 0.3.1 wrote (tests/fixtures/imports/guidellm-0.3):
read per request under 0.4's names, named as that layout; with `--output-sampling 0`, a summary-only file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.words import words
from speculab.harness.imports import guidellm_benchmarks
from speculab.harness.imports.older import guidellm_early
from speculab.harness.imports.registry import result_format
from speculab.harness.imports.summaries.read import read_side

G03 = Path(__file__).resolve().parents[3] / "fixtures" / "imports" / "guidellm-0.3"


@pytest.mark.parametrize("name", ["baseline.json", "v0.2.1-baseline.json"])  # GuideLLM 0.3.1, 0.2.1
def test_a_0_2_or_0_3_file_is_read_per_request(name: str) -> None:
    raw = json.loads((G03 / name).read_text())
    b = raw["benchmarks"][0]
    assert "metadata" not in raw and guidellm_early.is_early(b)  # as 0.3.1 wrote it
    assert result_format(G03 / name) == "guidellm"
    run = guidellm_benchmarks.read(G03 / name)
    assert run.level.key == "c4" and len(run.records) == 20
    first = min(b["requests"]["successful"], key=lambda r: r["scheduler_info"]["queued_time"])
    r = run.records[0]
    assert r.sent_s == first["start_time"] and r.end_s == pytest.approx(first["end_time"], abs=1e-3)
    assert r.chunks[0].t_s - r.sent_s == pytest.approx(first["time_to_first_token_ms"] / 1e3)
    assert r.output_text == first["output"] and r.completion_tokens == first["output_tokens"] == 16
    assert run.items[0].prompt == first["prompt"]  # the prompt kept as text: the runs pair by prompt
    assert "the layout of GuideLLM 0.2-0.3" in words(run.notes)[0]


def test_a_0_4_request_is_unchanged() -> None:
    r = {"request_start_time": 1.0, "start_time": 5.0, "prompt": "x"}
    assert guidellm_early.upgrade_request(r) == r


def test_output_sampling_0_is_a_summary() -> None:
    raw = json.loads((G03 / "baseline-summary.json").read_text())
    assert not any(raw["benchmarks"][0]["requests"][k] for k in ("successful", "errored", "incomplete"))
    (run,) = read_side(G03 / "baseline-summary.json") or ()
    m = raw["benchmarks"][0]["metrics"]
    assert not run.per_request and run.level.key == "c4" and (run.completed, run.failed) == (20, 0)
    tpot_ms = m["time_per_output_token_ms"]["successful"]["median"]
    assert run.aggregates.get("tpot_median_s") == pytest.approx(tpot_ms / 1e3)
    assert run.aggregates.get("e2e_p99_s") == pytest.approx(m["request_latency"]["successful"]["percentiles"]["p99"])
    (full,) = read_side(G03 / "baseline.json") or ()
    assert full.per_request
