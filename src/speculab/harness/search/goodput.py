"""The highest load at which one arm meets its SLO, with its interval: the crossover's fit on another quantity.

An arm meets its SLO at a load when at least `attainment` of its requests meet every limit (config.SloTargets).
Attainment does not grow with load (queues and batches only fill), so the fraction of each unit's requests within
the SLO, minus the target, is a per-unit quantity that does not grow with load either: the crossover's fit
(`fit.fit_crossover`) takes it as it is. Where it crosses 0 is the arm's highest load within its SLO (goodput's edge),
and the fit's bracket bootstrap is its interval: one estimator for both answers, not two.

The units are the verdict's: groups of prompts sent together (harness.analysis.groups), not single requests. Requests
that share a batch meet or miss their limits together (one slow step slows every stream in it), so counting them as
independent would make the interval too narrow. See docs/statistics.md, "The highest load within SLO".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from speculab.harness.search.fit import (
    CROSSES,
    FASTER_THROUGHOUT,
    SLOWER_THROUGHOUT,
    UNDETERMINED,
    Probe,
    fit_crossover,
)
from speculab.harness.stats import CONFIDENCE

MEETS_THROUGHOUT = "meets throughout"  # within the SLO at every load measured, decided: the edge lies beyond
MISSES_THROUGHOUT = "misses throughout"  # outside it already at the lowest load measured, decided

_AT_TARGET = 1e-9  # far below any fraction's step (1 / requests), far above float error

__all__ = ["CROSSES", "MEETS_THROUGHOUT", "MISSES_THROUGHOUT", "UNDETERMINED", "CapacityFit", "fit_slo_capacity"]


@dataclass(frozen=True, slots=True)
class CapacityFit:
    """One arm's highest load within its SLO. `estimate` only where the fit crosses the target; `low` / `high` as in
    `fit.CrossoverFit` (None past the loads measured): "meets throughout" has `low` = `highest`, `high` None;
    "misses throughout" `low` None, `high` = `lowest`."""

    status: str  # CROSSES | MEETS_THROUGHOUT | MISSES_THROUGHOUT | UNDETERMINED
    estimate: float | None
    low: float | None
    high: float | None
    lowest: float | None  # the lowest and highest load with a unit measured (None: none)
    highest: float | None
    confidence: float
    method: str


def unit_attainment(outcomes: Iterable[tuple[Hashable, bool]]) -> tuple[float, ...]:
    """(unit, did this request meet every limit) for each request at one load -> each unit's fraction of requests
    within the SLO, in the order the units first appear. A failed request is passed as not meeting it."""
    met: dict[Hashable, list[bool]] = defaultdict(list)
    for unit, ok in outcomes:
        met[unit].append(bool(ok))
    return tuple(sum(v) / len(v) for v in met.values())


def with_spread_floor(units: np.ndarray, target: float) -> np.ndarray:
    """What the bootstrap resamples at one load: the units (fractions minus the target), plus, where they spread
    less than a unit that meets or misses as a whole would, two units at the mean plus and minus d that bring their
    variance up to that floor without moving the mean.

    Why: eight units all at 1 (every request within the SLO) give the bootstrap no spread at all, so it would call
    the load within a 0.9 target for certain, though eight in eight is what a load at 0.85 gives a quarter of the
    time when the requests of a batch meet or miss together; and all-at-1 units look the same whether the requests in
    them are independent or not. The floor is the variance of one Bernoulli unit at the mean pulled half a unit
    toward 1/2 (Jeffreys), m'(1 - m'): without it the simulation covered 88.9 % (bench/goodput_coverage.py)."""
    n = units.size
    if n < 2:
        return units
    m = float(units.mean()) + target
    m_j = (n * m + 0.5) / (n + 1)
    floor = m_j * (1 - m_j)
    s2 = float(units.var())
    if s2 >= floor:
        return units
    d = math.sqrt(((n + 2) * floor - n * s2) / 2)
    mean = float(units.mean())
    return np.concatenate([units, [mean - d, mean + d]])


def fit_slo_capacity(
    probes: Sequence[Probe],
    target: float,
    rng: np.random.Generator,
    *,
    confidence: float = CONFIDENCE,
    replicates: int = 1000,
    log_load: bool = False,
) -> CapacityFit:
    """The highest load where the arm's attainment is at least `target`, from `probes` whose effects are each unit's
    fraction of requests within the SLO (`unit_attainment`), with a `confidence` interval (module docstring)."""
    if not 0 < target <= 1:
        raise ValueError(f"an attainment target is in (0, 1], got {target}")
    if any(not 0 <= e <= 1 for p in probes for e in p.effects):
        raise ValueError("a unit's attainment is a fraction in [0, 1]")
    # the fit counts 0 as crossed, but attainment exactly at the target meets it (9 of 10 at 0.9): a hair above
    shifted = [Probe(p.load, tuple(e - target + _AT_TARGET for e in p.effects)) for p in probes]
    fit = fit_crossover(
        shifted,
        rng,
        confidence=confidence,
        replicates=replicates,
        log_load=log_load,
        quantity="fraction of requests within the SLO minus the target",
        resampled=lambda u: with_spread_floor(u, target),
    )
    loads = [pt[0] for pt in fit.points]
    status = {FASTER_THROUGHOUT: MEETS_THROUGHOUT, SLOWER_THROUGHOUT: MISSES_THROUGHOUT}.get(fit.status, fit.status)
    return CapacityFit(
        status=status,
        estimate=fit.estimate,
        low=fit.low,
        high=fit.high,
        lowest=min(loads) if loads else None,
        highest=max(loads) if loads else None,
        confidence=fit.confidence,
        method=f"{fit.method}; each load's spread floored at a Bernoulli unit's (Jeffreys)",
    )
