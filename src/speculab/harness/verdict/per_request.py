"""Per arm and load: acceptance from each response's own fields and the prefix cache's hits; per load and candidate:
acceptance length against TPOT speedup, prompt by prompt, and whether the prefix-cache hit rate moved.

The numbers come from `harness.analysis.acceptance` and `harness.analysis.prefix_cache` (pure); this module
only picks the records and counters of one arm and load. docs/results.md says how each is made.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence

from speculab.harness.analysis.acceptance import (
    AcceptanceOutlier,
    AcceptanceSpeedup,
    PositionAcceptance,
    RequestAcceptance,
    acceptance_speedup,
    outlier_side,
    per_prompt_length,
    positions_from_requests,
    positions_from_summary,
    request_acceptance,
    weighted_acceptance,
)
from speculab.harness.analysis.degeneration.loops import degeneration_of
from speculab.harness.analysis.prefix_cache import HitRateChange, compare_hit_rates
from speculab.harness.records import AcceptanceSummary, RequestRecord, RequestSpec
from speculab.harness.results.ab_run import RepeatRun
from speculab.harness.servers.prefix_cache import prefix_cache_delta
from speculab.harness.verdict.model import ArmLevel, PrefixCacheView, PromptSpread, RequestAcceptanceView
from speculab.harness.workload.checks import evaluate


def _measured(runs: Sequence[RepeatRun]) -> list[RequestRecord]:
    return [r for run in runs for r in run.records if not r.warmup]


def _per_request(runs: Sequence[RepeatRun]) -> list[RequestAcceptance]:
    return [a for a in (request_acceptance(r) for r in _measured(runs)) if a is not None]


def request_acceptance_view(runs: Sequence[RepeatRun], items: Sequence[RequestSpec]) -> RequestAcceptanceView | None:
    """Token- and request-weighted acceptance of one arm at one load, overall and per category; None when no
    response carried per-request acceptance."""
    records = _measured(runs)
    per = [a for a in (request_acceptance(r) for r in records) if a is not None]
    overall = weighted_acceptance(per)
    if overall is None:
        return None
    category = {it.index: it.category for it in items if it.category}
    groups: dict[str, list[RequestAcceptance]] = defaultdict(list)
    for a in per:
        if a.index in category:
            groups[category[a.index]].append(a)
    by_cat = {}
    if len(groups) >= 2:
        for cat, group in sorted(groups.items()):
            w = weighted_acceptance(group)
            if w is not None:
                by_cat[cat] = w
    return RequestAcceptanceView(per[0].source, sum(1 for r in records if r.ok), overall, by_cat)


def acceptance_positions(runs: Sequence[RepeatRun], counted: AcceptanceSummary | None) -> PositionAcceptance | None:
    """One arm's acceptance per draft position at one load: from its responses' per-position counts where every
    drafting response carries them (the interval is then over prompts), else from its counters summed over repeats
    (`counted`, the arm's combined acceptance; its interval is over steps); None where neither has positions."""
    from_requests = positions_from_requests(_per_request(runs))
    if from_requests is not None:
        return from_requests
    return positions_from_summary(counted) if counted is not None else None


MAX_OUTLIERS = 20  # listed per candidate: the report names them, it is not a dump


def acceptance_outliers(
    runs: Sequence[RepeatRun], items: Sequence[RequestSpec], allow_python: bool
) -> tuple[AcceptanceOutlier, ...]:
    """The candidate's requests at one load whose own acceptance rate is near zero or near full, each with what its
    output's checks said and whether it loops: such acceptance can track garbled or looping output (vllm#44487).
    Low ones first, then high, each by index; at most MAX_OUTLIERS."""
    by_index = {it.index: it for it in items}
    records = {r.index: r for r in _measured(runs) if r.ok}
    out = []
    for a in _per_request(runs):
        side, rec = outlier_side(a), records.get(a.index)
        if side is None or rec is None:
            continue
        item = by_index.get(a.index)
        ran = [r for r in evaluate(item.checks, rec.output_text, item, allow_python=allow_python) if r.ran] if (
            item is not None and item.checks) else []  # fmt: skip
        checks = "none" if not ran else "passed" if all(r.passed for r in ran) else "failed"
        loops = degeneration_of(rec.output_text)
        prompt_id = item.prompt_id if item is not None and item.prompt_id else ""
        out.append(AcceptanceOutlier(a.index, prompt_id, side, float(a.rate or 0.0), int(a.draft_tokens or 0), checks,
                                     loops.degenerate if loops.judged else None))  # fmt: skip
    out.sort(key=lambda o: (o.side != "low", o.index))
    return tuple(out[:MAX_OUTLIERS])


def prefix_cache_view(runs: Sequence[RepeatRun], engine: str) -> PrefixCacheView | None:
    """The prefix-cache counters' deltas of one arm at one load, summed over repeats; None when not exposed."""
    deltas = [d for d in (prefix_cache_delta(engine, run.counter_deltas) for run in runs if not run.interrupted) if d]
    if not deltas:
        return None
    queries = sum(d.queries for d in deltas)
    hits = sum(d.hits for d in deltas)
    requests = sum(1 for r in _measured(runs) if r.ok)
    hit_rate = hits / queries if queries > 0 else None
    return PrefixCacheView(deltas[0].source, queries, hits, hit_rate, requests, len(deltas))


def hit_rate_change(base: ArmLevel, cand: ArmLevel) -> HitRateChange | None:
    b, c = base.prefix_cache, cand.prefix_cache
    if b is None or c is None or b.hit_rate is None or c.hit_rate is None:
        return None
    return compare_hit_rates(b.hit_rate, b.requests, c.hit_rate, c.requests)


def acceptance_vs_speedup(
    cand_runs: Sequence[RepeatRun],
    base_tpot: Mapping[int, float],
    cand_tpot: Mapping[int, float],
    items: Sequence[RequestSpec],
) -> AcceptanceSpeedup | None:
    """The candidate's per-prompt acceptance length (median over repeats) against its TPOT speedup on that prompt
    (baseline TPOT / candidate TPOT, each the median over repeats, as the paired comparison uses)."""
    per = _per_request(cand_runs)
    if not per:
        return None
    categories = {it.index: it.category for it in items if it.category}
    return acceptance_speedup(per_prompt_length(per), base_tpot, cand_tpot, per[0].length_kind, categories)


# A quarter of the prompts beyond the margin on each side: two groups of prompts (bimodal per-prompt ratios), which
# one effect summarises poorly; fewer on one side is one effect with spread.
SPLIT_SHARE = 0.25


def prompt_spread(
    base_tpot: Mapping[int, float],
    cand_tpot: Mapping[int, float],
    effect: float,
    medians_speedup: float,
    margin: float,
) -> PromptSpread | None:
    """The per-prompt TPOT speedups (baseline / candidate) beside the ratio of the arms' p50s and the verdict's
    `effect`: how many prompts lie beyond the margin each way, their quartiles, and whether the effect and the
    ratio of medians differ by more than the margin. None with fewer than 4 pairs or no finite ratio."""
    common = sorted(i for i in base_tpot.keys() & cand_tpot.keys() if base_tpot[i] > 0 and cand_tpot[i] > 0)
    finite = all(math.isfinite(x) and x > 0 for x in (effect, medians_speedup))
    if len(common) < 4 or not finite:
        return None
    speedups = [base_tpot[i] / cand_tpot[i] for i in common]
    bound = math.log1p(margin)
    faster = sum(1 for s in speedups if math.log(s) > bound)
    slower = sum(1 for s in speedups if math.log(s) < -bound)
    q1, _, q3 = statistics.quantiles(speedups, n=4)
    share = SPLIT_SHARE * len(speedups)
    return PromptSpread(
        medians_speedup=medians_speedup,
        pairs=len(speedups),
        faster=faster,
        slower=slower,
        low_quartile=q1,
        high_quartile=q3,
        split=faster >= share and slower >= share,
        differs=abs(math.log(effect) - math.log(medians_speedup)) > bound,
    )
