"""The exact signed-rank machinery behind every A/B verdict: the null distribution of T+, its critical values, and
the Hodges-Lehmann estimate with its Walsh-average interval (pure, vectorised over leading axes).

The verdict's interval: Hodges-Lehmann shift of the log ratios with its signed-rank (Walsh-average) interval.

The n(n+1)/2 Walsh averages (x_i + x_j)/2, i <= j, are what the signed-rank statistic counts: T+ = #{W > 0}.
Under "no difference" the log ratios of exchangeable arms are symmetric about 0 whatever their tails, and then
T+ has the signed-rank null distribution exactly. Inverting the test gives the interval [W_(k), W_(M+1-k)] with
k the largest integer such that P(T+ <= k-1) <= alpha/2, so "the interval excludes 0" and "exact two-sided
p <= alpha" are the same event: the verdict, the interval and the p-value can never disagree. Its coverage is
>= the nominal level for every symmetric noise distribution and every n (the bootstrap's is not: it under-covers
with 8-32 heavy-tailed pairs; see bench/stats_coverage.py and docs/statistics.md).
--------------------------------------------------------------------------------------------------------------
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from speculab.harness.analysis.stats import CONFIDENCE

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
