"""Pure statistics for one sample or a few repeats: distribution summaries, t and Wilson intervals, McNemar, and
least-squares lines with t intervals.

A/B comparisons (the verdicts) are `paired`; the exact rank machinery behind them `ranks` (signed-rank for pairs,
rank-sum for two unpaired samples); the crossover load `crossover`. scipy.stats (~0.7 s to import) is imported
inside the functions that need it: every `speculab bench` run imports this module for describe(), and should not
pay for tests it never runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special

PERCENTILES = (50, 90, 95, 99)
# The false-positive rate every verdict is held to: intervals at 1 - ALPHA, adaptive repeats spend it across looks,
# the correctness tests use it; stricter levels elsewhere have names of their own (prefix_cache.WARNING_ALPHA).
ALPHA = 0.05
CONFIDENCE = 1 - ALPHA  # == 0.95 exactly in binary floating point
POWER = 0.80  # the power used to define the minimum detectable effect
EXACT_MCNEMAR_BELOW = 25


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
    z0 = float(special.ndtri(p0))
    jack = (x.sum() - x) / (n - 1)  # leave-one-out means, shape [n]
    d = jack.mean() - jack
    denom = 6.0 * float(np.sum(d**2)) ** 1.5
    a = float(np.sum(d**3)) / denom if denom > 0 else 0.0
    z = float(special.ndtri(0.5 + confidence / 2))
    lo_p = float(special.ndtr(z0 + (z0 - z) / (1 - a * (z0 - z))))
    hi_p = float(special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z))))
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
    half = float(special.stdtrit(a.size - 1, 0.5 + confidence / 2)) * float(a.std(ddof=1)) / math.sqrt(a.size)
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
    z = float(special.ndtri(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), confidence, "wilson", n)


def paired_difference(
    candidate_pass: Mapping[int, bool], baseline_pass: Mapping[int, bool], confidence: float = CONFIDENCE
) -> Interval:
    """Pass rate candidate minus baseline over the prompts judged in both (a fraction: -0.05 = 5 points lower), with
    the Agresti-Min interval for paired proportions (Wald after adding 1/2 to each of the four cells: sane at 0 and
    n discordant pairs, close to nominal from n ~ 10; Agresti & Min 2005)."""
    common = sorted(set(candidate_pass) & set(baseline_pass))
    n = len(common)
    nan = float("nan")
    if n == 0:
        return Interval(nan, nan, nan, confidence, "agresti-min", 0)
    c_only = sum(1 for i in common if candidate_pass[i] and not baseline_pass[i])
    b_only = sum(1 for i in common if baseline_pass[i] and not candidate_pass[i])
    n_adj, c_adj, b_adj = n + 2, c_only + 0.5, b_only + 0.5
    d_adj = (c_adj - b_adj) / n_adj
    se = math.sqrt(max((c_adj + b_adj) - (c_adj - b_adj) ** 2 / n_adj, 0.0)) / n_adj
    z = float(special.ndtri(0.5 + confidence / 2))
    return Interval(
        (c_only - b_only) / n, max(-1.0, d_adj - z * se), min(1.0, d_adj + z * se), confidence, "agresti-min", n
    )


@dataclass(frozen=True, slots=True)
class McNemarResult:
    """Paired pass/fail: b = baseline passed and candidate failed, c = the reverse. Only discordant pairs count."""

    n_pairs: int
    b: int
    c: int
    p_value: float
    method: str  # "exact-binomial" (b + c < 25) or "chi2-continuity"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mcnemar_counts(b: int, c: int, n_pairs: int | None = None) -> McNemarResult:
    """McNemar test from discordant counts: exact two-sided binomial when b + c < 25, else chi-square (1 df, CC)."""
    n = b + c
    if n == 0:
        return McNemarResult(n_pairs if n_pairs is not None else 0, b, c, 1.0, "exact-binomial")
    if n < EXACT_MCNEMAR_BELOW:
        from scipy import stats as scipy_stats

        p = float(scipy_stats.binomtest(min(b, c), n, 0.5).pvalue)
        method = "exact-binomial"
    else:
        chi2 = (abs(b - c) - 1) ** 2 / n
        p = float(special.chdtrc(1, chi2))  # chi-square survival function, 1 degree of freedom
        method = "chi2-continuity"
    return McNemarResult(n_pairs if n_pairs is not None else n, b, c, min(1.0, p), method)


def mcnemar(candidate_pass: Mapping[int, bool], baseline_pass: Mapping[int, bool]) -> McNemarResult:
    """McNemar test over the indices checked in both arms."""
    common = set(candidate_pass) & set(baseline_pass)
    b = sum(1 for i in common if baseline_pass[i] and not candidate_pass[i])
    c = sum(1 for i in common if candidate_pass[i] and not baseline_pass[i])
    return mcnemar_counts(b, c, len(common))


def two_proportion_p(p1: float, n1: int, p2: float, n2: int) -> float:
    """Two-sided p of the pooled two-proportion z-test of p1 (over n1 trials) against p2 (over n2); 1.0 when it
    cannot be computed (no trials, or a pooled proportion of 0 or 1: no variance, so no evidence of a difference)."""
    if n1 <= 0 or n2 <= 0:
        return 1.0
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if var <= 0:
        return 1.0 if p1 == p2 else 0.0
    z = abs(p1 - p2) / math.sqrt(var)
    return float(2 * special.ndtr(-z))


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
    t = float(special.stdtrit(n - 2, 0.5 + confidence / 2))
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
    half = float(special.stdtrit(dof, 0.5 + confidence / 2)) * se
    return d, d - half, d + half
