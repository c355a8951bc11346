"""Pure statistics: distribution summaries, paired A/B comparisons, intervals, tests and the crossover load."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from scipy import special

# scipy.stats (~0.7 s to import) is imported inside the two functions that need it: every `speculab bench` run
# imports this module for describe(), and should not pay for a signed-rank test it never runs.

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


def describe(values: Iterable[float]) -> Distribution:
    """mean, sample std (ddof=1; NaN for one value), min/max and linear-interpolated percentiles of `values`."""
    a = np.asarray(list(values), dtype=float)
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


# --------------------------------------------------------------------------------------------------------------
# Paired comparisons: candidate / baseline per prompt.
#
# Every A/B number speculab reports is a ratio candidate/baseline of one metric for the same prompt (same index,
# same seed, same limits), so prompt-to-prompt variation (long prompts are slow in both arms) cancels. We work in
# log space: log ratios are symmetric (0.5x and 2x are equally far from 1), their mean is the log of the
# geometric-mean ratio, and under "no difference" with exchangeable arms they are symmetric around 0, which is
# exactly the assumption of the Wilcoxon signed-rank test. See docs/statistics.md.
# --------------------------------------------------------------------------------------------------------------

CONFIDENCE = 0.95
N_RESAMPLES = 2000
MIN_PAIRS = 6  # below this a two-sided signed-rank test cannot reach p < 0.05 at all; we give no verdict
POWER = 0.80  # the power used to define the minimum detectable effect


class Verdict(str, Enum):
    """Direction of a paired comparison; for time metrics "faster" means the candidate's values are lower."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no detectable difference"
    INSUFFICIENT = "not enough paired data"


@dataclass(frozen=True, slots=True)
class PairedRatios:
    """Per-prompt ratios candidate/baseline over indices present, finite and > 0 in both arms."""

    indices: tuple[int, ...]
    ratios: tuple[float, ...]
    n_dropped: int  # indices present in either arm but unusable (missing in one, NaN, inf, <= 0)

    @property
    def n(self) -> int:
        return len(self.ratios)

    def log_ratios(self) -> np.ndarray:
        return np.log(np.asarray(self.ratios, dtype=float))

    def to_dict(self) -> dict[str, Any]:
        return {"indices": list(self.indices), "ratios": list(self.ratios), "n_dropped": self.n_dropped}


def paired_ratios(candidate: Mapping[int, float], baseline: Mapping[int, float]) -> PairedRatios:
    """candidate[i] / baseline[i] for every index i usable in both (finite and > 0), sorted by index."""
    keys = set(candidate) | set(baseline)
    indices: list[int] = []
    ratios: list[float] = []
    for i in sorted(keys):
        if i not in candidate or i not in baseline:
            continue
        c, b = float(candidate[i]), float(baseline[i])
        # Ratios of zero, negative or missing values have no meaning on a log scale (a TPOT of 0 is a one-token
        # answer, not an infinitely fast one); they are counted, not silently used.
        if math.isfinite(c) and math.isfinite(b) and c > 0 and b > 0:
            indices.append(i)
            ratios.append(c / b)
    return PairedRatios(tuple(indices), tuple(ratios), len(keys) - len(indices))


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


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """An interval and the bootstrap replicates it came from (kept for the crossover interval)."""

    interval: Interval
    replicates: np.ndarray  # shape [n_resamples]; same scale as interval.estimate


