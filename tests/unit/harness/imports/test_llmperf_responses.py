"""LLMPerf *_individual_responses.json -> ImportedRun on small in-test files: the sibling summary (load, version),
failed requests, a run of several concurrent requests refused, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.words import words
from speculab.errors import UserError
from speculab.harness.design import UNKNOWN
from speculab.harness.imports import llmperf_responses
from speculab.harness.records import ErrorCategory
from speculab.harness.results.warnings import WarningKind as Kind


def _resp(i: int, **extra) -> dict:
    return {"error_code": None, "error_msg": "", "inter_token_latency_s": 0.01, "ttft_s": 0.02,
            "end_to_end_latency_s": 0.1, "number_output_tokens": 5, "number_input_tokens": 40 + i, **extra}  # fmt: skip


def _write(tmp_path: Path, rows: list, *, concurrency: int | None = 1) -> Path:
    f = tmp_path / "m_60_16_individual_responses.json"
    f.write_text(json.dumps(rows))
    if concurrency is not None:
        summary = {"version": "2023-08-31", "model": "m", "num_concurrent_requests": concurrency}
        (tmp_path / "m_60_16_summary.json").write_text(json.dumps(summary))
    return f


def test_a_file_reads_with_its_summary(tmp_path: Path) -> None:
    f = _write(tmp_path, [_resp(i) for i in range(3)])
    assert llmperf_responses.detect(f) and llmperf_responses.summary_path(f).name == "m_60_16_summary.json"
    run = llmperf_responses.read(f)
    assert run.level.key == "c1" and run.input_lens == (40, 41, 42) and run.info["version"] == "2023-08-31"
    r = run.records[1]
    assert r.sent_s == pytest.approx(0.1) and [c.t_s for c in r.chunks] == pytest.approx([0.12, 0.2])
    assert r.completion_tokens == 5 and r.end_s == pytest.approx(0.2)


def test_a_failed_request_is_an_error_record(tmp_path: Path) -> None:
    rows = [_resp(0), _resp(1, error_code=503, error_msg="busy", ttft_s=0, end_to_end_latency_s=0), _resp(2)]
    rows.append(_resp(3, error_code=-1, error_msg="Connection refused", ttft_s=0, end_to_end_latency_s=0))
    run = llmperf_responses.read(_write(tmp_path, rows))
    assert run.records[1].error.status == 503 and run.records[1].error.category is ErrorCategory.HTTP
    assert run.records[3].error.status is None and run.records[3].error.category is ErrorCategory.CONNECT
    assert run.records[2].sent_s == pytest.approx(0.1)  # a failed request took no time in the file


@pytest.mark.parametrize(
    ("code", "msg", "category", "status"),
    [
        (503, "busy", ErrorCategory.HTTP, 503),  # LLMPerf keeps the status and the body of a non-200 answer
        # the shared rule changed these three: an answer with a status is HTTP whatever its body says (were CONNECT
        # and TIMEOUT); -1 with no words is an exception in LLMPerf's client, with no status: dropped (was HTTP)
        (500, '{"error": "could not connect to the backend"}', ErrorCategory.HTTP, 500),
        (504, "Gateway Timeout", ErrorCategory.HTTP, 504),
        (-1, "Connection refused", ErrorCategory.CONNECT, None),  # -1: an exception in LLMPerf's client
        (-1, "", ErrorCategory.DROPPED, None),
        (None, "Request timed out", ErrorCategory.TIMEOUT, None),
    ],
)
def test_the_category_of_llmperfs_errors(tmp_path: Path, code, msg: str, category: ErrorCategory, status) -> None:
    row = _resp(0, error_code=code, error_msg=msg, ttft_s=0, end_to_end_latency_s=0)
    r = llmperf_responses.read(_write(tmp_path, [row])).records[0]
    assert (r.error.category, r.error.status) == (category, status)
    assert r.error.message.startswith(f"LLMPerf: error_code {code}: ") and "\n" not in r.error.message


def test_without_its_summary_a_file_reads_with_its_load_unknown_and_no_throughput(tmp_path: Path) -> None:
    """#51: a responses file alone is read, request by request as with its summary; its load is not in it (kind
    unknown, never a concurrency), nor is LLMPerf's measured time (no throughput), and its notes say both."""
    f = _write(tmp_path, [_resp(i) for i in range(3)], concurrency=None)
    run = llmperf_responses.read(f)
    assert (run.level.kind, run.level.key, run.level.label) == (UNKNOWN, "unknown", "load not in the file")
    assert run.duration_s is None and run.sends_rebuilt and run.model == "" and run.info["version"] is None
    assert run.input_lens == (40, 41, 42) and run.records[1].end_s - run.records[1].sent_s == pytest.approx(0.1)
    assert "does not state --num-concurrent-requests" in run.unpairable  # its order may not be its prompts'
    assert run.load_from == "LLMPerf's m_60_16_summary.json beside it (its --num-concurrent-requests)"
    kinds = [n.kind for n in run.notes]
    assert kinds == [Kind.FILE_READ, Kind.FILE_LOAD_UNSTATED, Kind.FILE_NO_THROUGHPUT]
    said = words(run.notes)
    assert "the load is not in the file (LLMPerf writes it in its summary, m_60_16_summary.json" in said[1]
    assert said[2].startswith("LLMPerf's measured time is in its summary") and "no throughput" in said[2]


