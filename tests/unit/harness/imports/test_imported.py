"""ImportedRun: the pairing check's `input_lens` default to the measured records' prompt tokens (what every file
reader states); a bench directory's own, given, are kept. What every reader builds its runs of: `file_record`,
`closed_loop_sends`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from speculab.harness.design import LevelSpec
from speculab.harness.imports.imported import ImportedRun, closed_loop_sends, file_record
from speculab.harness.records import RequestRecord, TokenCountSource


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


def test_closed_loop_sends_start_each_request_as_the_earliest_in_flight_ends() -> None:
    # two streams: 0 and 1 at once; 2 when 1 ends (at 1), 3 when 2 ends (at 2: before 0 at 3), 4 when 0 ends
    assert closed_loop_sends([3.0, 1.0, 1.0, 2.0, 1.0], 2) == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert closed_loop_sends([3.0, 1.0, 2.0], 1) == [0.0, 3.0, 4.0]  # one stream: one after another
    assert closed_loop_sends([3.0, 1.0], None) == [0.0, 0.0]  # nothing capped them: all at once


def test_a_file_record_is_its_chunks_at_the_files_times_with_the_files_token_counts() -> None:
    r = file_record(4, 10.0, 7, 12.0, scheduled_s=9.5, chunk_times=(10.5, 11.0), completion_tokens=3)
    assert (r.index, r.scheduled_s, r.sent_s, r.end_s, r.prompt_tokens) == (4, 9.5, 10.0, 12.0, 7)
    assert [c.t_s for c in r.chunks] == [10.5, 11.0] and all(c.n_tokens is None for c in r.chunks)
    assert r.token_count_source is TokenCountSource.RESULT_FILE and r.ok
    assert file_record(0, 1.0, None, 1.0).scheduled_s == 1.0  # sent as scheduled where the file says no wait


def test_records_saved_with_a_tools_own_token_count_source_still_read() -> None:
    """Before one source served every file, each tool had its own (`vllm_bench_file`, ...); old A/B directories of
    compare hold them."""
    for old in ("vllm_bench_file", "guidellm_file", "aiperf_file", "sglang_bench_file", "llmperf_file"):
        d = file_record(0, 0.0, 1, 1.0).to_dict() | {"token_count_source": old}
        assert RequestRecord.from_dict(d).token_count_source is TokenCountSource.RESULT_FILE
    with pytest.raises(ValueError):
        TokenCountSource("bogus_file")
