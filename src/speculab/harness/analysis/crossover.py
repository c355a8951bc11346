"""The crossover load: where speculation stops paying, with an interval from the per-load bootstrap replicates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np

from speculab.harness.analysis.comparison.metric_comparison import MetricComparison
from speculab.harness.stats import CONFIDENCE


@dataclass(frozen=True, slots=True)
class LoadSpeedup:
    """Speedup (baseline/candidate, > 1 = speculation helps) at one load, with its interval and, when available,
    its bootstrap replicates (same count at every load; loads are independent runs so replicate j of each load
    together form one plausible speedup curve)."""

    load: float  # concurrency or request rate, whichever the sweep varied
    speedup: float
    low: float
    high: float
    replicates: tuple[float, ...] = ()

    @classmethod
    def from_comparison(cls, load: float, c: MetricComparison) -> LoadSpeedup:
        """The speedup of a time metric's comparison at one load, replicates converted to speedups.

        The replicates are the geometric mean's bootstrap, recentred (in log space) on the verdict's estimate, so
        the crossover's point and interval describe the same speedup curve as the per-load verdicts; under heavy
        tails the geometric mean's spread is the wider one, which keeps the crossover interval conservative.
        """
        lo, hi = c.speedup_interval
        shift = c.verdict_ratio.estimate / c.geomean_ratio.estimate if c.geomean_ratio.estimate > 0 else 1.0
        ratios = [r * shift for r in c.replicates]
        reps = tuple(1.0 / r for r in ratios) if c.lower_is_better else tuple(ratios)
        return cls(load, c.speedup, lo, hi, reps)


class CrossoverStatus(str, Enum):
    CROSSES = "crosses"  # speedup > 1 at low load and <= 1 at a higher one
    # Statuses describe the point estimates (significance is the per-load verdicts' job), so say "estimate".
    ALWAYS_FASTER = "speedup estimate above 1 at every load measured"
    NEVER_FASTER = "speedup estimate at or below 1 at every load measured"
    # at or below 1 at the lowest load yet above 1 higher up: speculation pays only under load (no crossing from
    # above to report; e.g. a baseline that itself slows down more with concurrency)
    RISES = "speedup estimate at or below 1 at the lowest load, above 1 at a higher one"
    TOO_FEW_LOADS = "fewer than two loads"


@dataclass(frozen=True, slots=True)
class Crossover:
    """Load where the speedup curve crosses 1 (first crossing from above), with an interval.

    `low_censored` / `high_censored`: the interval reaches past the measured loads; `low`/`high` then hold the
    lowest/highest load measured and should be read as "<= low" / ">= high".
    """

    status: CrossoverStatus
    load: float | None
    low: float | None
    high: float | None
    low_censored: bool
    high_censored: bool
    method: str  # "bootstrap-replicates" or "interval-endpoints"
    confidence: float
    scale: str  # interpolation axis: "linear" or "log" in load

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d


def first_crossings(loads: np.ndarray, log_speedups: np.ndarray, log_load: bool) -> np.ndarray:
    """For each row of `log_speedups` ([n_curves, n_loads], at `loads` ascending): the first load where the curve goes
    from > 0 to <= 0, interpolated linearly between the two loads around it (in log load with `log_load`); -inf where
    the curve is already <= 0 at the first load, +inf where it stays > 0 throughout. Vectorised over rows: the
    crossover's bootstrap and the load search (harness/search) pass a thousand curves at once."""
    s = np.atleast_2d(np.asarray(log_speedups, dtype=float))
    x = np.log(loads) if log_load else np.asarray(loads, dtype=float)
    below = s <= 0
    j = np.argmax(below, axis=1)  # first index at or below 0 (0 when none is: told apart by `any` below)
    rows = np.arange(s.shape[0])
    prev = np.maximum(j - 1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # in [0, 1): where the straight line hits 0 (nan for rows that never cross or start below: replaced below)
        frac = s[rows, prev] / (s[rows, prev] - s[rows, j])
        xc = x[prev] + frac * (x[j] - x[prev])
    out = np.exp(xc) if log_load else xc
    out = np.where(below.any(axis=1), out, math.inf)
    return np.where(below[:, 0], -math.inf, out)


def _crossing(loads: np.ndarray, speedups: np.ndarray, log_load: bool) -> float:
    """The first crossing of one speedup curve (ratios, > 1 = faster); see `first_crossings`."""
    return float(first_crossings(loads, np.log(np.maximum(speedups, 1e-300))[None, :], log_load)[0])


def crossing_interval(crossings: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of replicate crossings, non-crossing curves included as -inf / +inf (below / beyond
    the measured range), so an interval that reaches past the loads measured says so."""
    # inverted_cdf picks order statistics, never interpolating between -inf/inf and a finite crossing.
    q_lo, q_hi = np.quantile(crossings, [0.5 - confidence / 2, 0.5 + confidence / 2], method="inverted_cdf")
    return float(q_lo), float(q_hi)


def crossover(points: Sequence[LoadSpeedup], *, confidence: float = CONFIDENCE, log_load: bool = False) -> Crossover:
    """Where speculation stops paying, from a sweep of loads; see docs/statistics.md for the interval.

    With replicates at every load: the crossing of each replicate curve, and the interval is their percentiles
    (non-crossing curves count as below / beyond the measured range). Without: the crossing of the upper and lower
    interval curves (pointwise, so somewhat conservative).
    """
    scale = "log" if log_load else "linear"
    pts = sorted(points, key=lambda p: p.load)
    if len(pts) < 2:
        return Crossover(CrossoverStatus.TOO_FEW_LOADS, None, None, None, False, False, "none", confidence, scale)
    loads = np.array([p.load for p in pts], dtype=float)
    lo_load, hi_load = float(loads[0]), float(loads[-1])
    point = _crossing(loads, np.array([p.speedup for p in pts]), log_load)

    n_reps = {len(p.replicates) for p in pts}
    if len(n_reps) == 1 and next(iter(n_reps)) >= 100:
        reps = np.array([p.replicates for p in pts], dtype=float)  # [n_loads, n_replicates]
        xs = first_crossings(loads, np.log(np.maximum(reps.T, 1e-300)), log_load)
        q_lo, q_hi = crossing_interval(xs, confidence)
        method = "bootstrap-replicates"
    else:
        # The upper curve crosses 1 last (latest load at which speculation could still pay), the lower curve first.
        q_lo = _crossing(loads, np.array([p.low for p in pts]), log_load)
        q_hi = _crossing(loads, np.array([p.high for p in pts]), log_load)
        method = "interval-endpoints"

    if point == -math.inf:
        status = CrossoverStatus.RISES if any(p.speedup > 1 for p in pts) else CrossoverStatus.NEVER_FASTER
    elif point == math.inf:
        status = CrossoverStatus.ALWAYS_FASTER
    else:
        status = CrossoverStatus.CROSSES
    low_c, high_c = not math.isfinite(q_lo) or q_lo < lo_load, not math.isfinite(q_hi) or q_hi > hi_load
    return Crossover(
        status=status,
        load=point if math.isfinite(point) else None,
        low=lo_load if low_c else float(q_lo),
        high=hi_load if high_c else float(q_hi),
        low_censored=bool(low_c),
        high_censored=bool(high_c),
        method=method,
        confidence=confidence,
        scale=scale,
    )
