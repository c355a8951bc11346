"""Paired pass/fail tests: the Agresti-Min paired difference, McNemar, and the pooled two-proportion z-test."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import scipy

from speculab.harness.stats.intervals import CONFIDENCE, Interval

EXACT_MCNEMAR_BELOW = 25


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
    z = float(scipy.special.ndtri(0.5 + confidence / 2))
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
        p = float(scipy.special.chdtrc(1, chi2))  # chi-square survival function, 1 degree of freedom
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
    return float(2 * scipy.special.ndtr(-z))
