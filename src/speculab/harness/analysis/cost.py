"""Cost and capacity planning: $ per 1M output tokens, SLO goodput, and GPUs needed for a target request rate.

Prices are per GPU-hour (`usd_per_hour`), and an arm's replica uses `gpus` GPUs (a draft model on its own GPU shows
up here). A month is 730 hours (8760 h / 12), the convention cloud price sheets use. Throughput is the measured
output tokens per second of one replica (the server under test) at a given load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from speculab.config import ArmPrice, SloTargets
from speculab.harness.stats import CONFIDENCE, Interval, repeat_ratio_interval, t_interval

HOURS_PER_MONTH = 730.0


def usd_per_million_tokens(output_tok_s: float, price: ArmPrice) -> float:
    """$ per 1M output tokens for a replica producing output_tok_s; inf when it produced nothing."""
    if output_tok_s <= 0:
        return math.inf
    return price.replica_usd_per_hour / (output_tok_s * 3600.0) * 1e6


def cost_interval(output_tok_s_repeats: Sequence[float], price: ArmPrice, confidence: float = CONFIDENCE) -> Interval:
    """$ per 1M tokens with an interval mapped from the t-interval of tok/s over repeats (cost falls as tok/s rises).

    One repeat gives the estimate with NaN bounds. A lower tok/s bound <= 0 gives an unbounded (inf) upper cost.
    """
    t = t_interval(output_tok_s_repeats, confidence)
    est = usd_per_million_tokens(t.estimate, price) if t.n else math.nan
    if t.n < 2:
        return Interval(est, math.nan, math.nan, confidence, "t-on-throughput", t.n)
    return Interval(
        est,
        usd_per_million_tokens(t.high, price),
        usd_per_million_tokens(t.low, price),
        confidence,
        "t-on-throughput",
        t.n,
    )


def cost_ratio_interval(
    candidate_tok_s: Sequence[float],
    baseline_tok_s: Sequence[float],
    candidate_price: ArmPrice,
    baseline_price: ArmPrice,
    confidence: float = CONFIDENCE,
) -> Interval:
    """Candidate/baseline $ per 1M tokens (0.62 = 38% cheaper), paired by repeat (see stats.repeat_ratio_interval)."""
    tput = repeat_ratio_interval(candidate_tok_s, baseline_tok_s, confidence)
    k = candidate_price.replica_usd_per_hour / baseline_price.replica_usd_per_hour
    return Interval(k / tput.estimate, k / tput.high, k / tput.low, confidence, "t-log-ratio-of-throughput", tput.n)


def request_meets_slo(ttft_s: float | None, tpot_s: float | None, e2e_s: float | None, slo: SloTargets) -> bool:
    """One request against the limits; a missing value for a constrained metric fails (e.g. a failed request)."""
    for value, limit in ((ttft_s, slo.ttft_s), (tpot_s, slo.tpot_s), (e2e_s, slo.e2e_s)):
        if limit is None:
            continue
        if value is None or not math.isfinite(value) or value > limit:
            return False
    return True


def slo_attainment(requests: Sequence[tuple[float | None, float | None, float | None]], slo: SloTargets) -> float:
    """Fraction of requests (ttft_s, tpot_s, e2e_s) meeting every limit; NaN for no requests."""
    if not requests:
        return math.nan
    return sum(request_meets_slo(t, p, e, slo) for t, p, e in requests) / len(requests)


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One load level of one arm: achieved request rate and the SLO attainment measured there."""

    load: float  # the requested load (concurrency or rate)
    achieved_rate_rps: float
    attainment: float


def goodput_rate_rps(levels: Sequence[LoadResult], slo: SloTargets) -> float | None:
    """Highest achieved request rate at a load meeting the SLO, scanning loads upward and stopping at the first that
    fails (a load that passes above a failing one is noise, not capacity). None if even the lowest load fails."""
    best: float | None = None
    for level in sorted(levels, key=lambda x: x.load):
        if not level.attainment >= slo.attainment:
            break
        best = level.achieved_rate_rps if best is None else max(best, level.achieved_rate_rps)
    return best


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """Replicas and GPUs one arm needs to serve target_rate_rps within the SLO, and what that costs per month."""

    target_rate_rps: float
    goodput_rps_per_replica: float | None
    replicas: int | None  # None: no measured load met the SLO, so no number of replicas is known to suffice
    gpus: int | None
    usd_per_month: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def capacity_plan(target_rate_rps: float, goodput_rps: float | None, price: ArmPrice) -> CapacityPlan:
    """ceil(target / goodput per replica) replicas; GPUs = replicas * gpus; $/month = GPUs * $/GPU-h * 730."""
    if target_rate_rps <= 0:
        raise ValueError("target_rate_rps must be > 0")
    if goodput_rps is None or goodput_rps <= 0:
        return CapacityPlan(target_rate_rps, goodput_rps, None, None, None)
    replicas = math.ceil(target_rate_rps / goodput_rps - 1e-9)  # 1e-9: 10/2.5 is exactly 4, not 5
    gpus = replicas * price.gpus
    return CapacityPlan(target_rate_rps, goodput_rps, replicas, gpus, gpus * price.usd_per_hour * HOURS_PER_MONTH)


@dataclass(frozen=True, slots=True)
class PlanComparison:
    baseline: CapacityPlan
    candidate: CapacityPlan
    monthly_difference_usd: float | None  # candidate - baseline; negative = speculation saves money
    gpu_difference: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
            "monthly_difference_usd": self.monthly_difference_usd,
            "gpu_difference": self.gpu_difference,
            "hours_per_month": HOURS_PER_MONTH,
        }


def compare_plans(
    target_rate_rps: float,
    baseline_levels: Sequence[LoadResult],
    candidate_levels: Sequence[LoadResult],
    slo: SloTargets,
    baseline_price: ArmPrice,
    candidate_price: ArmPrice,
) -> PlanComparison:
    """GPUs needed for the target rate with and without speculation, from each arm's SLO goodput."""
    b = capacity_plan(target_rate_rps, goodput_rate_rps(baseline_levels, slo), baseline_price)
    c = capacity_plan(target_rate_rps, goodput_rate_rps(candidate_levels, slo), candidate_price)
    money = None if b.usd_per_month is None or c.usd_per_month is None else c.usd_per_month - b.usd_per_month
    gpus = None if b.gpus is None or c.gpus is None else c.gpus - b.gpus
    return PlanComparison(b, c, money, gpus)
