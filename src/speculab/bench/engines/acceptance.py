"""Acceptance summaries from what each engine reports, always naming the source.

Pure functions: the scraper hands in counter deltas (after - before a load level, summed over label sets other than
`position`) or the per-response fields it kept; these turn them into one `AcceptanceSummary`. Definitions follow
vLLM: a draft is one request's verification step; acceptance rate = accepted / drafted tokens; mean acceptance
length = 1 + accepted / drafts (the target's own token included); per position j = accepted at j / drafts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from speculab.bench.engines.base import AcceptanceMetrics


@dataclass(frozen=True, slots=True)
class AcceptanceSummary:
    source: str  # e.g. "vllm counters (server-wide)"; reports print it beside the numbers
    active: bool  # False: no drafts at all -> the verdict is "speculation not active"
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    per_position: tuple[float, ...] = ()
    approximate: bool = False  # gauges or a k assumption were involved

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["per_position"] = list(self.per_position)
        return d


def counter_rates(drafts: float, draft_tokens: float, accepted: float) -> tuple[float | None, float]:
    """(acceptance rate, mean acceptance length) from vLLM-semantics totals; `drafts` must be > 0. The one place
    these formulas live: `from_counters` (experiments) and `bench.scrape` (single runs) both call it."""
    return (accepted / draft_tokens if draft_tokens > 0 else None), 1.0 + accepted / drafts


def from_counters(
    kind: str, metrics: AcceptanceMetrics, deltas: Mapping[str, float], per_position: Mapping[int, float]
) -> AcceptanceSummary:
    """vLLM / speculab counters diffed around a load level. Server-wide: other clients' traffic counts too."""
    source = f"{kind} counters (server-wide)"
    drafts = deltas.get(metrics.drafts or "", 0.0)
    drafted = deltas.get(metrics.draft_tokens or "", 0.0)
    accepted = deltas.get(metrics.accepted_tokens or "", 0.0)
    if drafts <= 0 or drafted <= 0:
        return AcceptanceSummary(source, False, drafts, drafted, accepted)
    positions = tuple(per_position[j] / drafts for j in sorted(per_position))
    rate, length = counter_rates(drafts, drafted, accepted)
    return AcceptanceSummary(source, True, drafts, drafted, accepted, rate, length, positions)


def from_llamacpp_timings(timings: Iterable[Mapping[str, Any]], k: int | None = None) -> AcceptanceSummary:
    """Sum `timings.draft_n` / `draft_n_accepted` over responses. Exact rate; the length needs the step count,
    which llama.cpp does not report, so it is estimated as if every draft had k tokens (flagged approximate)."""
    drafted = accepted = 0.0
    for t in timings:
        drafted += float(t.get("draft_n") or 0)
        accepted += float(t.get("draft_n_accepted") or 0)
    source = "llama.cpp per-response timings"
    if drafted <= 0:
        return AcceptanceSummary(source, False, None, drafted, accepted)
    length = None
    drafts = None
    if k:
        drafts = drafted / k
        length = 1.0 + accepted / drafts
    return AcceptanceSummary(source, True, drafts, drafted, accepted, accepted / drafted, length, (), k is not None)


def from_sglang_meta(meta_infos: Iterable[Mapping[str, Any]], k: int | None = None) -> AcceptanceSummary:
    """SGLang per-response `meta_info`: acceptance length = completion_tokens / spec_verify_ct (exact);
    the rate needs k: (length - 1) / k (flagged approximate)."""
    steps = tokens = 0.0
    for m in meta_infos:
        steps += float(m.get("spec_verify_ct") or 0)
        tokens += float(m.get("completion_tokens") or 0)
    source = "sglang per-response meta_info"
    if steps <= 0:
        return AcceptanceSummary(source, False, steps)
    length = tokens / steps
    rate = (length - 1.0) / k if k else None
    accepted = tokens - steps  # every step emits one target token; the rest were accepted drafts
    return AcceptanceSummary(source, True, steps, steps * k if k else None, accepted, rate, length, (), k is not None)


def from_sglang_gauges(accept_length: float | None, accept_rate: float | None) -> AcceptanceSummary:
    """SGLang's gauges: a recent-window average computed by the server, read after the load level."""
    active = bool(accept_length and accept_length > 1.0) or bool(accept_rate and accept_rate > 0)
    return AcceptanceSummary(
        "sglang gauges (recent window)",
        active,
        acceptance_rate=accept_rate,
        acceptance_length=accept_length,
        approximate=True,
    )
