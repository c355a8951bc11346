"""AIPerf profile_export.jsonl -> ImportedRun on small in-test records: units by their `unit`, warmup left out,
records completed out of order, failed requests, the sibling summary's load and version, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports import aiperf_profile
from speculab.harness.records import ErrorCategory


def _rec(conv: int, start_ms: float, *, ttft=(20.0, "ms"), gaps=([30.0, 30.0], "ms"), phase="profiling", **extra):
    start_ns = int(1e15 + start_ms * 1e6)
    latency_ms = 100.0
    return {
        "metadata": {"conversation_id": f"session_{conv:06d}", "turn_index": 0, "benchmark_phase": phase,
                     "request_start_ns": start_ns, "request_end_ns": start_ns + int(latency_ms * 1e6)},
        "metrics": {"time_to_first_token": {"value": ttft[0], "unit": ttft[1]},
                    "inter_chunk_latency": {"value": gaps[0], "unit": gaps[1]},
                    "request_latency": {"value": latency_ms, "unit": "ms"},
                    "input_sequence_length": {"value": 10 + conv, "unit": "tokens"},
                    "output_sequence_length": {"value": 3, "unit": "tokens"}},
        **extra,
    }  # fmt: skip


def _write(tmp_path: Path, rows: list[dict], phases=({"kind": "profiling", "type": "concurrency", "concurrency": 2},)):
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    f = d / "profile_export.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if phases is not None:
        summary = {"aiperf_version": "0.13.0", "start_time": "2026-12-03T09:00:00", "input_config": {"phases": phases}}
        (d / aiperf_profile.SIBLING).write_text(json.dumps(summary))
    return f


def test_units_are_converted_by_their_unit_field(tmp_path: Path) -> None:
    run = aiperf_profile.read(_write(tmp_path, [_rec(0, 0, ttft=(0.02, "s"), gaps=([30_000_000, 3e7], "ns"))]))
    r = run.records[0]
    assert r.chunks[0].t_s - r.sent_s == pytest.approx(0.02)
    assert [b.t_s - a.t_s for a, b in zip(r.chunks, r.chunks[1:], strict=False)] == pytest.approx([0.03, 0.03])
    assert r.end_s - r.sent_s == pytest.approx(0.1) and r.completion_tokens == 3
    with pytest.raises(UserError, match=r"line 1: `metrics.time_to_first_token.unit` is 'fortnights'"):
        aiperf_profile.read(_write(tmp_path, [_rec(0, 0, ttft=(1.0, "fortnights"))]))


def test_warmup_is_left_out_and_records_go_in_the_order_they_were_sent(tmp_path: Path) -> None:
    rows = [_rec(1, 5.0), _rec(9, -50.0, phase="warmup"), _rec(0, 0.0), _rec(2, 7.0)]  # as they completed
    run = aiperf_profile.read(_write(tmp_path, rows))
    assert run.prompt_keys == ("session_000000/0", "session_000001/0", "session_000002/0")
    assert run.input_lens == (10, 11, 12) and [r.index for r in run.records] == [0, 1, 2]
    assert run.level.key == "c2" and run.info["version"] == "0.13.0" and run.name == "run"


def test_a_failed_request_is_an_error_record(tmp_path: Path) -> None:
    bad = _rec(0, 0.0, error={"code": 500, "type": "Internal Server Error", "message": "boom"})
    run = aiperf_profile.read(_write(tmp_path, [bad, _rec(1, 1.0)]))
    r = run.records[0]
    assert not r.ok and r.error.category is ErrorCategory.HTTP and r.error.status == 500 and "boom" in r.error.message
    assert run.records[1].ok


@pytest.mark.parametrize(
    ("error", "category", "status"),
    [
        ({"code": 500, "type": "Internal Server Error", "message": "boom"}, ErrorCategory.HTTP, 500),
        # the shared rule changed these three: a code is the server's answer, HTTP whatever its words (were CONNECT
        # and TIMEOUT); "timed out" is a timeout (was DROPPED)
        ({"code": 502, "type": "Bad Gateway", "message": "could not connect to upstream"}, ErrorCategory.HTTP, 502),
        ({"code": 504, "type": "Gateway Timeout", "message": ""}, ErrorCategory.HTTP, 504),
        ({"code": None, "type": "ClientConnectorError", "message": "Cannot connect"}, ErrorCategory.CONNECT, None),
        ({"code": None, "type": "TimeoutError", "message": ""}, ErrorCategory.TIMEOUT, None),
        ({"code": None, "type": "ClientPayloadError", "message": "payload not completed"}, ErrorCategory.DROPPED, None),
        ({"code": None, "type": "ReadError", "message": "read timed out"}, ErrorCategory.TIMEOUT, None),
        ("a bare string", ErrorCategory.DROPPED, None),
    ],
)
def test_the_category_of_aiperfs_errors(tmp_path: Path, error, category: ErrorCategory, status) -> None:
    r = aiperf_profile.read(_write(tmp_path, [_rec(0, 0.0, error=error)])).records[0]
    assert (r.error.category, r.error.status) == (category, status)
    assert r.error.message.startswith("AIPerf: ")


def test_the_load_is_the_summarys_and_without_it_the_file_is_refused(tmp_path: Path) -> None:
    rate = ({"kind": "profiling", "type": "poisson", "rate": 2.5, "concurrency": 8},)
    level = aiperf_profile.read(_write(tmp_path, [_rec(0, 0)], phases=rate)).level
    assert (level.key, level.arrival, level.max_concurrency) == ("r2.5", "poisson", 8)
    schedule = ({"kind": "profiling", "type": "fixed_schedule"},)
    with pytest.raises(
        UserError,
        match=r"profile_export_aiperf.json: read as AIPerf's profile_export_aiperf.json: "
        r"`input_config.phases\[0\].type` is 'fixed_schedule', neither a concurrency nor a request rate",
    ):
        aiperf_profile.read(_write(tmp_path, [_rec(0, 0)], phases=schedule))
    (tmp_path / "alone").mkdir()
    f = _write(tmp_path / "alone", [_rec(0, 0)], phases=None)
    with pytest.raises(UserError, match=r"no profile_export_aiperf.json beside it"):
        aiperf_profile.read(f)


def test_a_cut_line_or_missing_field_is_one_line(tmp_path: Path) -> None:
    f = _write(tmp_path, [_rec(0, 0)])
    f.write_text(f.read_text() + '{"metadata": {"request_')
    with pytest.raises(UserError, match=r"read as an AIPerf profile_export.jsonl: line 2: not JSON"):
        aiperf_profile.read(f)
    rec = _rec(0, 0)
    del rec["metrics"]["request_latency"]
    with pytest.raises(UserError, match=r"line 1: no `metrics.request_latency`"):
        aiperf_profile.read(_write(tmp_path, [rec]))
    assert aiperf_profile.detect(f) and not aiperf_profile.detect(tmp_path / "none")


def _write_loadgen(tmp_path: Path, rows: list[dict], loadgen: dict) -> Path:
    """An AIPerf 0.8-style run: the load in `input_config.loadgen` (no `phases`), as AIPerf's LoadGeneratorConfig
    serialises it (`concurrency`, `request_rate`, `request_rate_mode`, `request_count`, ...)."""
    tmp_path.mkdir()
    f = _write(tmp_path, rows, phases=None)
    summary = {"aiperf_version": "0.8.0", "input_config": {"loadgen": {"request_count": 10} | loadgen}}
    (f.parent / aiperf_profile.SIBLING).write_text(json.dumps(summary))
    return f


def test_a_release_that_kept_the_load_in_loadgen_is_read(tmp_path: Path) -> None:
    """Issue 51: AIPerf 0.8's load is `input_config.loadgen.concurrency`; the reader wanted `phases` and blamed the
    side file."""
    lg = {"concurrency": 4, "request_rate": None, "request_rate_mode": "concurrency_burst"}
    level = aiperf_profile.read(_write_loadgen(tmp_path / "c", [_rec(0, 0)], lg)).level
    assert (level.kind, level.value) == ("concurrency", 4)
    lg = {"concurrency": None, "request_rate": 2.5, "request_rate_mode": "constant"}
    level = aiperf_profile.read(_write_loadgen(tmp_path / "r", [_rec(0, 0)], lg)).level
    assert (level.kind, level.value, level.arrival, level.max_concurrency) == ("rate", 2.5, "constant", None)
    with pytest.raises(UserError, match=r"`input_config.loadgen.concurrency` is None, and no request rate"):
        aiperf_profile.read(_write_loadgen(tmp_path / "n", [_rec(0, 0)], {"concurrency": None}))


def test_a_request_aiperf_cancelled_is_cancelled_not_failed(tmp_path: Path) -> None:
    """Issue 51: AIPerf 0.1.x keeps a request it cancelled (--request-cancellation-rate) as an error record with no
    metrics: cancelled, so the error gate does not count it."""
    cut = _rec(1, 5, **{"error": {"code": 499, "type": "RequestCancellationError", "message": "Request was cancelled "
               "after 0.010 seconds"}})  # fmt: skip
    cut["metrics"] = {}
    run = aiperf_profile.read(_write(tmp_path, [_rec(0, 0), cut]))
    assert run.records[1].error is not None and run.records[1].error.category is ErrorCategory.CANCELLED
    assert "cancelled after 0.010 seconds" in run.records[1].error.message and run.records[0].error is None
