"""Pure: acceptance, vLLM's definitions — the formulas (the one place they live), and per-request acceptance from
each request's own response fields (`RequestRecord.speculation`), weighted two ways.

The formulas: a draft is one request's verification step; acceptance rate = accepted / drafted tokens; mean
acceptance length = 1 + accepted / drafts (the target's own token of each step included). Server counters
(`harness.servers.acceptance`), per-response fields (below) and the sums over repeats (`harness.verdict`) all call
them.

Server-wide counters give the token-weighted figure: total accepted over total drafted, so a long completion counts
as much as many short ones. Per-request fields also give the request-weighted figure: each request's own rate and
length, averaged, each request counting once. They differ when acceptance depends on length (repetitive long
outputs draft well); both are reported, side by side.

A request's acceptance length is 1 + accepted / drafts when the engine reports its verification steps (speculab,
vLLM, SGLang). llama.cpp reports drafted and accepted tokens but no steps per request; for it the length is the
output tokens per target step, (n - 1) / (n - 1 - accepted) for n output tokens (the first token comes from the
prefill; every later step yields one target token plus its accepted drafts), which equals the acceptance length
when every step drafted and is what TPOT follows either way. `length_kind` says which one a number is.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import scipy

from speculab.harness import stats
from speculab.harness.records import AcceptanceSummary, RequestRecord


def acceptance_rate(accepted: float, draft_tokens: float | None) -> float | None:
    """Accepted / drafted tokens; None when nothing was drafted (0/0) or the drafted count is unknown."""
    return accepted / draft_tokens if draft_tokens is not None and draft_tokens > 0 else None


def acceptance_length(accepted: float, drafts: float | None) -> float | None:
    """Tokens per verification step, bonus token included: 1 + accepted / drafts; None without steps."""
    return 1.0 + accepted / drafts if drafts is not None and drafts > 0 else None


def tokens_per_step(output_tokens: float, accepted: float) -> float | None:
    """Output tokens per target step when the steps are not reported: (n - 1) / (n - 1 - accepted), the first of
    the n tokens coming from the prefill; None when no step is left to divide by."""
    n = output_tokens - 1
    steps = n - accepted
    return n / steps if n > 0 and steps > 0 else None


LENGTH_PER_STEP = "acceptance length: 1 + accepted / drafts (bonus token included)"
LENGTH_TOKENS_PER_STEP = "output tokens per target step: (n - 1) / (n - 1 - accepted) (no per-request step count)"


@dataclass(frozen=True, slots=True)
class RequestAcceptance:
    """One request's acceptance. rate and length are None when the request drafted nothing (0/0)."""

    index: int
    drafts: int | None  # verification steps, when the engine reports them
    draft_tokens: int | None
    accepted_tokens: int
    completion_tokens: int | None  # the server's usage count
    rate: float | None  # accepted / drafted tokens
    length: float | None  # see length_kind
    length_kind: str
    source: str
    # steps that accepted draft position j (0-based), where the engine reports it per request; None where not
    accepted_per_position: tuple[int, ...] | None = None


def request_acceptance(rec: RequestRecord) -> RequestAcceptance | None:
    """A successful measured request's acceptance from its `speculation` field; None when it carries none (or no
    accepted count). Nothing is derived from a field the engine did not report, but the llama.cpp length (see above)."""
    spec = rec.speculation
    if not rec.ok or rec.warmup or not spec or not isinstance(spec.get("accepted_tokens"), int):
        return None
    acc = int(spec["accepted_tokens"])
    drafts, drafted = spec.get("drafts"), spec.get("draft_tokens")
    rate = acceptance_rate(acc, drafted) if isinstance(drafted, int) else None
    if isinstance(drafts, int):
        kind = LENGTH_PER_STEP
        length = acceptance_length(acc, drafts)
    else:
        kind = LENGTH_TOKENS_PER_STEP
        length = tokens_per_step(rec.completion_tokens or 0, acc) if (drafted or 0) > 0 else None
    per_pos = spec.get("accepted_per_position")
    positions = tuple(int(p) for p in per_pos) if isinstance(per_pos, list | tuple) else None
    return RequestAcceptance(
        rec.index,
        drafts,
        drafted,
        acc,
        rec.completion_tokens,
        rate,
        length,
        kind,
        str(spec.get("source", "")),
        positions,
    )


