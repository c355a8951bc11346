"""SpecForge bench_model_speedup lines (harness.imports.aggregates.specforge), on a file of its documented layout
(tests/fixtures/imports/specforge/README.md): a row per config and benchmark, acceptance length where it speculates."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.aggregates import specforge
from speculab.harness.imports.registry import summary_reader
from speculab.harness.imports.summaries.summary import LENGTH, POOLED

FILE = Path(__file__).resolve().parents[4] / "fixtures" / "imports" / "specforge" / "bench_model_speedup.jsonl"


def test_each_line_is_a_row_at_its_batch_size_with_its_throughput() -> None:
    assert summary_reader(FILE) is specforge
    runs = specforge.read(FILE)
    assert [r.row.index for r in runs if r.row] == [1, 2, 3, 4]
    assert {r.level.key for r in runs} == {"c8"}
    base, spec = runs[1], runs[3]  # gsm8k: steps 0, then 3
    assert base.row is not None and base.row.configuration == (
        ("steps", "0"),
        ("topk", "0"),
        ("num_draft_tokens", "0"),
        ("benchmark", "gsm8k"),
    )
    assert base.aggregates.get("output_tok_s") == 691.19 and spec.aggregates.get("output_tok_s") == 1642.67
    assert base.aggregates.get("tpot_median_s") is None  # SpecForge writes no latency
    assert base.acceptance == ()  # steps 0: the script's 1.0, not a measurement
    (stated,) = spec.acceptance
    assert (stated.kind, stated.value, stated.weighting, stated.source) == (LENGTH, 3.41, POOLED, "acc_length")


def test_a_line_without_a_batch_size_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    lines = FILE.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1].replace('"batch_size": 8', '"batch_size": null') + "\n")
    with pytest.raises(
        UserError,
        match=r"read as a SpecForge bench_model_speedup result \(its --output JSONL\): line 2: no `batch_size`",
    ):
        specforge.read(path)
