"""The engine server's bounds under exhaustion (serving/exhaustion.py): the log rate limit on a scripted clock,
the accept-failure report, and the open-files limit."""

from __future__ import annotations

import errno
import logging
import sys

import pytest

from speculab.serving.exhaustion import (
    ACCEPT_LOG_INTERVAL_S,
    AcceptLoop,
    ConnectionCounters,
    LogRateLimit,
    raise_open_files_limit,
)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def record(msg: str, name: str = "uvicorn.error", level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


def test_one_kind_of_message_is_let_through_a_few_times_per_interval_then_counted():
    clock, counters = Clock(), ConnectionCounters()
    limit = LogRateLimit(counters, per_kind=3, total=100, interval_s=60, clock=clock)
    passed = [limit.filter(record("Invalid HTTP request received.")) for _ in range(1000)]
    assert sum(passed) == 3 and counters.log_lines_suppressed == 997
    other = record("another kind")
    assert limit.filter(other) and "997 log records suppressed" in other.getMessage()  # it carries the count
    clock.t = 60.0
    again = record("Invalid HTTP request received.")
    assert limit.filter(again) and again.getMessage() == "Invalid HTTP request received."  # a new interval


def test_messages_that_differ_only_past_their_first_line_are_one_kind_and_all_kinds_share_a_total():
    clock, counters = Clock(), ConnectionCounters()
    limit = LogRateLimit(counters, per_kind=5, total=20, interval_s=60, clock=clock)
    same = [limit.filter(record(f"Exception in callback\nhandle {i}", name="asyncio")) for i in range(50)]
    assert sum(same) == 5
    distinct = [limit.filter(record(f"kind {i}")) for i in range(1000)]  # client-made kinds cannot pass the total
    assert sum(distinct) == 15 and counters.log_lines_suppressed == 45 + 985
    assert len(limit._seen) <= 256  # nor grow its memory without bound


def test_accept_failures_are_counted_each_and_reported_once_per_interval(caplog):
    clock, counters = Clock(), ConnectionCounters()
    loop = AcceptLoop(counters, clock=clock)
    try:
        with caplog.at_level(logging.ERROR, logger="speculab.serving.exhaustion"):
            for i in range(2000):
                clock.t = i * 0.01  # 20 s of failures, 100 a second
                loop._accept_failed(OSError(errno.EMFILE, "Too many open files"))
    finally:
        loop.close()
    assert counters.accept_failures == 2000
    assert len(caplog.records) == 20 / ACCEPT_LOG_INTERVAL_S
    assert all(r.exc_info is None and "Too many open files" in r.getMessage() for r in caplog.records)
    assert "1000 time(s)" in caplog.records[1].getMessage()


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_the_soft_open_files_limit_is_raised_to_the_hard_one():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        got = raise_open_files_limit()
        now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert got == now and (now == hard or hard == resource.RLIM_INFINITY)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
