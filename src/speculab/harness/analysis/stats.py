"""Pure statistics: distribution summaries, paired A/B comparisons, intervals, tests and the crossover load."""

from __future__ import annotations

import functools
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


# --------------------------------------------------------------------------------------------------------------
# The verdict's interval: Hodges-Lehmann shift of the log ratios with its signed-rank (Walsh-average) interval.
#
# The n(n+1)/2 Walsh averages (x_i + x_j)/2, i <= j, are what the signed-rank statistic counts: T+ = #{W > 0}.
# Under "no difference" the log ratios of exchangeable arms are symmetric about 0 whatever their tails, and then
# T+ has the signed-rank null distribution exactly. Inverting the test gives the interval [W_(k), W_(M+1-k)] with
# k the largest integer such that P(T+ <= k-1) <= alpha/2, so "the interval excludes 0" and "exact two-sided
# p <= alpha" are the same event: the verdict, the interval and the p-value can never disagree. Its coverage is
# >= the nominal level for every symmetric noise distribution and every n (the bootstrap's is not: it under-covers
# with 8-32 heavy-tailed pairs; see bench/stats_coverage.py and docs/statistics.md).
# --------------------------------------------------------------------------------------------------------------

EXACT_SIGNED_RANK_MAX_N = 300  # exact null distribution up to here (~30 ms at 300); normal approximation above
MATERIALISE_WALSH_MAX_N = 2000  # up to here the Walsh averages are built (2M floats); above, found by bisection


