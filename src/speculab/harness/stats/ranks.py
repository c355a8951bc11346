"""The exact rank machinery behind every A/B verdict (pure): for paired prompts, the null distribution of the
signed-rank T+, its critical values, and the Hodges-Lehmann estimate with its Walsh-average interval (vectorised over
leading axes); for two unpaired samples (`speculab compare` of runs that sent different prompts), the same for the
rank-sum (Mann-Whitney) U and the two-sample Hodges-Lehmann shift.

The verdict's interval: Hodges-Lehmann shift of the log ratios with its signed-rank (Walsh-average) interval.

The n(n+1)/2 Walsh averages (x_i + x_j)/2, i <= j, are what the signed-rank statistic counts: T+ = #{W > 0}.
Under "no difference" the log ratios of exchangeable arms are symmetric about 0 whatever their tails, and then
T+ has the signed-rank null distribution exactly. Inverting the test gives the interval [W_(k), W_(M+1-k)] with
k the largest integer such that P(T+ <= k-1) <= alpha/2, so "the interval excludes 0" and "exact two-sided
p <= alpha" are the same event: the verdict, the interval and the p-value can never disagree. Its coverage is
>= the nominal level for every symmetric noise distribution and every n (the bootstrap's is not: it under-covers
with 8-32 heavy-tailed pairs; see bench/stats_coverage.py and docs/statistics.md).

Unpaired, the m*n differences D = x_i - y_j play the Walsh averages' part: U = #{D > 0} has the rank-sum null
distribution exactly when the two samples are drawn from one distribution, and [D_(k), D_(mn+1-k)] is the
distribution-free interval of the shift between the two distributions (exact coverage under a location shift of
the logs; a change of spread as well as of location makes it approximate).
--------------------------------------------------------------------------------------------------------------
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import scipy

from speculab.harness.stats import CONFIDENCE

EXACT_SIGNED_RANK_MAX_N = 300  # exact null distribution up to here (~30 ms at 300); normal approximation above
MATERIALISE_WALSH_MAX_N = 2000  # up to here the Walsh averages are built (2M floats); above, found by bisection
# the exact U distribution when the smaller sample has at most 80 (its recursion loses precision beyond about 100
# steps: the normal approximation is within 1e-3 of exact by then) and m*n is at most 250,000; normal otherwise
EXACT_RANK_SUM_MAX_SMALLER, EXACT_RANK_SUM_MAX_MN = 80, 250_000
MATERIALISE_DIFFERENCES_MAX_MN = 4_000_000  # up to here the m*n differences are built (32 MB); above, bisection


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
    return scipy.special.ndtr((t + 0.5 - m / 2) / sd)  # continuity-corrected


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
        t = math.floor(m / 2 - 0.5 + sd * float(scipy.special.ndtri(half_alpha)))
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

    return _bisect_order_stat(count_le, float(xs[0]), float(xs[-1]), order)  # every Walsh average in [min, max]


def _bisect_order_stat(count_le: Callable[[float], int], lo: float, hi: float, order: int) -> float:
    """The order-th (0-based) smallest of values in [lo, hi] known only by `count_le(v)` (how many are <= v):
    bisection to the float resolution."""
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


# ---------------------------------------------------------------------------------------------------------------
# Two unpaired samples: the rank-sum (Mann-Whitney) U and the two-sample Hodges-Lehmann shift.
# ---------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def _rank_sum_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0..m*n under the null (every split of the m + n ranks equally likely); shape [m*n + 1].

    The counts are the coefficients of the Gaussian binomial [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) /
    (1 - q^i): each step multiplies by (1 - q^(n+i)) and divides by (1 - q^i) (a running sum with stride i), and is
    rescaled to sum 1 (the coefficients would overflow a float beyond m + n of about 1,000). Each step's running
    sum cancels large terms: fine to ~1e-14 for up to 80 steps, 1e-8 at 100, garbage at 200 (hence `_exact`)."""
    m, n = min(m, n), max(m, n)  # U's distribution is the same either way round; fewer steps with the smaller
    poly = np.ones(1)
    for i in range(1, m + 1):
        grown = np.zeros(i * n + 1)
        grown[: poly.size] = poly
        grown[n + i :] -= poly[: grown.size - n - i]  # times (1 - q^(n+i)), truncated at degree i*n (exact)
        pad = (-grown.size) % i
        cols = np.concatenate([grown, np.zeros(pad)]).reshape(-1, i)
        poly = np.cumsum(cols, axis=0).ravel()[: grown.size]  # divided by (1 - q^i): r[k] = c[k] + r[k - i]
        poly = np.clip(poly, 0.0, None) / poly.sum()
    cdf = np.cumsum(poly)
    cdf.setflags(write=False)
    return cdf