def _resample_stat(x: np.ndarray, stat: str, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """`stat` ("mean" or "median") of n_resamples resamples of x with replacement; chunked to bound memory."""
    n = x.size
    out = np.empty(n_resamples)
    rows = max(1, 4_000_000 // max(n, 1))  # at most ~32 MB of int64 indices per chunk
    for start in range(0, n_resamples, rows):
        stop = min(n_resamples, start + rows)
        sample = x[rng.integers(0, n, size=(stop - start, n))]  # [rows, n]
        out[start:stop] = sample.mean(axis=1) if stat == "mean" else np.median(sample, axis=1)
    return out


def _bca_bounds(x: np.ndarray, theta: float, reps: np.ndarray, confidence: float) -> tuple[float, float]:
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


def bootstrap_geomean_ratio(
    ratios: PairedRatios, rng: np.random.Generator, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE
) -> BootstrapResult:
    """Geometric-mean ratio exp(mean log r) with a BCa bootstrap interval; replicates are ratios, not logs."""
    x = ratios.log_ratios()
    if x.size < 2:
        nan = float("nan")
        est = float(np.exp(x.mean())) if x.size else nan
        return BootstrapResult(Interval(est, nan, nan, confidence, "bootstrap-bca", int(x.size)), np.empty(0))
    theta = float(x.mean())
    reps = _resample_stat(x, "mean", rng, n_resamples)
    if np.ptp(x) == 0:  # every pair has the same ratio: no sampling variability to speak of
        lo = hi = theta
    else:
        lo, hi = _bca_bounds(x, theta, reps, confidence)
    interval = Interval(math.exp(theta), math.exp(lo), math.exp(hi), confidence, "bootstrap-bca", int(x.size))
    return BootstrapResult(interval, np.exp(reps))


def bootstrap_median_ratio(
    ratios: PairedRatios, rng: np.random.Generator, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE
) -> BootstrapResult:
    """Median per-prompt ratio with a percentile bootstrap interval (BCa's jackknife is unreliable for medians)."""
    r = np.asarray(ratios.ratios, dtype=float)
    if r.size < 2:
        nan = float("nan")
        est = float(r[0]) if r.size else nan
        return BootstrapResult(Interval(est, nan, nan, confidence, "bootstrap-percentile", int(r.size)), np.empty(0))
    reps = _resample_stat(r, "median", rng, n_resamples)
    lo, hi = np.quantile(reps, [0.5 - confidence / 2, 0.5 + confidence / 2])
    interval = Interval(float(np.median(r)), float(lo), float(hi), confidence, "bootstrap-percentile", int(r.size))
    return BootstrapResult(interval, reps)


def wilcoxon_log_ratios(ratios: PairedRatios) -> float:
    """Two-sided Wilcoxon signed-rank p of log ratios vs 0; 1.0 when every ratio is exactly 1; NaN if n < 2."""
    x = ratios.log_ratios()
    if x.size < 2:
        return float("nan")
    if not np.any(x != 0):
        return 1.0
    from scipy import stats as scipy_stats

    # zero_method="wilcox" drops exact ties (identical values in both arms carry no direction).
    return float(scipy_stats.wilcoxon(x, zero_method="wilcox", alternative="two-sided").pvalue)


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """The paired verdict for one metric at one load: candidate/baseline ratios, intervals, test and verdict.

    `min_detectable_change` is the relative change (0.05 = 5%) that this run would have detected with 80% power
    at the chosen confidence: in log space (z_{1-a/2} + z_{power}) * SE, with SE taken from the bootstrap interval's
    half-width (half-width / z_{1-a/2}). A "no detectable difference" verdict always comes with it, so a reader
    knows whether "no difference" means "< 1%" or "< 40%".
    """

    metric: str
    n_pairs: int
    n_dropped: int
    geomean_ratio: Interval  # the verdict's interval
    median_ratio: Interval
    wilcoxon_p: float
    verdict: Verdict
    min_detectable_change: float
    lower_is_better: bool
    note: str = ""
    # Bootstrap replicates of the geometric-mean ratio (candidate/baseline), kept for the crossover interval;
    # not part of to_dict() (thousands of numbers), nor of equality.
    replicates: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @property
    def speedup(self) -> float:
        """baseline/candidate for a time metric (2.0 = twice as fast); candidate/baseline otherwise."""
        r = self.geomean_ratio
        return 1.0 / r.estimate if self.lower_is_better else r.estimate

    @property
    def speedup_interval(self) -> tuple[float, float]:
        r = self.geomean_ratio
        return (1.0 / r.high, 1.0 / r.low) if self.lower_is_better else (r.low, r.high)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.speedup_interval
        return {
            "metric": self.metric,
            "n_pairs": self.n_pairs,
            "n_dropped": self.n_dropped,
            "geomean_ratio": self.geomean_ratio.to_dict(),
            "median_ratio": self.median_ratio.to_dict(),
            "wilcoxon_p": self.wilcoxon_p,
            "verdict": self.verdict.value,
            "min_detectable_change": self.min_detectable_change,
            "lower_is_better": self.lower_is_better,
            "speedup": self.speedup,
            "speedup_low": lo,
            "speedup_high": hi,
            "note": self.note,
        }


def min_detectable_change(interval: Interval, power: float = POWER) -> float:
    """Relative change detectable with `power` given a log-scale interval's width: exp((z_a + z_b) * SE) - 1."""
    if not (interval.low > 0 and interval.high > 0):
        return float("nan")
    z_a = float(special.ndtri(0.5 + interval.confidence / 2))
    se_log = (math.log(interval.high) - math.log(interval.low)) / (2 * z_a)
    return math.expm1((z_a + float(special.ndtri(power))) * se_log)


def compare_paired(
    metric: str,
    candidate: Mapping[int, float],
    baseline: Mapping[int, float],
    rng: np.random.Generator,
    *,
    lower_is_better: bool = True,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> MetricComparison:
    """Pair per-prompt values of one metric and decide: faster, slower or no detectable difference.

    The verdict follows the geometric-mean ratio's BCa interval (the interval the report prints, so the verdict
    never contradicts it): entirely below 1 -> the candidate's values are lower. The Wilcoxon p-value is reported
    beside it and a note flags the rare case where the two disagree.
    """
    pairs = paired_ratios(candidate, baseline)
    boot = bootstrap_geomean_ratio(pairs, rng, n_resamples, confidence)
    geo = boot.interval
    med = bootstrap_median_ratio(pairs, rng, n_resamples, confidence).interval
    p = wilcoxon_log_ratios(pairs)
    note = ""
    if pairs.n < MIN_PAIRS:
        verdict = Verdict.INSUFFICIENT
        note = f"only {pairs.n} usable pairs; need at least {MIN_PAIRS}"
    elif geo.excludes(1.0):
        lower = geo.high < 1.0
        verdict = Verdict.FASTER if lower == lower_is_better else Verdict.SLOWER
        if p >= 1 - confidence:
            note = f"interval excludes 1 but signed-rank p = {p:.3g}: borderline"
    else:
        verdict = Verdict.NO_DIFFERENCE
        if p < 1 - confidence:
            note = f"interval includes 1 but signed-rank p = {p:.3g}: borderline"
    return MetricComparison(
        metric=metric,
        n_pairs=pairs.n,
        n_dropped=pairs.n_dropped,
        geomean_ratio=geo,
        median_ratio=med,
        wilcoxon_p=p,
        verdict=verdict,
        min_detectable_change=min_detectable_change(geo),
        lower_is_better=lower_is_better,
        note=note,
        replicates=tuple(boot.replicates.tolist()),
    )


# --------------------------------------------------------------------------------------------------------------
# Intervals from a few repeats (throughput, cost) and for proportions (pass rates).
# --------------------------------------------------------------------------------------------------------------


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


EXACT_MCNEMAR_BELOW = 25


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


# --------------------------------------------------------------------------------------------------------------
# Crossover: the load where speculation stops paying.
# --------------------------------------------------------------------------------------------------------------


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
        """The speedup of a time metric's comparison at one load, replicates converted to speedups."""
        lo, hi = c.speedup_interval
        reps = tuple(1.0 / r for r in c.replicates) if c.lower_is_better else c.replicates
        return cls(load, c.speedup, lo, hi, reps)


class CrossoverStatus(str, Enum):
    CROSSES = "crosses"  # speedup > 1 at low load and <= 1 at a higher one
    ALWAYS_FASTER = "faster at every load measured"
    NEVER_FASTER = "not faster at any load measured"
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


def _crossing(loads: np.ndarray, speedups: np.ndarray, log_load: bool) -> float | None:
    """First load where log-speedup goes from > 0 to <= 0, interpolated linearly; None if it never does.

    Returns -inf if the curve is already <= 1 at the first load, +inf if it stays > 1 throughout.
    """
    s = np.log(np.maximum(speedups, 1e-300))
    if s[0] <= 0:
        return -math.inf
    x = np.log(loads) if log_load else loads
    for j in range(1, s.size):
        if s[j] <= 0:
            frac = s[j - 1] / (s[j - 1] - s[j])  # in [0, 1): where the straight line hits 0
            xc = x[j - 1] + frac * (x[j] - x[j - 1])
            return float(math.exp(xc) if log_load else xc)
    return math.inf


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
        xs = np.array([_crossing(loads, reps[:, j], log_load) for j in range(reps.shape[1])])
        # inverted_cdf picks order statistics, never interpolating between -inf/inf and a finite crossing.
        q_lo, q_hi = np.quantile(xs, [0.5 - confidence / 2, 0.5 + confidence / 2], method="inverted_cdf")
        method = "bootstrap-replicates"
    else:
        # The upper curve crosses 1 last (latest load at which speculation could still pay), the lower curve first.
        q_lo = _crossing(loads, np.array([p.low for p in pts]), log_load)
        q_hi = _crossing(loads, np.array([p.high for p in pts]), log_load)
        method = "interval-endpoints"

    if point == -math.inf:
        status = CrossoverStatus.NEVER_FASTER
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