@dataclass(frozen=True, slots=True)
class WeightedAcceptance:
    """Acceptance over a set of requests: token-weighted (totals) and request-weighted (mean of each request's own
    value, with a t interval over requests)."""

    requests: int  # requests whose responses carried acceptance (drafted something or not)
    drafting_requests: int  # of which drafted at least one token: the ones with a rate and a length
    rate_token_weighted: float | None  # sum accepted / sum drafted
    rate_request_weighted: stats.Interval | None
    length_token_weighted: float | None  # 1 + sum accepted / sum drafts (or sum (n-1) / sum steps)
    length_request_weighted: stats.Interval | None
    length_kind: str
    # the token-weighted figures with an interval over prompts (a ratio of sums, requests of one prompt pooled:
    # `stats.cluster_ratio_interval`); None where a prompt's counts are not all known
    rate_token_weighted_interval: stats.Interval | None = None
    length_token_weighted_interval: stats.Interval | None = None


def weighted_acceptance(per_request: Sequence[RequestAcceptance]) -> WeightedAcceptance | None:
    """Both weightings over `per_request` (one kind of length only: the first request's)."""
    if not per_request:
        return None
    kind = per_request[0].length_kind
    same = [a for a in per_request if a.length_kind == kind]
    drafting = [a for a in same if a.rate is not None or a.length is not None]
    drafted = sum(a.draft_tokens or 0 for a in same if a.draft_tokens is not None)
    accepted = sum(a.accepted_tokens for a in same if a.draft_tokens is not None)
    rate_tw = acceptance_rate(accepted, drafted)
    if kind == LENGTH_PER_STEP:
        length_tw = acceptance_length(sum(a.accepted_tokens for a in same), sum(a.drafts or 0 for a in same))
    else:
        # summed over requests: sum (n_i - 1) / sum (n_i - 1 - accepted_i), i.e. the formula with n - 1 summed
        counted = [a for a in drafting if a.length is not None]
        n = sum((a.completion_tokens or 0) - 1 for a in counted)
        length_tw = tokens_per_step(n + 1, sum(a.accepted_tokens for a in counted))
    rates = [a.rate for a in same if a.rate is not None]
    lengths = [a.length for a in same if a.length is not None]
    rate_iv, length_iv = _pooled_intervals(same, kind)
    return WeightedAcceptance(
        requests=len(same),
        drafting_requests=len(drafting),
        rate_token_weighted=rate_tw,
        rate_request_weighted=stats.t_interval(rates) if rates else None,
        length_token_weighted=length_tw,
        length_request_weighted=stats.t_interval(lengths) if lengths else None,
        length_kind=kind,
        rate_token_weighted_interval=rate_iv,
        length_token_weighted_interval=length_iv,
    )


def _pooled_intervals(
    per_request: Sequence[RequestAcceptance], kind: str
) -> tuple[stats.Interval | None, stats.Interval | None]:
    """The token-weighted rate (accepted / drafted) and length (1 + accepted / steps) with intervals over prompts:
    each prompt's counts summed over its requests, a clustered ratio of sums. The length's only where steps are
    reported (LENGTH_PER_STEP)."""
    by: dict[int, list[float]] = {}
    for a in per_request:
        if a.draft_tokens is None:
            continue
        row = by.setdefault(a.index, [0.0, 0.0, 0.0])
        row[0] += a.accepted_tokens
        row[1] += a.draft_tokens
        row[2] += a.drafts or 0
    if not by:
        return None, None
    acc, drafted, steps = ([r[i] for r in by.values()] for i in range(3))
    rate = stats.cluster_ratio_interval(acc, drafted)
    if kind != LENGTH_PER_STEP or not any(steps):
        return rate, None
    per_step = stats.cluster_ratio_interval(acc, steps)  # accepted per step; the length adds the target's token
    length = stats.Interval(1 + per_step.estimate, 1 + per_step.low, 1 + per_step.high, per_step.confidence,
                            per_step.method, per_step.n)  # fmt: skip
    return rate, length


# ---------------------------------------------------------------------------------------------------------------
# Per draft position: the conditional rates (the canon's K-invariant part) and the acceptance length at every k.
# ---------------------------------------------------------------------------------------------------------------

INTERVAL_OVER_PROMPTS = "prompts"  # per-request counts, clustered by prompt: repeats of one prompt are one unit
INTERVAL_OVER_TOKENS = "tokens"  # server counters only: a binomial interval, treating each step as independent


@dataclass(frozen=True, slots=True)
class PositionRate:
    """Draft position j (0-based, vLLM's `position` label) over a window.

    A chain proposer's position j is only judged when positions 0..j-1 were all accepted (the first rejection
    ends the step), so the rate that does not depend on K is the conditional one: accepted at j / accepted at
    j-1 (drafts at j = 0). A step that proposed fewer than j+1 tokens (n-gram lookup with a short match) counts as
    not accepting j: no engine reports proposals per position, so the rate is of the proposer as it ran."""

    position: int
    reached: float  # steps that accepted every position before j (for j = 0: the steps, drafts)
    accepted: float  # of which accepted position j too
    conditional: stats.Interval  # accepted / reached: P(accept j | accepted 0..j-1), with its interval
    unconditional: float  # accepted / drafts: P(the first j+1 drafts all accepted), vLLM's per-position rate