def _exact(m: int, n: int) -> bool:
    return min(m, n) <= EXACT_RANK_SUM_MAX_SMALLER and m * n <= EXACT_RANK_SUM_MAX_MN


def rank_sum_method(m: int, n: int) -> str:
    """How `rank_sum_cdf` computes for samples of m and n: "rank-sum-exact" or "rank-sum-normal" (an Interval's)."""
    return "rank-sum-exact" if _exact(m, n) else "rank-sum-normal"


def rank_sum_cdf(u: float, m: int, n: int) -> float:
    """P(U <= u) for the Mann-Whitney U of samples of m and n; exact for small samples (`_exact`), else normal
    (continuity-corrected, without a tie correction: ties of measured times are rare)."""
    u = math.floor(u)
    if u < 0:
        return 0.0
    if u >= m * n:
        return 1.0
    if _exact(m, n):
        return float(_rank_sum_cdf(m, n)[u])
    sd = math.sqrt(m * n * (m + n + 1) / 12)
    return float(scipy.special.ndtr((u + 0.5 - m * n / 2) / sd))


def rank_sum_critical_k(m: int, n: int, confidence: float = CONFIDENCE) -> int:
    """Largest k with P(U <= k-1) <= (1-confidence)/2; 0 when no interval at this level exists (tiny samples)."""
    mn = m * n
    if mn < 1:
        return 0
    half_alpha = (1 - confidence) / 2
    if _exact(m, n):
        k = int(np.searchsorted(_rank_sum_cdf(m, n), half_alpha * (1 + 1e-12), side="right"))
    else:
        sd = math.sqrt(mn * (m + n + 1) / 12)
        t = math.floor(mn / 2 - 0.5 + sd * float(scipy.special.ndtri(half_alpha)))
        k = t + 1 if rank_sum_cdf(t, m, n) <= half_alpha else t
    return max(0, min(k, (mn + 1) // 2))


def _difference_order_stats(x: np.ndarray, y: np.ndarray, orders: Sequence[int]) -> list[float]:
    """The order-th (0-based) smallest of the m*n differences x_i - y_j, for each of `orders`."""
    if x.size * y.size <= MATERIALISE_DIFFERENCES_MAX_MN:
        d = np.subtract.outer(x, y).ravel()
        return [float(v) for v in np.partition(d, list(orders))[list(orders)]]
    ys = np.sort(y)

    def count_le(v: float) -> int:  # #{(i, j): x_i - y_j <= v} = #{y_j >= x_i - v}
        return int(np.sum(ys.size - np.searchsorted(ys, x - v, side="left")))

    lo, hi = float(x.min() - ys[-1]), float(x.max() - ys[0])  # every difference lies in [lo, hi]
    return [_bisect_order_stat(count_le, lo, hi, order) for order in orders]


def hodges_lehmann_shift(x: np.ndarray, y: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(estimate, low, high) of the shift x - y: the median of the m*n differences with the rank-sum interval
    [D_(k), D_(mn+1-k)]; the bounds are NaN when the samples are too small for an interval (m = n = 3 at 95 %)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    mn = x.size * y.size
    if mn == 0:
        return math.nan, math.nan, math.nan
    k = rank_sum_critical_k(x.size, y.size, confidence)
    orders = [(mn - 1) // 2, mn // 2] + ([k - 1, mn - k] if k >= 1 else [])
    o = _difference_order_stats(x, y, orders)
    est = (o[0] + o[1]) / 2
    return (est, o[2], o[3]) if k >= 1 else (est, math.nan, math.nan)


def rank_sum_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided Mann-Whitney p from U = #{x_i - y_j > 0} + #{= 0}/2, the statistic `hodges_lehmann_shift`'s
    interval inverts (so p <= alpha exactly when it excludes 0, without exact ties); 1.0 when every x_i == y_j."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    mn = x.size * y.size
    if mn == 0:
        return math.nan
    ys = np.sort(y)
    below = int(np.sum(np.searchsorted(ys, x, side="left")))  # pairs with y_j < x_i: D > 0
    ties = int(np.sum(np.searchsorted(ys, x, side="right"))) - below
    if ties == mn:
        return 1.0
    u = below + 0.5 * ties
    return float(min(1.0, 2 * rank_sum_cdf(math.floor(min(u, mn - u)), x.size, y.size)))
