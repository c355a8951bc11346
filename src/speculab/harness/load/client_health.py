"""Is the client itself the bottleneck? Its CPU share and its event loop's lag while the load runs.

One asyncio process times every stream it holds; past what it can keep up with (bench/client_overhead.py: about 512
streams at the machine's floor on a 2-core VM) the client, not the server, sets the timings, and nothing in the
requests' own numbers says so. `HealthProbe` runs next to the load: a ticker task sleeps `interval_s` and records
how late it woke (the loop's lag: every chunk read waits that long to be stamped), and the event loop thread's CPU
seconds over the wall seconds give its CPU share (1.0: one core busy all the time, which a single event loop cannot
exceed). The thread's, not the process's: a mock server in a thread of the same process (tests, benchmarks) is not
the client's work. `ClientHealth.warnings` turns them, with the open loop's dispatch lag (sent - scheduled), into
the warning a user needs (the report words it): the client fell behind, and by how much.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import Distribution, describe

# The loop-lag threshold, against the machine's idle floor (bench/loop_lag_floor.py, bench/README.md): an idle loop's
# p99 lag on the 2-core CI VM is 1.6-2.0 ms, and 2.3x that (4.1-4.6 ms) with both cores spinning beside it. A margin
# of 5x the floor (10 ms) clears a busy neighbour, so the warning fires for lag a loaded machine alone does not make;
# at 5 ms it fired on an idle VM at 4 streams, where the server computing on the same cores woke the loop late.
IDLE_LOOP_LAG_P99_S = 0.002
LOOP_LAG_MARGIN = 5.0
LOOP_LAG_WARN_S = LOOP_LAG_MARGIN * IDLE_LOOP_LAG_P99_S  # p99 above this: chunk timestamps carry client delay
CPU_SHARE_WARN = 0.85  # of one core: a single event loop near saturation
DISPATCH_LAG_WARN_S = 0.005  # open loop, p99 sent - scheduled without a cap: sends left late
# The A/B gate: a load where the client was saturated (CPU) *and* its loop lagged is not the load that was asked
# for, like an under-delivered rate. Both signs are required: a VM stall alone raises the lag, not the CPU share.
GATE_LOOP_LAG_S = LOOP_LAG_WARN_S


def client_fell_behind(cpu_share: float | None, loop_lag_p99_s: float | None) -> bool:
    """The A/B gate's rule (see GATE_LOOP_LAG_S)."""
    return (
        cpu_share is not None
        and loop_lag_p99_s is not None
        and math.isfinite(cpu_share)
        and math.isfinite(loop_lag_p99_s)
        and cpu_share > CPU_SHARE_WARN
        and loop_lag_p99_s > GATE_LOOP_LAG_S
    )


@dataclass(frozen=True, slots=True)
class ClientHealth:
    """The client process over the measured phase."""

    wall_s: float
    cpu_s: float  # CPU seconds (user + system) of the thread running the event loop
    loop_lag_s: Distribution  # lateness of a ticker waking every `interval_s`
    interval_s: float

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else math.nan

    def warnings(
        self, *, dispatch_lag_p99_s: float | None = None, in_flight: float | None = None
    ) -> list[ReportWarning]:
        """One warning when the client fell behind, with the signs that showed it (each None when it did not)."""
        lag = (
            self.loop_lag_s.p99
            if math.isfinite(self.loop_lag_s.p99) and self.loop_lag_s.p99 > LOOP_LAG_WARN_S
            else None
        )
        cpu = self.cpu_share if math.isfinite(self.cpu_share) and self.cpu_share > CPU_SHARE_WARN else None
        late = (
            dispatch_lag_p99_s if dispatch_lag_p99_s is not None and dispatch_lag_p99_s > DISPATCH_LAG_WARN_S else None
        )
        if lag is None and cpu is None and late is None:
            return []
        if cpu is None and late is None and math.isfinite(self.cpu_share):
            # late wake-ups while the client itself was nearly idle: the machine, not the client, was busy
            fields = {"loop_lag_p99_s": lag, "in_flight": in_flight, "idle_lag_p99_s": IDLE_LOOP_LAG_P99_S}
            return [ReportWarning(WarningKind.CLIENT_CLOCK_HELD, fields=fields | {"cpu_share": self.cpu_share})]
        fields = {"loop_lag_p99_s": lag, "cpu_share": cpu, "dispatch_lag_p99_s": late, "in_flight": in_flight}
        return [ReportWarning(WarningKind.CLIENT_FELL_BEHIND, fields=fields)]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClientHealth:
        lag = {k: (math.nan if v is None else v) for k, v in d["loop_lag_s"].items()}
        return cls(float(d["wall_s"]), float(d["cpu_s"]), Distribution(**lag), float(d["interval_s"]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "cpu_share": self.cpu_share,
            "loop_lag_s": self.loop_lag_s.to_dict(),
            "interval_s": self.interval_s,
        }


def combined_health(blocks: Sequence[ClientHealth]) -> dict[str, float] | None:
    """One repeat's client health over its blocks (two-URL mode measures each block apart): CPU and wall seconds
    summed, the worst block's loop-lag p99. None when nothing was measured."""
    if not blocks:
        return None
    cpu, wall = sum(b.cpu_s for b in blocks), sum(b.wall_s for b in blocks)
    lags = [b.loop_lag_s.p99 for b in blocks if math.isfinite(b.loop_lag_s.p99)]
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_share": cpu / wall if wall > 0 else math.nan,
        "loop_lag_p99_s": max(lags) if lags else math.nan,
    }


class HealthProbe:
    """Measures `ClientHealth` between `start()` and `stop()` on the running loop. Clocks are injected."""

    def __init__(
        self,
        *,
        interval_s: float = 0.01,
        clock: Callable[[], float] = time.perf_counter,
        cpu_clock: Callable[[], float] = time.thread_time,
    ):
        self.interval_s, self.clock, self.cpu_clock = interval_s, clock, cpu_clock
        self._lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = self._cpu0 = 0.0

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._t0, self._cpu0 = self.clock(), self.cpu_clock()
        self._task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            due = self.clock() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self._lags.append(max(0.0, self.clock() - due))

    async def stop(self) -> ClientHealth:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        wall, cpu = self.clock() - self._t0, self.cpu_clock() - self._cpu0
        return ClientHealth(wall, cpu, describe(np.asarray(self._lags, dtype=float)), self.interval_s)
