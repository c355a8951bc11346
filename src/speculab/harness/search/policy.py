"""Where to probe next, when to stop, and what each probe costs: the load search's policy (issue 39).

A search measures the two ends of the range and a load between them first, so that "never crosses between L and H"
has evidence at each end. From then on it adds one probe a round: a new load at the estimate, inside the probes around
the fitted crossing (the interval can be no narrower than them, docs/statistics.md) while any load is left between
them; else it measures again the probe whose sign is still open and whose decision would shrink the interval most,
expected. It stops when the interval is at most the tolerance wide, when the fit says faster (or slower) throughout
with the interval wholly past that end, or when the probe budget is spent.

A probe sends what deciding needs (`probe_groups`): a load measured for the first time sends the groups its verdict
needs (nothing yet says how noisy it is there); a load measured again sends what its own units' spread says would
likely decide its sign, up to a cap, so that a noisy low load is not measured again and again at the verdict's
minimum (issue 49: the recorded demo search measured concurrency 1 five times at 6 prompts and ended undetermined).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy

from speculab.harness.analysis.groups import MIN_PAIRS, group_size
from speculab.harness.search.fit import (
    FASTER_THROUGHOUT,
    RISES,
    SLOWER_THROUGHOUT,
    CrossoverFit,
    Probe,
    decided_sign,
    expansion,
    fit_crossover,
    pooled_probes,
)
from speculab.harness.stats import CONFIDENCE, POWER

KINDS = ("concurrency", "rate")

# stop_reason's answers: short keys, the sentences are the report's
STOP_TOLERANCE = "tolerance"  # the interval is at most the tolerance wide
STOP_BUDGET = "budget"  # max_probes measurements made
STOP_FASTER = FASTER_THROUGHOUT  # never crosses in the range: faster at the highest load, decided
STOP_SLOWER = SLOWER_THROUGHOUT  # never crosses in the range: slower already at the lowest load, decided
STOP_RISES = RISES  # slower at a lower load, faster at a higher one, decided: no crossing of the searched shape


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """A search between `low` and `high` (concurrency: whole numbers of streams; rate: requests/s)."""

    kind: str  # "concurrency" | "rate"
    low: float
    high: float
    tolerance: float  # stop when the interval is at most this wide (loads)
    max_probes: int  # budget: distinct probe measurements (a load measured again counts again)
    # loads a prediction places in the first round in place of the geometric middle (`run --prediction`: the
    # predicted crossover's interval); () for none
    seeded: tuple[float, ...] = ()
    groups: int = MIN_PAIRS  # groups of prompts sent together that a first probe at a load sends
    # the most groups one probe sends when a load's own spread asks for more (`probe_groups`); None: `groups`, every
    # probe the same size
    max_groups: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"search kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not (0 < self.low < self.high):
            raise ValueError(f"search needs 0 < low < high, got low={self.low}, high={self.high}")
        if self.kind == "concurrency" and not (float(self.low).is_integer() and float(self.high).is_integer()):
            raise ValueError(f"concurrency bounds are whole numbers of streams, got {self.low} and {self.high}")
        # at concurrency two neighbouring whole loads are the finest bracket a search can measure
        if self.kind == "concurrency" and not self.tolerance >= 1:
            raise ValueError(f"search tolerance must be at least 1 stream, got {self.tolerance}")
        if not self.tolerance > 0:
            raise ValueError(f"search tolerance must be above 0, got {self.tolerance}")
        if self.max_probes < len(first_round(self)):
            raise ValueError(f"max_probes must be at least {len(first_round(self))}, got {self.max_probes}")
        if self.groups < MIN_PAIRS:
            raise ValueError(f"a probe sends at least {MIN_PAIRS} groups (a verdict needs them), got {self.groups}")
        if self.max_groups is not None and self.max_groups < self.groups:
            raise ValueError(f"max_groups must be at least groups ({self.groups}), got {self.max_groups}")

    @property
    def cap(self) -> int:
        """The most groups one probe sends."""
        return self.groups if self.max_groups is None else self.max_groups


@dataclass(frozen=True, slots=True)
class SearchBudget:
    """What a search may send at most, for `--dry-run`: `probes` measurements and `prompts_per_arm` prompts in
    each arm. At a rate the group size is measured (requests in flight), so there `prompts_per_arm` counts one
    prompt per group: a floor, and `group_size_known` is False."""

    probes: int
    prompts_per_arm: int
    largest_probe_prompts: int  # a load's first probe at the highest load
    group_size_known: bool


def _on_grid(spec: SearchSpec, x: float) -> float:
    """A load the search can run: a whole number of streams at concurrency, inside [low, high]."""
    x = min(max(x, spec.low), spec.high)
    return float(round(x)) if spec.kind == "concurrency" else float(x)


def first_round(spec: SearchSpec) -> tuple[float, ...]:
    """Both ends and the geometric middle, without repeats: (1, 7, 48) for 1-48. Geometric, because the range is
    often wide (1-256) and the effect tends to move by the doubling of the batch rather than by the stream. With a
    prediction (`seeded`), its loads inside the range instead of the middle: the first round then brackets the
    predicted crossover at once, and the ends still say which side of it each end is."""
    inside = [_on_grid(spec, x) for x in spec.seeded if spec.low < x < spec.high]
    middle = sorted(inside) if inside else [_on_grid(spec, math.sqrt(spec.low * spec.high))]
    return tuple(dict.fromkeys((float(spec.low), *middle, float(spec.high))))


def _first_round_missing(spec: SearchSpec, probes: Sequence[Probe]) -> tuple[float, ...]:
    """The first round's loads without a unit measured yet: not probed, or probed while every request failed (no
    verdict, no units). Until each has some, neither end has evidence and nothing is decided."""
    measured = {float(p.load) for p in probes if any(math.isfinite(e) for e in p.effects)}
    return tuple(x for x in first_round(spec) if x not in measured)


def probe_prompts(kind: str, load: float, groups: int = MIN_PAIRS, in_flight: float | None = None) -> int:
    """Prompts each arm sends at a probe so its verdict has `groups` units: groups of as many prompts as run at once
    (the verdict's rule, `group_size`: c at concurrency c; at a rate the requests in flight, measured, so pass
    `in_flight` from a probe nearby, else one per group)."""
    return groups * group_size(kind, load, (in_flight,))


def units_to_decide(units: np.ndarray, confidence: float = CONFIDENCE, power: float = POWER) -> float:
    """About how many units at one load would likely decide its sign on their own (`decided_sign`: Student's t
    interval of their mean clear of 0), their mean and spread taken as the truth: the n at which t(n - 1) + z(power)
    standard errors fit in |mean| (the sample-size rule of a one-sample t test, solved by a few fixed-point steps
    from the normal one). At least MIN_PAIRS; inf where the mean is 0 or the units are too few to have a spread."""
    n0 = units.size
    if n0 < 2 or float(units.mean()) == 0:
        return math.inf
    ratio = float(units.std(ddof=1)) / abs(float(units.mean()))  # the spread in units of the effect
    if not ratio > 0:
        return float(MIN_PAIRS)  # no spread: the verdict's minimum decides it
    z_p = float(scipy.special.ndtri(power))
    n = ((float(scipy.special.ndtri(0.5 + confidence / 2)) + z_p) * ratio) ** 2
    for _ in range(4):  # t's quantile at the n found, then n again: converges in two or three steps
        n = ((float(scipy.special.stdtrit(max(n, MIN_PAIRS) - 1, 0.5 + confidence / 2)) + z_p) * ratio) ** 2
    return max(float(MIN_PAIRS), n)


def probe_groups(spec: SearchSpec, probes: Sequence[Probe], load: float, confidence: float = CONFIDENCE) -> int:
    """Groups a probe at `load` sends: `spec.groups` at a load not measured yet (nothing says yet how noisy it is
    there; the first round's spread elsewhere does not carry: on the demo engine the per-unit spread at one stream is
    2.5 times that at four); at a load measured before, what its units so far say would likely decide its sign
    (`units_to_decide`) less the units it has, between `spec.groups` and `spec.cap`. Measured again means it was
    left open (`_remeasure`), so sizing it from its own spread is what lets the next measurement close it."""
    have = np.array([e for p in probes if float(p.load) == float(load) for e in p.effects if math.isfinite(e)])
    if have.size < 2 or spec.cap == spec.groups:
        return spec.groups
    more = units_to_decide(have, confidence) - have.size
    return int(min(spec.cap, max(spec.groups, math.ceil(more)))) if math.isfinite(more) else spec.cap


def search_budget(spec: SearchSpec) -> SearchBudget:
    """The worst case: the first round, then every further probe at the highest load, each at the cap (a search that
    cannot decide the top end measures it again and again, each time as large as its spread asks)."""
    first = first_round(spec)
    top = probe_prompts(spec.kind, spec.high, spec.cap)
    prompts = sum(probe_prompts(spec.kind, x, spec.groups) for x in first) + (spec.max_probes - len(first)) * top
    # what the workload must hold: a first probe at the top (a larger one measuring it again sends what there is)
    largest = probe_prompts(spec.kind, spec.high, spec.groups)
    return SearchBudget(spec.max_probes, prompts, largest, spec.kind == "concurrency")


def stop_reason(spec: SearchSpec, probes: Sequence[Probe], fit: CrossoverFit | None) -> str | None:
    """Why the search stops now (STOP_* keys), or None to go on. An answer found with the last probe of the budget
    is said as the answer, not as the budget."""
    if fit is not None and not _first_round_missing(spec, probes):
        if fit.status in (FASTER_THROUGHOUT, SLOWER_THROUGHOUT, RISES):
            return fit.status
        if fit.width <= spec.tolerance:
            return STOP_TOLERANCE
    return STOP_BUDGET if len(probes) >= spec.max_probes else None


def next_loads(spec: SearchSpec, probes: Sequence[Probe], fit: CrossoverFit | None) -> tuple[float, ...]:
    """The loads to measure next, in order; () when the search stops. `fit`: the fit of `probes` (None before any)."""
    if stop_reason(spec, probes, fit) is not None:
        return ()
    probed = {float(p.load) for p in probes}
    missing = _first_round_missing(spec, probes)
    if missing or fit is None:
        return missing[: spec.max_probes - len(probes)]
    split = _split(spec, fit, probed)
    return (split,) if split is not None else (_remeasure(spec, probes, fit),)


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """A finished search: the probes in the order measured, the last fit, and why it stopped (a STOP_* key)."""

    probes: tuple[Probe, ...]
    fit: CrossoverFit
    reason: str


def run_search(
    spec: SearchSpec,
    measure: Callable[[float, int], Probe],
    rng: np.random.Generator,
    *,
    confidence: float = CONFIDENCE,
    replicates: int = 1000,
    log_load: bool = False,
) -> SearchOutcome:
    """The whole search with a blocking `measure(load, groups) -> Probe` (`groups`: what `probe_groups` sizes the
    probe at): probe, refit, until `stop_reason` says why not. The simulation (bench/search_coverage.py) and the tests
    drive it with scripted truths."""
    probes: list[Probe] = []
    fit: CrossoverFit | None = None
    while loads := next_loads(spec, probes, fit):
        sized = [(x, probe_groups(spec, probes, x, confidence)) for x in loads]  # each from the probes before it
        probes.extend(measure(x, g) for x, g in sized)
        fit = fit_crossover(probes, rng, confidence=confidence, replicates=replicates, log_load=log_load)
    assert fit is not None  # the first round always probes
    return SearchOutcome(tuple(probes), fit, stop_reason(spec, probes, fit) or STOP_BUDGET)


def _bracket(fit: CrossoverFit) -> tuple[float, float] | None:
    """The probes on each side of the fitted crossing: the last load still faster and the first one not."""
    loads = [x for x, _, _, _ in fit.points]
    fitted = [f for _, _, f, _ in fit.points]
    for j in range(1, len(loads)):
        if fitted[j] <= 0 < fitted[j - 1]:
            return loads[j - 1], loads[j]
    return None


def _split(spec: SearchSpec, fit: CrossoverFit, probed: set[float]) -> float | None:
    """A new load inside the fitted crossing's bracket while the interval is wider than the tolerance: at the
    estimate, kept to the bracket's middle half so that each probe cuts it by a quarter at least (interpolating alone
    can creep in from one side for ever, as regula falsi does on a curved function)."""
    bracket = _bracket(fit)
    if bracket is None or fit.estimate is None:
        return None
    a, b = bracket
    quarter = (b - a) / 4
    x = _on_grid(spec, min(max(fit.estimate, a + quarter), b - quarter))
    if x in probed and spec.kind == "concurrency":  # the quarter rounded onto an end: step inside instead
        x = _on_grid(spec, a + 1 if x <= a else b - 1)
    return x if a < x < b and x not in probed else None


def _remeasure(spec: SearchSpec, probes: Sequence[Probe], fit: CrossoverFit) -> float:
    """A probed load to measure again: of those whose sign the interval leaves open (inside it, or the end it
    reaches past), the one whose next units most shrink the interval, expected: how far its end would move if its
    sign were decided (an open end counts as the whole range) times the chance that the units of one more probe
    decide it, were its mean to stay where it is."""
    loads, units = pooled_probes(probes)
    span = spec.high - spec.low
    lo = spec.low - span if fit.low is None else fit.low
    hi = spec.high + span if fit.high is None else fit.high
    open_ = {i for i, x in enumerate(loads) if lo < x < hi}
    if fit.low is None:
        open_.add(0)
    if fit.high is None:
        open_.add(len(loads) - 1)
    # a load whose own units decide its sign stays on its side however often it is measured: measuring it again
    # cannot move the interval (a search that did re-measured a decided end for its whole budget while the other end
    # lacked the units for a verdict)
    undecided = {i for i in open_ if decided_sign(units[i], fit.confidence) == 0}
    open_ = undecided or open_
    if not open_:  # the interval is two neighbouring probes: measure again the one nearer its middle
        open_ = {int(np.argmin(np.abs(loads - (lo + hi) / 2)))}
    q = 0.5 + fit.confidence / 2

    def expected_gain(i: int) -> float:
        u, x = units[i], loads[i]
        gain = x - lo if u.mean() > 0 else hi - x
        n = u.size + probe_groups(spec, probes, float(x), fit.confidence)  # what measuring it again would send
        if u.size < 2 or not u.std(ddof=1) > 0:
            return gain
        z = abs(u.mean()) / (u.std(ddof=1) / math.sqrt(n))
        return gain * float(scipy.special.ndtr(z - scipy.special.ndtri(q) * expansion(n, fit.confidence)))

    return float(loads[max(sorted(open_), key=expected_gain)])
