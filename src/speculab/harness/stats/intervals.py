"""Confidence intervals for a mean, a ratio of repeats, a proportion and a least-squares line, and the
levels every verdict is held to (ALPHA, CONFIDENCE, POWER). scipy.stats (~0.7 s to import) is imported inside the
functions that need it: every `speculab bench` run imports this package for describe(), and should not pay for
tests it never runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy

# The false-positive rate every verdict is held to: intervals at 1 - ALPHA, adaptive repeats spend it across looks,
# the correctness tests use it; stricter levels elsewhere have names of their own (prefix_cache.WARNING_ALPHA).
ALPHA = 0.05


CONFIDENCE = 1 - ALPHA  # == 0.95 exactly in binary floating point


POWER = 0.80  # the power used to define the minimum detectable effect


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with a two-sided interval at `confidence`; NaNs when it cannot be computed."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str  # e.g. "bootstrap-bca", "bootstrap-percentile", "t", "wilson"
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def excludes(self, value: float) -> bool:
        return self.high < value or self.low > value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resample_stat(x: np.ndarray, stat: str, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """`stat` ("mean" or "median") of n_resamples resamples of x with replacement; chunked to bound memory."""
    n = x.size
    out = np.empty(n_resamples)
    rows = max(1, 4_000_000 // max(n, 1))  # at most ~32 MB of int64 indices per chunk
    for start in range(0, n_resamples, rows):
        stop = min(n_resamples, start + rows)
        sample = x[rng.integers(0, n, size=(stop - start, n))]  # [rows, n]
        out[start:stop] = sample.mean(axis=1) if stat == "mean" else np.median(sample, axis=1)
    return out


def bca_mean_bounds(x: np.ndarray, theta: float, reps: np.ndarray, confidence: float) -> tuple[float, float]:
    """Bias-corrected and accelerated percentile bounds for the mean of x (Efron 1987; jackknife acceleration)."""
    n = x.size
    less = np.count_nonzero(reps < theta) + 0.5 * np.count_nonzero(reps == theta)
    p0 = min(max(less / reps.size, 1.0 / reps.size), 1 - 1.0 / reps.size)
    z0 = float(scipy.special.ndtri(p0))
    jack = (x.sum() - x) / (n - 1)  # leave-one-out means, shape [n]
    d = jack.mean() - jack
    denom = 6.0 * float(np.sum(d**2)) ** 1.5
    a = float(np.sum(d**3)) / denom if denom > 0 else 0.0
    z = float(scipy.special.ndtri(0.5 + confidence / 2))
    lo_p = float(scipy.special.ndtr(z0 + (z0 - z) / (1 - a * (z0 - z))))
    hi_p = float(scipy.special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z))))
    lo, hi = np.quantile(reps, [lo_p, hi_p])
    return float(lo), float(hi)


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean of repeats with a Student-t interval (n-1 degrees of freedom); NaN bounds when n < 2."""
    a = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    nan = float("nan")
    if a.size == 0:
        return Interval(nan, nan, nan, confidence, "t", 0)
    mean = float(a.mean())
    if a.size < 2:
        return Interval(mean, nan, nan, confidence, "t", 1)
    half = float(scipy.special.stdtrit(a.size - 1, 0.5 + confidence / 2)) * float(a.std(ddof=1)) / math.sqrt(a.size)
    return Interval(mean, mean - half, mean + half, confidence, "t", int(a.size))


