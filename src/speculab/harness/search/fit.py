"""Where the effect of speculation crosses zero as load grows: a monotone fit with a bootstrap interval.

Each probe is a load with the per-unit effects measured there (log baseline/candidate of the deciding metric, one per
group of prompts sent together: the verdict's units, docs/statistics.md). The only shape assumed is that the effect
does not grow with load (speculation's spare compute shrinks as batches fill), so the fit is a weighted isotonic
(non-increasing) regression of each load's mean effect, weighted by its units.

Monotonicity alone says where the curve crosses zero only to within the two probes around the crossing: between
them it may cross anywhere. So the interval is built from those brackets, not from an interpolation: each bootstrap
replicate (every load's units resampled, the fit redone) gives its bracket, the last load still faster and the first
one not; the interval runs from the low quantile of the brackets' lower ends to the high quantile of their upper
ends. A replicate that never crosses brackets the crossing beyond the highest probe; one slower already at the lowest
probe, below it. The point estimate does interpolate (linearly between the two probes around it), because a single
number is asked for; the interval never relies on that line. See docs/statistics.md, "Searching for the crossover".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy

from speculab.harness.analysis.crossover import crossing_interval, first_crossings
from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.stats import CONFIDENCE

CROSSES = "crosses"
FASTER_THROUGHOUT = "faster throughout"  # the interval lies beyond the highest probe
SLOWER_THROUGHOUT = "slower throughout"  # the interval lies below the lowest probe
UNDETERMINED = "undetermined"  # no crossing in the fit, but the evidence at the end is not decided either way
# slower at a lower load and faster at a higher one, each decided on its own units: the effect grows with load (a
# draft that pays only once the batch is busy), which a fit that never rises cannot place a crossing in
RISES = "rises"


@dataclass(frozen=True, slots=True)
class Probe:
    """One measurement at one load: `effects` holds one log(baseline / candidate) per pairing unit (> 0: speculation
    is faster there). A load probed twice is two probes; the fit pools their units."""

    load: float  # the concurrency (or request rate) measured
    effects: tuple[float, ...]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.load) and self.load > 0):
            raise ValueError(f"a probe's load is a positive number, got {self.load}")


@dataclass(frozen=True, slots=True)
class CrossoverFit:
    """The fitted crossing load with its interval. `low` / `high` are loads; None where the interval reaches below the
    lowest probe / beyond the highest. "faster throughout" has `low` = the highest probe and `high` None (the crossing,
    if any, lies beyond it); "slower throughout" has `low` None and `high` = the lowest probe."""

    status: str  # CROSSES | FASTER_THROUGHOUT | SLOWER_THROUGHOUT | UNDETERMINED | RISES
    estimate: float | None  # the load where the fitted effect crosses 0 (None unless it crosses)
    low: float | None
    high: float | None
    confidence: float
    points: tuple[tuple[float, float, float, float], ...]  # per probed load: (load, measured, fitted effect, n units)
    method: str  # one phrase: how the fit and interval were made

    @property
    def width(self) -> float:
        """high - low in load units; inf where either end reaches past the probed range."""
        return math.inf if self.low is None or self.high is None else self.high - self.low


def pooled_probes(probes: Sequence[Probe]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct loads probed, ascending, and each one's units (re-measurements pooled); loads without units
    are left out. A unit that is not a finite number (a zero time's log ratio) is left out too, visibly: the
    points' unit counts are what the fit used, and a NaN would otherwise pass every comparison and decide nothing."""
    units: dict[float, list[float]] = defaultdict(list)
    for p in probes:
        units[float(p.load)].extend(float(e) for e in p.effects if math.isfinite(e))
    loads = sorted(x for x, u in units.items() if u)
    return np.array(loads, dtype=float), [np.array(units[x], dtype=float) for x in loads]


