"""The margin rule: the smallest change that matters, and the four answers (faster, slower, equivalent,
inconclusive) a speedup interval gives against it (docs/statistics.md, "The margin" and "Four answers")."""

from __future__ import annotations

import math
from enum import Enum

import scipy

from speculab.harness.stats import POWER

# The smallest change that matters, as a relative change of a metric: +-3 %. Two launches of one command differ by a
# few tenths of a percent on the engines here and by more on GPUs (docs/statistics.md, "The margin"): a difference
# below the margin is no reason to turn speculation on or off, however precisely it is measured.
DEFAULT_MARGIN = 0.03


class Decision(str, Enum):
    """The answer for one metric, from its interval and the margin m (docs/statistics.md, "Four answers"):
    the speedup interval entirely above 1 + m -> faster; entirely below 1 / (1 + m) -> slower; entirely within
    [1 / (1 + m), 1 + m] -> equivalent ("no difference larger than m"); straddling a margin -> inconclusive."""

    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    INSUFFICIENT = "not enough paired data"


def decide(speedup_low: float, speedup_high: float, margin: float) -> Decision:
    """The four answers from a speedup interval (> 1 = better) and a relative margin (0.03 = 3 %), symmetric on the
    log scale. With one (1 - a) interval this is two one-sided tests at a / 2 each for "equivalent", and one-sided
    tests at a / 2 of "beyond the margin" for faster and slower: the printed interval decides, by eye."""
    if not (math.isfinite(speedup_low) and math.isfinite(speedup_high) and speedup_low > 0 and margin >= 0):
        return Decision.INSUFFICIENT
    hi_bound, lo_bound = 1.0 + margin, 1.0 / (1.0 + margin)
    if speedup_low > hi_bound:
        return Decision.FASTER
    if speedup_high < lo_bound:
        return Decision.SLOWER
    if speedup_low >= lo_bound and speedup_high <= hi_bound:
        return Decision.EQUIVALENT
    return Decision.INCONCLUSIVE


def to_decide(
    speedup: float, speedup_low: float, speedup_high: float, margin: float, confidence: float, power: float = POWER
) -> float:
    """How many times today's units (prompts, groups, launches) would likely decide an inconclusive comparison:
    the interval narrows as 1 / sqrt(units), and it decides once (z_a + z_power) standard errors fit between the
    estimate and the nearer margin (the estimate taken as the truth). inf when the estimate sits on a margin; NaN
    without an interval."""
    if not (math.isfinite(speedup_low) and math.isfinite(speedup_high) and 0 < speedup_low < speedup_high):
        return float("nan")
    z_a = float(scipy.special.ndtri(0.5 + confidence / 2))
    se = (math.log(speedup_high) - math.log(speedup_low)) / (2 * z_a)
    distance = abs(abs(math.log(speedup)) - math.log1p(margin))
    if distance < 1e-9:  # on the margin (to rounding): no number of units is likely to decide it
        return math.inf
    return max(1.0, ((z_a + float(scipy.special.ndtri(power))) * se / distance) ** 2)