@functools.lru_cache(maxsize=64)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2 under the null (each rank's sign a fair coin); shape [n(n+1)/2 + 1]."""
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    top = 0
    for rank in range(1, n + 1):  # T+ = sum of ranks with a positive sign: convolve with (1 + z^rank) / 2
        top += rank
        pmf[rank : top + 1] = 0.5 * (pmf[rank : top + 1] + pmf[: top + 1 - rank])
        pmf[:rank] *= 0.5
    cdf = np.cumsum(pmf)
    cdf.setflags(write=False)
    return cdf


def signed_rank_cdf(t: np.ndarray | float, n: int) -> np.ndarray:
    """P(T+ <= t) for the signed-rank statistic of n pairs; exact up to EXACT_SIGNED_RANK_MAX_N, then normal."""
    t = np.floor(np.asarray(t, dtype=float))
    m = n * (n + 1) / 2
    if n <= EXACT_SIGNED_RANK_MAX_N:
        cdf = _signed_rank_cdf(n)
        return np.where(t < 0, 0.0, cdf[np.clip(t, 0, m).astype(int)])
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return special.ndtr((t + 0.5 - m / 2) / sd)  # continuity-corrected


def signed_rank_critical_k(n: int, confidence: float = CONFIDENCE) -> int:
    """Largest k with P(T+ <= k-1) <= (1-confidence)/2; 0 when no interval at this level exists (tiny n)."""
    m = n * (n + 1) // 2
    if n < 1:
        return 0
    half_alpha = (1 - confidence) / 2
    if n <= EXACT_SIGNED_RANK_MAX_N:
        # cdf[k-1] <= alpha/2  <=>  k-1 < number of t with cdf[t] <= alpha/2 (the cdf is non-decreasing)
        k = int(np.searchsorted(_signed_rank_cdf(n), half_alpha * (1 + 1e-12), side="right"))
    else:  # largest t with ndtr((t + 0.5 - m/2) / sd) <= alpha/2, plus one; no O(n^2) array
        sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        t = math.floor(m / 2 - 0.5 + sd * float(special.ndtri(half_alpha)))
        k = t + 1 if float(signed_rank_cdf(t, n)) <= half_alpha else t  # guard the floor against rounding
    return max(0, min(k, (m + 1) // 2))


def _walsh_order_stats(x: np.ndarray, orders: Sequence[int]) -> np.ndarray:
    """The Walsh averages' order statistics (0-based) for each row of x; shape [..., len(orders)]. x: [..., n]."""
    n = x.shape[-1]
    i, j = np.triu_indices(n)
    walsh = (x[..., i] + x[..., j]) / 2  # [..., n(n+1)/2]
    return np.partition(walsh, list(orders), axis=-1)[..., list(orders)]


def _walsh_order_stat_bisect(x: np.ndarray, order: int) -> float:
    """The order-th (0-based) smallest Walsh average of a 1-D x without building them: bisection on the count."""
    xs = np.sort(x)

    def count_le(v: float) -> int:  # #{i <= j: x_i + x_j <= 2v}
        return int(np.sum(np.maximum(np.searchsorted(xs, 2 * v - xs, side="right") - np.arange(xs.size), 0)))

    lo, hi = float(xs[0]), float(xs[-1])  # every Walsh average lies in [min, max]
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if count_le(mid) >= order + 1:
            hi = mid
        else:
            lo = mid
    return hi


def hodges_lehmann_batch(x: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hodges-Lehmann estimate (median Walsh average) and signed-rank interval for each row of x: [..., n].

    Returns (estimate, low, high), each of shape x.shape[:-1]; bounds are NaN when n is too small for an interval
    at this confidence (n < 6 at 95%). Vectorised over leading axes (the coverage simulation uses it directly).
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    m = n * (n + 1) // 2
    k = signed_rank_critical_k(n, confidence)
    mid = [(m - 1) // 2, m // 2]
    orders = mid + ([k - 1, m - k] if k >= 1 else [])
    if n <= MATERIALISE_WALSH_MAX_N:
        o = _walsh_order_stats(x, orders)
    else:
        rows = x.reshape(-1, n)
        o = np.array([[_walsh_order_stat_bisect(r, q) for q in orders] for r in rows]).reshape(*x.shape[:-1], -1)
    est = (o[..., 0] + o[..., 1]) / 2
    nan = np.full(est.shape, np.nan)
    return est, (o[..., 2] if k >= 1 else nan), (o[..., 3] if k >= 1 else nan)


def signed_rank_p(x: np.ndarray) -> float:
    """Exact (normal above EXACT_SIGNED_RANK_MAX_N) two-sided signed-rank p from the Walsh-average count.

    T+ = #{W > 0} + #{W = 0}/2, the statistic the interval inverts, so p <= alpha exactly when the interval of
    `hodges_lehmann_ratio` excludes 1 (without exact zeros; with them the interval decides). 1.0 if all x == 0.
    """
    x = np.asarray(x, dtype=float)
    n = x.size
    if n < 1 or not np.any(x != 0):
        return 1.0
    m = n * (n + 1) // 2
    if n <= MATERIALISE_WALSH_MAX_N:
        i, j = np.triu_indices(n)
        w = x[i] + x[j]
        t_plus = float(np.count_nonzero(w > 0) + 0.5 * np.count_nonzero(w == 0))
    else:
        xs = np.sort(x)
        le0 = int(np.sum(np.maximum(np.searchsorted(xs, -xs, side="right") - np.arange(n), 0)))
        lt0 = int(np.sum(np.maximum(np.searchsorted(xs, -xs, side="left") - np.arange(n), 0)))
        t_plus = (m - le0) + 0.5 * (le0 - lt0)
    # Null distribution is symmetric about m/2: two-sided p = 2 * P(T+ <= min(t, m - t)).
    low_side = min(t_plus, m - t_plus)
    return float(min(1.0, 2 * float(signed_rank_cdf(math.floor(low_side), n))))


def hodges_lehmann_ratio(ratios: PairedRatios, confidence: float = CONFIDENCE) -> Interval:
    """exp(Hodges-Lehmann log ratio) with the distribution-free signed-rank interval (exact for n <= 300)."""
    x = ratios.log_ratios()
    method = "signed-rank-exact" if x.size <= EXACT_SIGNED_RANK_MAX_N else "signed-rank-normal"
    if x.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, confidence, method, 0)
    est, lo, hi = hodges_lehmann_batch(x, confidence)
    return Interval(float(np.exp(est)), float(np.exp(lo)), float(np.exp(hi)), confidence, method, int(x.size))


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """The paired verdict for one metric at one load: candidate/baseline ratios, intervals, test and verdict.

    The verdict follows `hodges_lehmann_ratio` (exp of the Hodges-Lehmann shift of the log ratios, i.e. the
    typical per-prompt ratio) and its distribution-free signed-rank interval, which is also what `speedup` and
    `speedup_interval` report, so the verdict never contradicts the interval printed beside it; `wilcoxon_p` is the
    exact signed-rank p of the same statistic (p <= 1 - confidence exactly when that interval excludes 1).
    `geomean_ratio` (BCa bootstrap) and `median_ratio` (percentile bootstrap) are reported for reading, not for
    the verdict: the bootstrap under-covers with few heavy-tailed pairs (docs/statistics.md).

    `min_detectable_change` is the relative change (0.05 = 5%) that this run would have detected with 80% power
    at the chosen confidence: in log space (z_{1-a/2} + z_{power}) * SE, with SE taken from the verdict interval's
    half-width (half-width / z_{1-a/2}). A "no detectable difference" verdict always comes with it, so a reader
    knows whether "no difference" means "< 1%" or "< 40%".
    """

    metric: str
    n_pairs: int
    n_dropped: int
    geomean_ratio: Interval  # BCa bootstrap; for reading (the verdict follows hodges_lehmann_ratio)
    median_ratio: Interval
    wilcoxon_p: float
    verdict: Verdict
    min_detectable_change: float
    lower_is_better: bool
    note: str = ""
    # Bootstrap replicates of the geometric-mean ratio (candidate/baseline), kept for the crossover interval;
    # not part of to_dict() (thousands of numbers), nor of equality.
    replicates: tuple[float, ...] = field(default=(), repr=False, compare=False)
    # The verdict's interval; None only for comparisons built by hand (then the geometric mean stands in).
    hodges_lehmann_ratio: Interval | None = None

    @property
    def verdict_ratio(self) -> Interval:
        """The interval the verdict follows (candidate/baseline)."""
        return self.hodges_lehmann_ratio if self.hodges_lehmann_ratio is not None else self.geomean_ratio

    @property
    def speedup(self) -> float:
        """baseline/candidate for a time metric (2.0 = twice as fast); candidate/baseline otherwise."""
        r = self.verdict_ratio
        return 1.0 / r.estimate if self.lower_is_better else r.estimate

    @property
    def speedup_interval(self) -> tuple[float, float]:
        r = self.verdict_ratio
        return (1.0 / r.high, 1.0 / r.low) if self.lower_is_better else (r.low, r.high)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.speedup_interval
        return {
            "metric": self.metric,
            "n_pairs": self.n_pairs,
            "n_dropped": self.n_dropped,
            "geomean_ratio": self.geomean_ratio.to_dict(),
            "median_ratio": self.median_ratio.to_dict(),
            "hodges_lehmann_ratio": self.verdict_ratio.to_dict(),
            "verdict_basis": "hodges_lehmann_ratio" if self.hodges_lehmann_ratio is not None else "geomean_ratio",
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

    The verdict follows the Hodges-Lehmann ratio's signed-rank interval (distribution-free; exact coverage for
    symmetric noise at any n): entirely below 1 -> the candidate's values are lower. That interval is the one
    `speedup_interval` reports, and the exact signed-rank p is the same test, so none of the three can disagree.
    The geometric-mean (BCa) and median (percentile) bootstrap intervals are computed for reading; `note` says
    when the geometric mean's interval would have decided differently (outliers or too few pairs).
    """
    pairs = paired_ratios(candidate, baseline)
    boot = bootstrap_geomean_ratio(pairs, rng, n_resamples, confidence)
    geo = boot.interval
    med = bootstrap_median_ratio(pairs, rng, n_resamples, confidence).interval
    hl = hodges_lehmann_ratio(pairs, confidence)
    p = signed_rank_p(pairs.log_ratios()) if pairs.n >= 2 else float("nan")
    note = ""
    if pairs.n < MIN_PAIRS:
        verdict = Verdict.INSUFFICIENT
        note = f"only {pairs.n} usable pairs; need at least {MIN_PAIRS}"
    else:
        if hl.excludes(1.0):
            lower = hl.high < 1.0
            verdict = Verdict.FASTER if lower == lower_is_better else Verdict.SLOWER
        else:
            verdict = Verdict.NO_DIFFERENCE
        if geo.excludes(1.0) != hl.excludes(1.0):
            which = "excludes" if geo.excludes(1.0) else "includes"
            note = (
                f"the geometric-mean interval {which} 1 but the signed-rank interval (the verdict's) does not: "
                "borderline, or a few outlying pairs"
            )
    return MetricComparison(
        metric=metric,
        n_pairs=pairs.n,
        n_dropped=pairs.n_dropped,
        geomean_ratio=geo,
        median_ratio=med,
        wilcoxon_p=p,
        verdict=verdict,
        min_detectable_change=min_detectable_change(hl),
        lower_is_better=lower_is_better,
        note=note,
        replicates=tuple(boot.replicates.tolist()),
        hodges_lehmann_ratio=hl,
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