def test_several_concurrent_requests_are_a_rebuilt_closed_loop_that_does_not_pair(tmp_path: Path) -> None:
    # five 1 s requests over two streams, listed as they completed: sent at 0, 0 (both streams), then 1, 1, 2
    f = _write(tmp_path, [_resp(i, end_to_end_latency_s=1.0) for i in range(5)], concurrency=2)
    run = llmperf_responses.read(f)
    assert run.level.value == 2 and [r.sent_s for r in run.records] == [0.0, 0.0, 1.0, 1.0, 2.0]
    assert "--num-concurrent-requests 2 lists its requests as they completed" in run.unpairable
    assert any("rebuilt as the closed loop of 2 streams" in n for n in words(run.notes))
    (tmp_path / "one").mkdir()
    one = llmperf_responses.read(_write(tmp_path / "one", [_resp(i, end_to_end_latency_s=1.0) for i in range(3)]))
    assert [r.sent_s for r in one.records] == [0.0, 1.0, 2.0] and one.unpairable == ""


def test_a_fraction_of_a_stream_is_one_line(tmp_path: Path) -> None:
    f = _write(tmp_path, [_resp(0)], concurrency=2.5)
    with pytest.raises(
        UserError,
        match=r"_summary.json: read as an LLMPerf summary file: `num_concurrent_requests` is 2.5, not a whole number",
    ):
        llmperf_responses.read(f)


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ({"a": 1}, "not a JSON list of responses"),
        ([], "it holds no requests"),
        ([_resp(0), 3], "`[1]` is a number, not an object"),
        ([{k: v for k, v in _resp(0).items() if k != "end_to_end_latency_s"}], "no `[0].end_to_end_latency_s`"),
        ([_resp(0, number_output_tokens="5")], "`[0].number_output_tokens` is '5', not a token count"),
    ],
)
def test_a_bad_file_is_one_line(tmp_path: Path, rows, says: str) -> None:
    f = _write(tmp_path, rows)
    with pytest.raises(UserError) as e:
        llmperf_responses.read(f)
    assert str(e.value).startswith(f"{f}: read as an LLMPerf individual_responses file: ") and says in str(e.value)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_notes_agree_with_the_schedule_rebuilt(tmp_path: Path, concurrency: int) -> None:
    """Issue 37: the format's note said "one request at a time" beside "rebuilt as the closed loop of 32 streams"."""
    run = llmperf_responses.read(_write(tmp_path, [_resp(i) for i in range(8)], concurrency=concurrency))
    said = " ".join((llmperf_responses.NOTE, *words(run.notes)))
    assert "one request at a time" not in said and "closed loop" in llmperf_responses.NOTE
