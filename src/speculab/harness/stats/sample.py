"""One sample summarised: count, mean, spread and percentiles (units are the caller's)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample; NaN fields when the sample is empty. Units are the caller's (seconds in files)."""

    n: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def describe(values: Iterable[float] | np.ndarray) -> Distribution:
    """mean, sample std (ddof=1; NaN for one value), min/max and linear-interpolated percentiles of `values`.
    An array is used as it is (no copy into a list of Python floats: a long run's chunk gaps are millions)."""
    a = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    if a.size == 0:
        nan = float("nan")
        return Distribution(0, nan, nan, nan, nan, nan, nan, nan, nan)
    p = np.percentile(a, PERCENTILES)
    std = float(a.std(ddof=1)) if a.size > 1 else float("nan")  # one value has no sample spread (null in files)
    return Distribution(
        n=int(a.size),
        mean=float(a.mean()),
        std=std,
        min=float(a.min()),
        p50=float(p[0]),
        p90=float(p[1]),
        p95=float(p[2]),
        p99=float(p[3]),
        max=float(a.max()),
    )