@dataclass(frozen=True, slots=True)
class PositionAcceptance:
    """Acceptance per draft position over one arm's window, and the acceptance length it implies at every k up to
    the measured one: length(k) = 1 + sum_{j<k} unconditional_j, exact for a chain proposer whose i-th proposal
    does not depend on k (n-gram lookup, a greedy draft model, EAGLE's chain); not for tree proposers or a proposer
    that drafts differently when asked for more."""

    source: str
    drafts: float  # verification steps in the window
    positions: tuple[PositionRate, ...]
    interval_over: str  # INTERVAL_OVER_PROMPTS or INTERVAL_OVER_TOKENS: what the intervals treat as independent
    prompts: int  # prompts the interval is over (0 for counters)
    length_by_k: tuple[float, ...]  # acceptance length (bonus token included) at k = 1 .. len(positions)

    @property
    def k_measured(self) -> int:
        return len(self.positions)


def _length_by_k(unconditional: Sequence[float]) -> tuple[float, ...]:
    out, total = [], 1.0
    for p in unconditional:
        total += p
        out.append(total)
    return tuple(out)


def positions_from_counts(
    drafts: float, accepted_per_position: Sequence[float], source: str
) -> PositionAcceptance | None:
    """From counters diffed over a window (vLLM's, speculab's, llama.cpp's `..._accepted_tokens_per_pos_total`):
    Wilson intervals over steps, which treat each step as independent (no per-request counts to do better); None
    without steps or positions. A count above the one before it (scrapes of several engine processes a step apart)
    is capped at it, so no conditional rate exceeds 1."""
    if drafts <= 0 or not accepted_per_position:
        return None
    rows, reached = [], float(drafts)
    for j, a in enumerate(accepted_per_position):
        acc = max(0.0, min(float(a), reached))
        # Wilson bounds need whole counts (a sum over repeats of gauges can be fractional): the bounds from the
        # rounded counts, the estimate the exact ratio
        n, k = round(reached), min(round(acc), round(reached))
        ci = stats.wilson_interval(k, n)
        if reached > 0:
            ci = stats.Interval(acc / reached, ci.low, ci.high, ci.confidence, ci.method, ci.n)
        rows.append(PositionRate(j, reached, acc, ci, acc / drafts))
        reached = acc
    uncond = [r.unconditional for r in rows]
    return PositionAcceptance(source, float(drafts), tuple(rows), INTERVAL_OVER_TOKENS, 0, _length_by_k(uncond))


def positions_from_summary(s: AcceptanceSummary) -> PositionAcceptance | None:
    """From an acceptance summary's counters (its per-position rates are accepted at j / drafts): the one conversion
    bench and the verdict both use; None when speculation was not active or no position or step was counted."""
    if not s.active or not s.per_position or not s.drafts:
        return None
    drafts = float(s.drafts)
    return positions_from_counts(drafts, [p * drafts for p in s.per_position], s.source)


def positions_from_requests(per_request: Sequence[RequestAcceptance]) -> PositionAcceptance | None:
    """From each response's own per-position counts (`accepted_per_position` and its steps), summed per prompt
    (repeats of one prompt are one cluster) with a clustered ratio interval at each position; None unless every
    request that drafted carries both (a position's rate needs every request's count of it)."""
    drafting = [a for a in per_request if a.drafts]
    if not drafting or any(a.accepted_per_position is None for a in drafting):
        return None
    k = max(len(a.accepted_per_position or ()) for a in drafting)
    if k == 0:
        return None
    # per prompt: steps, and the steps that accepted each position (a shorter histogram: none accepted beyond it)
    by_prompt: dict[int, list[float]] = {}
    for a in drafting:
        counts = list(a.accepted_per_position or ()) + [0] * (k - len(a.accepted_per_position or ()))
        row = by_prompt.setdefault(a.index, [0.0] * (k + 1))
        row[0] += float(a.drafts or 0)
        for j, c in enumerate(counts):
            row[j + 1] += float(c)
    prompts = list(by_prompt.values())
    drafts = sum(p[0] for p in prompts)
    rows = []
    for j in range(k):
        reached = [p[j] for p in prompts]
        accepted = [min(p[j + 1], p[j]) for p in prompts]
        ci = stats.cluster_ratio_interval(accepted, reached)
        if math.isfinite(ci.low):  # a rate's interval stays within [0, 1]; NaN (one prompt) stays NaN
            ci = stats.Interval(ci.estimate, max(0.0, ci.low), min(1.0, ci.high), ci.confidence, ci.method, ci.n)
        rows.append(PositionRate(j, sum(reached), sum(accepted), ci, sum(accepted) / drafts))
    source = f"{drafting[0].source} (per response, by prompt)"
    uncond = [r.unconditional for r in rows]
    return PositionAcceptance(source, drafts, tuple(rows), INTERVAL_OVER_PROMPTS, len(prompts), _length_by_k(uncond))


