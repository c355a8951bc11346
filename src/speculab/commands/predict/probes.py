"""The probe experiment `speculab predict` runs, derived from the user's: the same workload, sampling, baseline and
candidates, one repeat, at three concurrencies across the load range (its low end, the geometric middle, the high
end); and what a fixed K x load sweep of the same candidates would send instead, for comparison.

Why three loads: the cost model (`harness.search.predict`) has four coefficients, fixed and per-request, each for
plain and per drafted token; the plain arm and each candidate at three batches give six step times per candidate,
two degrees of freedom for the residuals. The lowest load is also where acceptance is measured, on every prompt (the
user's content, not a sample of it); every probe sends the workload's prompts once."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from speculab.config import Experiment
from speculab.config.experiment import LoadLevel, LoadsConfig
from speculab.errors import UserError

PROBE_LOADS = 3
SWEEP_REPEATS = 1  # the sweep it is compared against runs as many repeats as the probes: one


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """What the probes are and what they replace."""

    low: float  # the load range the prediction covers (concurrency)
    high: float
    loads: tuple[int, ...]  # the probes' concurrencies
    prompts: int  # the workload's prompts: each probe sends all of them once
    requests: int  # what the probes send (warmups excluded)
    sweep_loads: tuple[int, ...]  # a fixed sweep over the same range: the powers of two between its ends
    sweep_requests: int  # a fixed K x load sweep of the same candidates: every k in 1..K of each at each load


def load_range(exp: Experiment) -> tuple[float, float]:
    """The range to predict over: the search block's, else the fixed levels' lowest and highest concurrency. Only
    closed loops: a rate's decode batch is not known before the run."""
    search = exp.loads.search
    if search is not None:
        if search.kind != "concurrency":
            raise UserError(
                "speculab predict needs concurrency loads: give `loads: {search: {kind: concurrency, ...}}`"
            )
        return float(search.low), float(search.high)
    levels = exp.loads.all_levels()
    if any(lv.kind != "concurrency" for lv in levels):
        raise UserError(
            "speculab predict needs concurrency loads (a rate's decode batch is only known after the run): give the "
            "levels as `{concurrency: N}` or a `search: {kind: concurrency, low: L, high: H}` block"
        )
    values = [lv.value for lv in levels]
    if max(values) <= min(values):
        raise UserError(
            "speculab predict needs a load range: give levels at two concurrencies at least (e.g. `sweep: "
            "[{concurrency: 1}, {concurrency: 32}]`) or a `search:` block"
        )
    return min(values), max(values)


def probe_loads(low: float, high: float) -> tuple[int, ...]:
    """Three concurrencies: the range's ends and their geometric middle (distinct integers, at least 1)."""
    mid = math.sqrt(low * high)
    return tuple(sorted({max(1, round(low)), max(1, round(mid)), max(1, round(high))}))


def sweep_loads(low: float, high: float) -> tuple[int, ...]:
    """What a fixed sweep over the range runs: its ends and the powers of two between them."""
    lo, hi = max(1, round(low)), max(1, round(high))
    inner = [2**i for i in range(0, 16) if lo < 2**i < hi]
    return tuple(sorted({lo, *inner, hi}))


def plan_probes(exp: Experiment, prompts: int) -> ProbePlan:
    """The probes for `exp`, whose workload has `prompts` prompts."""
    low, high = load_range(exp)
    loads = probe_loads(low, high)
    arms = 1 + len(exp.speculations)
    requests = arms * len(loads) * prompts
    sweep = sweep_loads(low, high)
    ks = sum(sp.num_speculative_tokens for sp in exp.speculations)
    return ProbePlan(low, high, loads, prompts, requests, sweep, (1 + ks) * len(sweep) * prompts * SWEEP_REPEATS)


def probe_experiment(exp: Experiment) -> Experiment:
    """The user's experiment with the probes' loads as its levels, one repeat and no search."""
    levels = tuple(LoadLevel(concurrency=c) for c in probe_loads(*load_range(exp)))
    loads = LoadsConfig(operating=levels[len(levels) // 2], low=levels[0], sweep=levels)
    return replace(exp, loads=loads, repeats=1, adaptive=None, name=f"{exp.name or 'experiment'} (predict probes)")
