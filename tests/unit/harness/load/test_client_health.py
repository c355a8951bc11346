"""The client's own health: CPU share and event-loop lag, and the warning when it fell behind."""

from __future__ import annotations

import asyncio
import time

from speculab.harness.load.client_health import (
    GATE_LOOP_LAG_S,
    IDLE_LOOP_LAG_P99_S,
    LOOP_LAG_MARGIN,
    LOOP_LAG_WARN_S,
    ClientHealth,
    HealthProbe,
)
from speculab.harness.results.warnings import WarningKind
from speculab.harness.stats import describe


def health(lag_p99_s: float, cpu_s: float, wall_s: float = 10.0) -> ClientHealth:
    return ClientHealth(wall_s, cpu_s, describe([0.001] * 98 + [lag_p99_s] * 2), 0.01)


def test_a_healthy_client_gives_no_warning_and_a_busy_one_says_what_showed_it():
    assert health(0.002, 3.0).warnings(dispatch_lag_p99_s=0.001, in_flight=64) == []
    (w,) = health(0.014, 9.7).warnings(dispatch_lag_p99_s=None, in_flight=1024)
    assert w.kind == WarningKind.CLIENT_FELL_BEHIND
    assert w.fields == {"loop_lag_p99_s": 0.014, "cpu_share": 0.97, "dispatch_lag_p99_s": None, "in_flight": 1024}
    (w,) = health(0.001, 1.0).warnings(dispatch_lag_p99_s=0.02)
    assert w.fields == {"loop_lag_p99_s": None, "cpu_share": None, "dispatch_lag_p99_s": 0.02, "in_flight": None}
    assert health(0.001, 4.0).to_dict()["cpu_share"] == 0.4


def test_lag_within_a_busy_machines_reach_is_quiet_and_lag_alone_blames_the_machine():
    """Issue 24: "client fell behind: event-loop lag p99 8.9 ms at 4 streams" on an idle 2-core VM, where the server
    computing beside the client woke its loop late. The threshold is 5x the idle floor bench/loop_lag_floor.py
    measured (10 ms); past it with an idle client, the line names the machine, not the client."""
    assert LOOP_LAG_WARN_S == LOOP_LAG_MARGIN * IDLE_LOOP_LAG_P99_S == GATE_LOOP_LAG_S
    assert health(0.0089, 0.3).warnings(in_flight=4) == []
    (w,) = health(0.025, 0.3).warnings(in_flight=4)
    assert w.kind == WarningKind.CLIENT_CLOCK_HELD
    assert w.fields == {"loop_lag_p99_s": 0.025, "in_flight": 4, "idle_lag_p99_s": 0.002, "cpu_share": 0.03}


async def test_the_probe_sees_a_blocked_loop_and_counts_cpu_on_the_injected_clock():
    cpu = iter([100.0, 100.5])
    probe = HealthProbe(interval_s=0.005, cpu_clock=lambda: next(cpu))
    probe.start()
    await asyncio.sleep(0.02)
    time.sleep(0.04)  # the loop is blocked: the ticker wakes at least this late
    await asyncio.sleep(0.02)
    h = await probe.stop()
    assert h.cpu_s == 0.5 and h.wall_s > 0.07
    assert h.loop_lag_s.n >= 3 and h.loop_lag_s.max >= 0.035
    assert [w.fields["loop_lag_p99_s"] > 0.03 for w in h.warnings()] == [True]
