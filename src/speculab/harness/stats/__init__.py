"""Base statistics every stage may use: one sample summarised, confidence intervals, paired pass/fail tests,
the exact rank tests behind the verdicts, and alpha spending across looks. It knows nothing of requests,
records, engines or the A/B; below every other harness package."""

from speculab.harness.stats.intervals import (
    ALPHA,
    CONFIDENCE,
    POWER,
    Interval,
    LinearFit,
    bca_mean_bounds,
    cluster_ratio_interval,
    fit_line,
    repeat_ratio_interval,
    resample_stat,
    t_interval,
    welch_diff,
    wilson_interval,
)
from speculab.harness.stats.proportions import (
    EXACT_MCNEMAR_BELOW,
    McNemarResult,
    mcnemar,
    mcnemar_counts,
    paired_difference,
    two_proportion_p,
)
from speculab.harness.stats.sample import PERCENTILES, Distribution, describe

__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "EXACT_MCNEMAR_BELOW",
    "PERCENTILES",
    "POWER",
    "Distribution",
    "Interval",
    "LinearFit",
    "McNemarResult",
    "bca_mean_bounds",
    "cluster_ratio_interval",
    "describe",
    "fit_line",
    "mcnemar",
    "mcnemar_counts",
    "paired_difference",
    "repeat_ratio_interval",
    "resample_stat",
    "t_interval",
    "two_proportion_p",
    "welch_diff",
    "wilson_interval",
]
