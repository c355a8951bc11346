"""ImportedRun: the pairing check's `input_lens` default to the measured records' prompt tokens (what every file
reader states); a bench directory's own, given, are kept."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from speculab.harness.design import LevelSpec
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.records import RequestRecord


def _rec(i: int, prompt_tokens: int | None, warmup: bool = False) -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=0.0, sent_s=0.0, end_s=1.0, prompt_tokens=prompt_tokens, warmup=warmup)


def _run(records: tuple[RequestRecord, ...], **given) -> ImportedRun:
    return ImportedRun(Path("f"), "tool", LevelSpec("concurrency", 1), records, **given)


def test_input_lens_default_to_the_measured_records_prompt_tokens() -> None:
    run = _run((_rec(0, 5, warmup=True), _rec(0, 10), _rec(1, None), _rec(2, 12)))
    assert run.input_lens == (10, None, 12)
    assert replace(run, label="x").input_lens == (10, None, 12)


def test_given_input_lens_are_kept() -> None:
    assert _run((_rec(0, 10), _rec(1, 11)), input_lens=(10, None, 11)).input_lens == (10, None, 11)
    assert _run((_rec(0, 10, warmup=True),), input_lens=()).input_lens == ()  # a bench run of warmup only
