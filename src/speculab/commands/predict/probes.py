"""The probe experiments `speculab predict` runs, derived from the user's: the same workload, sampling, baseline and
candidates, one repeat, in two phases, and what a fixed K x load sweep of the same candidates would send instead.

- **acceptance**: the baseline and every candidate at the range's low end, on every prompt: acceptance on the user's
  own content, and the first cost probe of each arm;
- **cost**: the baseline and every candidate at the geometric middle and the high end of the range, each candidate
  with its engine's forced acceptance set to the unconditional rates it measured in the first phase (vLLM's
  `rejection_sample_method: synthetic`, the reference engine's `--forced-acceptance-rates`), so that its step cost
  is measured at the user's acceptance whatever the content does at load. An engine without such a knob (or a
  candidate given as an explicit command or a URL) runs at real acceptance there.

With `--check-k`, the cost phase also runs each candidate of K >= 2 at a second k, half its K rounded up (named
`NAME-at-kK'`, forced to the first K' rates where the engine has the knob): probes the cost model is not fitted on,
held against it to check that the cost is linear in k (`harness.search.predict.width_check`).

Why three loads: the cost model (`harness.search.predict`) has four coefficients, fixed and per-request, each for
plain and per drafted token; the plain arm and each candidate at three batches give six step times per candidate,
two degrees of freedom for the residuals."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from speculab.config import Experiment, SpeculationConfig
from speculab.config.experiment import LoadLevel, LoadsConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters import adapter_for

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
    forced: tuple[str, ...] = ()  # the candidates (names) whose cost probes run at forced acceptance
    checked: tuple[tuple[str, int], ...] = ()  # `--check-k`: (candidate, the second k its cost is probed at)


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


def plan_probes(exp: Experiment, prompts: int, check_k: bool = False) -> ProbePlan:
    """The probes for `exp`, whose workload has `prompts` prompts (`check_k`: and each candidate's at a second k)."""
    low, high = load_range(exp)
    loads = probe_loads(low, high)
    arms = 1 + len(exp.speculations)
    checked = tuple((candidate_name(sp), k) for sp in exp.speculations if (k := second_k(sp)) and check_k)
    requests = arms * len(loads) * prompts + len(checked) * (len(loads) - 1) * prompts
    sweep = sweep_loads(low, high)
    ks = sum(sp.num_speculative_tokens for sp in exp.speculations)
    forced = tuple(candidate_name(sp) for sp in exp.speculations) if _forcing(exp) is not None else ()
    sweep_requests = (1 + ks) * len(sweep) * prompts * SWEEP_REPEATS
    return ProbePlan(low, high, loads, prompts, requests, sweep, sweep_requests, forced, checked)


def candidate_name(sp: SpeculationConfig) -> str:
    """The candidate's name in the probe runs, as `run` names it."""
    return sp.name or f"{sp.method}-k{sp.num_speculative_tokens}"


def second_k(sp: SpeculationConfig) -> int | None:
    """The second k a candidate's cost is probed at (`--check-k`): half its K, rounded up; None below K = 2."""
    k = sp.num_speculative_tokens
    return (k + 1) // 2 if k >= 2 else None


def check_name(name: str, k: int) -> str:
    """The arm that probes candidate `name`'s cost at a second k: `ngram-k4-at-k2`."""
    return f"{name}-at-k{k}"


def _at_second_k(sp: SpeculationConfig) -> SpeculationConfig | None:
    """The candidate at its second k, named for it (a user's own candidate at that k keeps its name)."""
    k = second_k(sp)
    if k is None:
        return None
    return replace(sp, num_speculative_tokens=k, name=check_name(candidate_name(sp), k))


def _forcing(exp: Experiment) -> Callable[[SpeculationConfig, tuple[float, ...]], SpeculationConfig] | None:
    """The engine's forced-acceptance knob, where the candidates are derived from the launched baseline by their
    speculation config (an explicit candidate command or a URL keeps its own flags: no knob)."""
    launch = exp.baseline.launch
    if launch is None or exp.candidate is not None:
        return None
    return adapter_for(launch.engine).force_acceptance


def _levels(exp: Experiment, loads: Sequence[int], phase: str) -> Experiment:
    levels = tuple(LoadLevel(concurrency=c) for c in loads)
    config = LoadsConfig(operating=levels[len(levels) // 2], low=levels[0], sweep=levels)
    name = f"{exp.name or 'experiment'} (predict: {phase} probes)"
    return replace(exp, loads=config, repeats=1, adaptive=None, name=name)


def acceptance_experiment(exp: Experiment) -> Experiment:
    """The first phase: every arm at the range's low end, every prompt."""
    return _levels(exp, probe_loads(*load_range(exp))[:1], "acceptance")


def cost_experiment(exp: Experiment, rates: Mapping[str, tuple[float, ...]], check_k: bool = False) -> Experiment:
    """The second phase: every arm at the range's middle and high end; each candidate with `rates` (its measured
    unconditional rates per position, by name) forced where its engine has the knob; with `check_k`, each candidate
    also at its second k, forced to the first of those rates (a chain proposer's first k proposals are its first k
    at K)."""
    force = _forcing(exp)
    specs: list[SpeculationConfig] = []
    for sp in exp.speculations:
        name = candidate_name(sp)
        specs.append(force(sp, rates[name]) if force is not None and name in rates else sp)
        check = _at_second_k(sp) if check_k else None
        if check is not None:
            k = check.num_speculative_tokens
            specs.append(force(check, rates[name][:k]) if force is not None and name in rates else check)
    return _levels(replace(exp, speculations=tuple(specs)), probe_loads(*load_range(exp))[1:], "cost")