# ---------------------------------------------------------------------------------------------------------------
# Per-request outliers: acceptance near zero or near full, which can track garbled or looping output (vllm#44487).
# ---------------------------------------------------------------------------------------------------------------

OUTLIER_LOW, OUTLIER_HIGH = 0.05, 0.95  # a request's acceptance rate at or beyond these
OUTLIER_MIN_DRAFTED = 16  # drafted tokens a rate needs to mean anything (a request that drafted 2 is 0, 0.5 or 1)


@dataclass(frozen=True, slots=True)
class AcceptanceOutlier:
    """One request whose acceptance rate is near zero or near full, with what its output's checks said."""

    index: int
    prompt_id: str
    side: str  # "low" (rate <= OUTLIER_LOW) | "high" (>= OUTLIER_HIGH)
    rate: float
    draft_tokens: int
    checks: str  # "passed" | "failed" | "none" (the item has no check that ran)
    degenerate: bool | None  # its output loops or repeats itself (analysis.degeneration); None: too short to judge


def outlier_side(a: RequestAcceptance) -> str | None:
    """ "low", "high", or None: a request's acceptance rate near zero, near full, or neither (or too few drafts)."""
    if a.rate is None or (a.draft_tokens or 0) < OUTLIER_MIN_DRAFTED:
        return None
    return "low" if a.rate <= OUTLIER_LOW else "high" if a.rate >= OUTLIER_HIGH else None


@dataclass(frozen=True, slots=True)
class AcceptanceSpeedup:
    """Per prompt: the candidate's acceptance length against its TPOT speedup (baseline TPOT / candidate TPOT, the
    same prompt), with a least-squares line and Spearman's rank correlation. Points are (prompt index, category,
    length, speedup), sorted by index ("" when the prompt has no category)."""

    length_kind: str
    points: tuple[tuple[int, str, float, float], ...]
    slope: float  # speedup per unit of acceptance length (NaN below 3 points or when lengths do not vary)
    slope_low: float
    slope_high: float
    intercept: float
    spearman_rho: float
    spearman_p: float

    @property
    def n(self) -> int:
        return len(self.points)


def acceptance_speedup(
    lengths: Mapping[int, float],
    base_tpot_s: Mapping[int, float],
    cand_tpot_s: Mapping[int, float],
    length_kind: str,
    categories: Mapping[int, str] | None = None,
) -> AcceptanceSpeedup | None:
    """Pair prompts present in all three maps (lengths: the candidate's per-prompt acceptance length)."""
    categories = categories or {}
    idx = sorted(
        i for i in set(lengths) & set(base_tpot_s) & set(cand_tpot_s) if cand_tpot_s[i] > 0 and base_tpot_s[i] > 0
    )
    if not idx:
        return None
    pts = tuple((i, categories.get(i, ""), float(lengths[i]), float(base_tpot_s[i] / cand_tpot_s[i])) for i in idx)
    xs, ys = [p[2] for p in pts], [p[3] for p in pts]
    fit = stats.fit_line(xs, ys)
    nan = math.nan
    rho = p = nan
    if len(pts) >= 3 and len(set(xs)) > 1 and len(set(ys)) > 1:
        res = scipy.stats.spearmanr(xs, ys)
        rho, p = float(res.statistic), float(res.pvalue)
    return AcceptanceSpeedup(
        length_kind,
        pts,
        fit.s_per_token if fit else nan,
        fit.s_per_token_ci[0] if fit else nan,
        fit.s_per_token_ci[1] if fit else nan,
        fit.overhead_s if fit else nan,
        rho,
        p,
    )


def per_prompt_length(per_request: Iterable[RequestAcceptance]) -> dict[int, float]:
    """Prompt index -> the median over its requests (repeats) of the acceptance length."""
    by: dict[int, list[float]] = {}
    for a in per_request:
        if a.length is not None:
            by.setdefault(a.index, []).append(a.length)
    return {i: statistics.median(v) for i, v in by.items()}