def repeat_ratio_interval(
    candidate: Sequence[float], baseline: Sequence[float], confidence: float = CONFIDENCE
) -> Interval:
    """Ratio candidate/baseline of a per-repeat quantity (e.g. tok/s), paired by repeat: t-interval of log ratios.

    Repeats run in ABBA order, so repeat j of each arm saw the same drift; pairing by repeat cancels it.
    """
    if len(candidate) != len(baseline):
        raise ValueError(f"repeat counts differ: {len(candidate)} candidate vs {len(baseline)} baseline")
    logs = [math.log(c / b) for c, b in zip(candidate, baseline, strict=True) if c > 0 and b > 0]
    t = t_interval(logs, confidence)
    return Interval(math.exp(t.estimate), math.exp(t.low), math.exp(t.high), confidence, "t-log-ratio", t.n)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Proportion successes/n with the Wilson score interval (sane at 0/n and n/n, unlike the Wald interval)."""
    if n <= 0:
        nan = float("nan")
        return Interval(nan, nan, nan, confidence, "wilson", 0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..{n}")
    z = float(scipy.special.ndtri(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), confidence, "wilson", n)


def cluster_ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], confidence: float = CONFIDENCE
) -> Interval:
    """sum(numerators) / sum(denominators) over clusters (one pair per cluster, e.g. one prompt's accepted and
    attempted drafts), with a Student-t interval from the linearised (delta-method) variance of a ratio estimator:
    var = n / (n - 1) * sum((a_i - R d_i)^2) / (sum d)^2, n - 1 degrees of freedom.

    Why clusters: tokens of one request are not independent draws (a repetitive answer accepts run after run), so a
    binomial interval over tokens is far too narrow; the clusters are the independent units. Clusters with a zero
    denominator carry no information and are left out of n. NaN bounds below 2 clusters."""
    pairs = [(float(a), float(d)) for a, d in zip(numerators, denominators, strict=True) if d > 0]
    nan = float("nan")
    method = "ratio-t (clusters)"
    if not pairs:
        return Interval(nan, nan, nan, confidence, method, 0)
    a = np.asarray([p[0] for p in pairs])
    d = np.asarray([p[1] for p in pairs])
    ratio = float(a.sum() / d.sum())
    n = a.size
    if n < 2:
        return Interval(ratio, nan, nan, confidence, method, n)
    var = n / (n - 1) * float(((a - ratio * d) ** 2).sum()) / float(d.sum()) ** 2
    half = float(scipy.special.stdtrit(n - 1, 0.5 + confidence / 2)) * math.sqrt(var)
    return Interval(ratio, ratio - half, ratio + half, confidence, method, n)


@dataclass(frozen=True, slots=True)
class LinearFit:
    """TTFT = overhead_s + s_per_token x prompt_tokens, ordinary least squares with Student-t intervals."""

    s_per_token: float
    s_per_token_ci: tuple[float, float]
    overhead_s: float
    overhead_s_ci: tuple[float, float]
    r2: float
    n: int
    residual_s: float  # residual standard deviation

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.s_per_token if self.s_per_token > 0 else math.nan

    @property
    def tokens_per_s_ci(self) -> tuple[float, float]:
        """Inverted slope interval; the upper bound is infinite when the slope's lower bound is not above zero."""
        lo, hi = self.s_per_token_ci
        return (1.0 / hi if hi > 0 else math.nan, 1.0 / lo if lo > 0 else math.inf)


def fit_line(x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE) -> LinearFit | None:
    """Least-squares line through (x, y) with t-based intervals on slope and intercept; None below 3 points or
    when x does not vary."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = xa.size
    if n < 3 or np.ptp(xa) == 0:
        return None
    xm, ym = xa.mean(), ya.mean()
    sxx = float(((xa - xm) ** 2).sum())
    slope = float(((xa - xm) * (ya - ym)).sum() / sxx)
    icpt = float(ym - slope * xm)
    resid = ya - (icpt + slope * xa)
    sse = float((resid**2).sum())
    sst = float(((ya - ym) ** 2).sum())
    s = math.sqrt(sse / (n - 2))
    t = float(scipy.special.stdtrit(n - 2, 0.5 + confidence / 2))
    se_slope = s / math.sqrt(sxx)
    se_icpt = s * math.sqrt(1.0 / n + xm * xm / sxx)
    return LinearFit(
        s_per_token=slope,
        s_per_token_ci=(slope - t * se_slope, slope + t * se_slope),
        overhead_s=icpt,
        overhead_s_ci=(icpt - t * se_icpt, icpt + t * se_icpt),
        r2=1.0 - sse / sst if sst > 0 else 1.0,
        n=n,
        residual_s=s,
    )


def welch_diff(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """mean(a) - mean(b) with a Welch t interval: (estimate, low, high); NaN bounds when either has < 2 values."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        return math.nan, math.nan, math.nan
    d = float(xa.mean() - xb.mean())
    if xa.size < 2 or xb.size < 2:
        return d, math.nan, math.nan
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    dof = (va + vb) ** 2 / ((va**2) / (xa.size - 1) + (vb**2) / (xb.size - 1))
    half = float(scipy.special.stdtrit(dof, 0.5 + confidence / 2)) * se
    return d, d - half, d + half