def isotonic_non_increasing(means: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-increasing fit of each row of `means` ([n_curves, k]), weights [k] > 0.

    The min-max formula f_i = min over s <= i of max over t >= i of the weighted mean of s..t is the isotonic
    regression exactly (Robertson, Wright & Dykstra 1988, thm 1.4.4); unlike scipy's PAVA, which fits one series per
    call, it fits the bootstrap's thousand series in one numpy expression. k is the number of loads probed (~10),
    so the [n_curves, k, k] table is small. tests hold it equal to scipy.optimize.isotonic_regression."""
    m = np.atleast_2d(np.asarray(means, dtype=float))
    w = np.asarray(weights, dtype=float)
    k = m.shape[1]
    cw = np.concatenate([[0.0], np.cumsum(w)])  # [k + 1]
    cs = np.concatenate([np.zeros((m.shape[0], 1)), np.cumsum(m * w, axis=1)], axis=1)  # [n, k + 1]
    s_idx, t_idx = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")  # [s, t]
    valid = t_idx >= s_idx
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = (cs[:, t_idx + 1] - cs[:, s_idx]) / (cw[t_idx + 1] - cw[s_idx])  # [n, s, t]
    avg = np.where(valid, avg, -np.inf)
    # max over t >= i for every (s, i): a running max from the right along t
    tail_max = np.flip(np.maximum.accumulate(np.flip(avg, axis=2), axis=2), axis=2)  # [n, s, i]
    tail_max = np.where(valid, tail_max, np.inf)  # only s <= i take part in the min
    return tail_max.min(axis=1)  # [n, i]


def brackets(loads: np.ndarray, fitted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each fitted curve ([n_curves, k]): the last load before the first one at or below 0, and that load
    (-inf / the lowest load when already <= 0 at the lowest; the highest load / +inf when it never is)."""
    below = fitted <= 0
    crosses = below.any(axis=1)
    j = np.argmax(below, axis=1)
    ext = np.concatenate([[-math.inf], loads, [math.inf]])  # ext[j] = load j - 1, ext[j + 1] = load j
    lower = np.where(crosses, ext[j], loads[-1])
    upper = np.where(crosses, ext[j + 1], math.inf)
    return lower, upper


def expansion(n: int, confidence: float) -> float:
    """How much to widen a load's resampled deviations: sqrt(n / (n - 1)) (the plain bootstrap's variance is
    (n - 1) / n of the mean's) times t over z at the interval's level (a mean of n units with an estimated spread
    has Student's tails, not the normal ones the bootstrap reproduces): Hesterberg's expanded percentile interval.
    At the verdict's 6 units, 1.44; at 24, 1.08."""
    q = 0.5 + confidence / 2
    return math.sqrt(n / (n - 1)) * float(scipy.special.stdtrit(n - 1, q) / scipy.special.ndtri(q))


def _replicate_means(
    units: list[np.ndarray], rng: np.random.Generator, replicates: int, confidence: float
) -> np.ndarray:
    """[replicates, k]: each load's mean over its units resampled with replacement, the deviations from the mean
    widened by `expansion` first (at 6 units the plain percentile bootstrap's 95 % interval of a mean covers 87 % of
    normal data). One unit: no spread to resample."""
    cols = []
    for u in units:
        n = u.size
        if n < 2:
            cols.append(np.full(replicates, u.mean()))
            continue
        dev = (u - u.mean()) * expansion(n, confidence)
        cols.append(u.mean() + dev[rng.integers(0, n, size=(replicates, n))].mean(axis=1))
    return np.stack(cols, axis=1)


def bootstrap_fits(
    units: Sequence[np.ndarray], rng: np.random.Generator, replicates: int, confidence: float = CONFIDENCE
) -> np.ndarray:
    """[replicates, k]: the fit redone on each load's units resampled (`pooled_probes`' order)."""
    weights = np.array([u.size for u in units], dtype=float)
    return isotonic_non_increasing(_replicate_means(list(units), rng, replicates, confidence), weights)


def _interval(loads: np.ndarray, point_fit: np.ndarray, rep_fit: np.ndarray, confidence: float) -> tuple[float, float]:
    """The crossing's interval from the replicates' brackets, widened to hold the point fit's own bracket."""
    lows, highs = brackets(loads, rep_fit)
    p_low, p_high = brackets(loads, point_fit[None, :])
    lo = min(crossing_interval(lows, confidence)[0], float(p_low[0]))
    hi = max(crossing_interval(highs, confidence)[1], float(p_high[0]))
    return lo, hi


def decided_sign(units: np.ndarray, confidence: float = CONFIDENCE) -> int:
    """+1 / -1 where one load's units alone decide the effect's sign (Student's t interval of their mean, at the
    verdict's MIN_PAIRS units or more), else 0. Measuring such a load again cannot move the crossing's interval."""
    n = units.size
    if n < MIN_PAIRS:
        return 0
    half = float(scipy.special.stdtrit(n - 1, 0.5 + confidence / 2)) * float(units.std(ddof=1)) / math.sqrt(n)
    m = float(units.mean())
    return 1 if m - half > 0 else -1 if m + half < 0 else 0


def rises(units: Sequence[np.ndarray], confidence: float = CONFIDENCE) -> bool:
    """Some load decided slower below another decided faster (`pooled_probes`' order, by load)."""
    signs = [decided_sign(u, confidence) for u in units]
    return any(a < 0 < b for i, a in enumerate(signs) for b in signs[i + 1 :])


def _status(loads: np.ndarray, point: float, lo: float, hi: float) -> str:
    """Crosses when the fit does; otherwise decided only when the interval lies wholly past one end of the probes
    (a replicate's bracket starts at the highest probe only if it never crosses, ends at the lowest only if it is
    slower there already), else undetermined."""
    if math.isfinite(point):
        return CROSSES
    if point > 0:
        return FASTER_THROUGHOUT if lo >= loads[-1] else UNDETERMINED
    return SLOWER_THROUGHOUT if hi <= loads[0] else UNDETERMINED


def fit_crossover(
    probes: Sequence[Probe],
    rng: np.random.Generator,
    *,
    confidence: float = CONFIDENCE,
    replicates: int = 1000,
    log_load: bool = False,
    quantity: str = "log effect",
    resampled: Callable[[np.ndarray], np.ndarray] | None = None,
) -> CrossoverFit:
    """The load where speculation's effect crosses from faster to slower, with a `confidence` interval from
    `replicates` bootstrap refits (module docstring). `log_load`: interpolate the point estimate in log load.
    Any per-unit quantity that does not grow with load fits the same way (`quantity` names it in `method`): an
    arm's SLO attainment above its target is the other one (harness.search.goodput). `resampled`: what the
    bootstrap draws from at each load instead of its units (the point fit always uses the units themselves)."""
    loads, units = pooled_probes(probes)
    method = (
        f"isotonic (non-increasing) fit of each load's mean {quantity}, weighted by its units; the estimate "
        f"interpolated linearly in {'log ' if log_load else ''}load; the interval from the probes around the crossing "
        f"in {replicates} bootstrap refits over each load's units (expanded percentile)"
    )
    if loads.size == 0:
        return CrossoverFit(UNDETERMINED, None, None, None, confidence, (), method)
    n = np.array([u.size for u in units], dtype=float)
    means = np.array([u.mean() for u in units])
    fitted = isotonic_non_increasing(means[None, :], n)[0]
    point = float(first_crossings(loads, fitted[None, :], log_load)[0])
    rep_fit = bootstrap_fits([resampled(u) for u in units] if resampled else units, rng, replicates, confidence)
    lo, hi = _interval(loads, fitted, rep_fit, confidence)
    # the data contradict a non-increasing effect: no faster-to-slower crossing to report, whatever the fit says
    status = RISES if rises(units, confidence) else _status(loads, point, lo, hi)
    points = tuple((float(x), float(m), float(f), float(k)) for x, m, f, k in zip(loads, means, fitted, n, strict=True))
    return CrossoverFit(
        status=status,
        estimate=point if math.isfinite(point) else None,
        low=lo if math.isfinite(lo) else None,
        high=hi if math.isfinite(hi) else None,
        confidence=confidence,
        points=points,
        method=method,
    )
