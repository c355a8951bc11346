"""The client's own health: CPU share and event-loop lag, and the warning when it fell behind."""

from __future__ import annotations

import asyncio
import time

from speculab.harness.analysis.stats import describe
from speculab.harness.load.client_health import ClientHealth, HealthProbe


def health(lag_p99_s: float, cpu_s: float, wall_s: float = 10.0) -> ClientHealth:
    return ClientHealth(wall_s, cpu_s, describe([0.001] * 98 + [lag_p99_s] * 2), 0.01)


def test_a_healthy_client_gives_no_warning_and_a_busy_one_says_what_showed_it():
    assert health(0.002, 3.0).warnings(dispatch_lag_p99_s=0.001, in_flight=64) == []
    (w,) = health(0.014, 9.7).warnings(dispatch_lag_p99_s=None, in_flight=1024)
    assert w.startswith("the client fell behind: event-loop lag p99 14.0 ms, client CPU 97% of a core at 1,024 streams")
    (w,) = health(0.001, 1.0).warnings(dispatch_lag_p99_s=0.02)
    assert "p99 dispatch lag 20.0 ms" in w and "streams" not in w
    assert health(0.001, 4.0).to_dict()["cpu_share"] == 0.4


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
    assert any("event-loop lag" in w for w in h.warnings())
