"""Resident memory of processes over time, sampled from a thread, and the one way the soak benchmarks judge it.

`server_soak.py` (the engine under hostile traffic) and `client_soak.py` (the bench client over a long run) both
sample RSS every so often while load runs and report it alike: at the start, once warmed up, at the end, the
largest, the growth after warm-up and a thinned timeline; `client_soak.py` also asks whether every sample after
warm-up stayed within a band around the warmed-up value. RSS barely depends on how loaded the machine is, so
these figures hold on a shared machine where timings do not.

A sampling thread, not a task: the process under test may be this one, and its event loop is the busy part.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

MB = 2**20


@dataclass(frozen=True, slots=True)
class Sample:
    t_s: float  # seconds since the timeline started
    rss: dict[str, int | None]  # bytes per named process; None once it has exited
    extra: dict[str, Any] = field(default_factory=dict)  # whatever `probe` returned at that moment


class RssTimeline:
    """Samples the named processes' RSS every `interval_s` seconds from a daemon thread, from `start()` to
    `stop()` (or as a context manager). `probe`, if given, adds its own readings to every sample."""

    def __init__(
        self,
        procs: Mapping[str, psutil.Process],
        interval_s: float,
        probe: Callable[[], dict[str, Any]] | None = None,
    ):
        self.procs, self.interval_s, self.probe = dict(procs), interval_s, probe
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()
        self.t0_wall = time.time()  # the same instant on the wall clock (file times are on it)

    def _rss(self, p: psutil.Process) -> int | None:
        try:
            return int(p.memory_info().rss)
        except psutil.Error:  # exited (or became a zombie) meanwhile
            return None

    def sample(self) -> Sample:
        s = Sample(
            round(time.monotonic() - self.t0, 2),
            {name: self._rss(p) for name, p in self.procs.items()},
            self.probe() if self.probe is not None else {},
        )
        self.samples.append(s)
        return s

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def start(self) -> RssTimeline:
        self.t0, self.t0_wall = time.monotonic(), time.time()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> RssTimeline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def series(self, name: str, until_s: float = float("inf")) -> list[tuple[float, int]]:
        """(t, bytes) of one process, up to `until_s`, skipping samples taken after it exited."""
        return [(s.t_s, rss) for s in self.samples if s.t_s <= until_s and (rss := s.rss.get(name)) is not None]


def rss_summary(
    series: list[tuple[float, int]], warmup_s: float, band: float | None = None, points: int = 20
) -> dict[str, Any]:
    """RSS figures in MB of one process's (t, bytes) samples: start, first sample at or after `warmup_s`, end, max,
    growth after warm-up and ~`points` of the timeline. With `band` (e.g. 0.10): the lowest and highest sample after
    warm-up relative to the warmed-up value, the least-squares slope, and whether every sample stayed within
    +-band (`flat`)."""
    if not series:
        return {"samples": 0}
    warm = [(t, r) for t, r in series if t >= warmup_s] or [series[-1]]
    t_warm, r_warm = warm[0]
    out: dict[str, Any] = {
        "samples": len(series),
        "rss_start_mb": round(series[0][1] / MB, 1),
        "rss_after_warmup_mb": round(r_warm / MB, 1),
        "rss_end_mb": round(series[-1][1] / MB, 1),
        "rss_max_mb": round(max(r for _, r in series) / MB, 1),
        "rss_growth_after_warmup_mb": round((series[-1][1] - r_warm) / MB, 1),
    }
    if band is not None:
        rel = [r / r_warm - 1 for _, r in warm]
        out["warmup_s"] = t_warm
        out["rss_after_warmup_range_pct"] = [round(100 * min(rel), 1), round(100 * max(rel), 1)]
        out["rss_slope_mb_per_min"] = round(_slope(warm) * 60 / MB, 3) if len(warm) > 1 else None
        out["flat_within_pct"] = round(100 * band, 1)
        out["flat"] = all(abs(x) <= band for x in rel)
    step = max(1, len(series) // points)
    out["rss_timeline_mb"] = [(t, round(r / MB)) for t, r in series[::step]]
    return out


def _slope(points: list[tuple[float, int]]) -> float:
    """Least-squares slope of bytes on seconds."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (r - mr) for t, r in points) / var if var > 0 else 0.0
