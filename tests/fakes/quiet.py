"""Is the machine quiet enough for millisecond timing assertions? One answer for every timing-sensitive test.

A 2-core VM shared with other jobs wakes processes milliseconds late; a +-1 ms assertion then measures the
neighbours, not the code. Timing tests measure the machine around what they time and, when it was busy, skip
with a message that says what was measured and which figures the run got (`pytest -rs` prints it; the project's
pytest options include -rs), while every count and ratio is still asserted. SPECULAB_FORCE_TIMING_TESTS=1 runs
the timing assertions anyway (e.g. under real-time priority: `chrt -f 10 python -m pytest ...`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import psutil
import pytest

from tests.sharing import background_cpu_s

FORCE_ENV = "SPECULAB_FORCE_TIMING_TESTS"


def forced() -> bool:
    return bool(os.environ.get(FORCE_ENV))


async def wakeup_lateness_s(*, quantile: float = 0.9, n: int = 40, sleep_s: float = 0.005) -> float:
    """How late this process's event loop wakes from short sleeps (the machine's scheduling noise), seconds."""
    late = []
    for _ in range(n):
        t = time.perf_counter()
        await asyncio.sleep(sleep_s)
        late.append(time.perf_counter() - t - sleep_s)
    late.sort()
    return late[int(quantile * (n - 1))]


def _others_cpu_s() -> float:
    """CPU seconds the whole machine has spent (steal included) outside this process and its children."""
    me = psutil.Process()
    own = 0.0
    for p in (me, *me.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            own += sum(p.cpu_times()[:2])  # user + system
    t = psutil.cpu_times()
    # the suite's background (tests/sharing.py) yields the CPU to this process at once: not a neighbour that delays it
    return (
        sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq", "steal"))
        - own
        - background_cpu_s()
    )


class OtherCpu:
    """Other processes' share of all cores between construction and `share()` (this process's children excluded:
    a test's own server never excuses a miss)."""

    def __init__(self) -> None:
        self._cpu0, self._t0 = _others_cpu_s(), time.perf_counter()

    def share(self) -> float:
        wall = max(time.perf_counter() - self._t0, 1e-9)
        return max(0.0, (_others_cpu_s() - self._cpu0) / (wall * (psutil.cpu_count() or 1)))


async def other_cpu_share(window_s: float = 0.5) -> float:
    """Other processes' share of all cores over the next `window_s` seconds."""
    meter = OtherCpu()
    await asyncio.sleep(window_s)
    return meter.share()


def skip_if_busy(
    *,
    lateness_s: float | None = None,
    max_lateness_s: float = 0.0005,
    others_share: float | None = None,
    max_others_share: float = 0.10,
    figures: str = "",
) -> None:
    """Skip, naming the measurement and the run's own figures, when the machine was too busy for +-1 ms checks."""
    if forced():
        return
    tail = f"; {figures}" if figures else ""
    if lateness_s is not None and lateness_s > max_lateness_s:
        pytest.skip(f"machine too busy for +-1 ms checks (wakeups {lateness_s * 1e3:.1f} ms late){tail}")
    if others_share is not None and others_share > max_others_share:
        pytest.skip(f"machine too busy for +-1 ms checks (other processes used {others_share:.0%} of it){tail}")
