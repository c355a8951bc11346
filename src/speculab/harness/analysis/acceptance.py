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
from speculab.harness.records import RequestRecord


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
    return RequestAcceptance(
        rec.index, drafts, drafted, acc, rec.completion_tokens, rate, length, kind, str(spec.get("source", ""))
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
    return WeightedAcceptance(
        requests=len(same),
        drafting_requests=len(drafting),
        rate_token_weighted=rate_tw,
        rate_request_weighted=stats.t_interval(rates) if rates else None,
        length_token_weighted=length_tw,
        length_request_weighted=stats.t_interval(lengths) if lengths else None,
        length_kind=kind,
    )


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
