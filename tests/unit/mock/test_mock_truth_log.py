"""The truth log's lines: header, one line per request when it ends, flushed only between bursts."""

from __future__ import annotations

import io
import json

import pytest

from speculab.errors import UserError
from speculab.mock.options import MockFlags, mock_config_from_flags
from speculab.mock.state import MockState
from speculab.mock.truth_log import TRUTH_LOG_SCHEMA, TruthEntry, TruthLog, read_truth_log


class _CountingFile(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_header_then_one_line_per_request_flushed_when_none_is_in_flight():
    out = _CountingFile()
    log = TruthLog(out)
    assert json.loads(out.getvalue()) == {"schema": TRUTH_LOG_SCHEMA, "clock": "CLOCK_REALTIME", "unit": "ns"}
    flushed = out.flushes
    a = log.begin(TruthEntry("cmpl-1", "first", None, received_ns=10, handler_ns=12))
    b = log.begin(TruthEntry("cmpl-2", "second", "req-7", received_ns=11, handler_ns=15, received_by="kernel"))
    a.chunks_ns += [20, 30]
    log.end(a)
    assert out.flushes == flushed  # b is still in flight: no write system call mid-burst
    b.chunks_ns.append(25)
    log.end(b)
    assert out.flushes == flushed + 1
    lines = [json.loads(x) for x in out.getvalue().splitlines()[1:]]
    assert lines == [
        {
            "id": "cmpl-1",
            "request_id": None,
            "prompt": "first",
            "received_ns": 10,
            "handler_ns": 12,
            "chunks_ns": [20, 30],
            "chunks_done_ns": [],
            "received_by": "handler",
        },
        {
            "id": "cmpl-2",
            "request_id": "req-7",
            "prompt": "second",
            "received_ns": 11,
            "handler_ns": 15,
            "chunks_ns": [25],
            "chunks_done_ns": [],
            "received_by": "kernel",
        },
    ]


def test_read_truth_log_skips_a_cut_last_line_and_refuses_other_files(tmp_path):
    path = tmp_path / "truth.jsonl"
    log = TruthLog.open(path)
    log.end(log.begin(TruthEntry("cmpl-1", "p", None, 1, 2, [3])))
    log.close()
    with path.open("a") as f:
        f.write('{"id": "cmpl-2", "prom')  # a server killed mid-write
    (line,) = read_truth_log(path)
    assert line["chunks_ns"] == [3]
    other = tmp_path / "other.jsonl"
    other.write_text('{"schema": "something/1"}\n')
    with pytest.raises(ValueError, match="not a mock truth log"):
        read_truth_log(other)


def test_the_flag_reaches_the_config_and_an_unwritable_path_is_one_line(tmp_path):
    cfg = mock_config_from_flags(MockFlags(truth_log=str(tmp_path / "t.jsonl")))
    assert cfg.truth_log == str(tmp_path / "t.jsonl")
    assert mock_config_from_flags(MockFlags()).truth_log is None
    bad = mock_config_from_flags(MockFlags(truth_log=str(tmp_path / "missing-dir" / "t.jsonl")))
    with pytest.raises(UserError, match="--truth-log a writable path"):
        MockState(bad)
