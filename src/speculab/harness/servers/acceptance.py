"""Speculative acceptance over a window, from whatever the engine reports, always naming the source.

One mechanism for every command: `acceptance_between(adapter, before, after, records, k)` reads the adapter's
source (Prometheus counters diffed between two scrapes: vLLM, speculab and llama.cpp `--metrics`; gauges: SGLang's;
then its responses: the adapter's own `window_acceptance` over what its records kept, llama.cpp's timings when
/metrics is off, or each response's whole counts summed) and falls back to the counters or gauges of the
`FALLBACK_ENGINES` that any server may expose; `speculab bench` (no engine known) passes the `other` adapter. This
module knows no engine: every name it reads is an adapter's. The result is one `AcceptanceSummary` (a record:
`harness.records`); `to_spec_decode_dict` is its form in a bench summary.json (`server.spec_decode`), `to_dict` its
form in an A/B run.json.

Definitions follow vLLM (the formulas are `harness.analysis.acceptance`'s); per position j = accepted at j / drafts.
Counters are server-wide: traffic from anyone else during the window counts too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from speculab.harness.analysis.acceptance import acceptance_length, acceptance_rate
from speculab.harness.records import FORCED, AcceptanceSummary, RequestRecord
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import FALLBACK_ENGINES, adapter_for
from speculab.harness.servers.adapters.base import AcceptanceMetrics, EngineAdapter
from speculab.harness.servers.scrape import MetricsSnapshot


def from_counters(
    kind: str, metrics: AcceptanceMetrics, deltas: Mapping[str, float], per_position: Mapping[int, float]
) -> AcceptanceSummary:
    """vLLM / speculab counters diffed around a load level. Server-wide: other clients' traffic counts too."""
    source = f"{kind}:spec_decode_* counters (server-wide delta)"
    drafts = deltas.get(metrics.drafts or "", 0.0)
    drafted = deltas.get(metrics.draft_tokens or "", 0.0)
    accepted = deltas.get(metrics.accepted_tokens or "", 0.0)
    if drafts <= 0 or drafted <= 0:
        return AcceptanceSummary(source, False, drafts, drafted, accepted)
    positions = tuple(per_position[j] / drafts for j in sorted(per_position))
    rate, length = acceptance_rate(accepted, drafted), acceptance_length(accepted, drafts)
    return AcceptanceSummary(source, True, drafts, drafted, accepted, rate, length, positions)


def from_responses(specs: Sequence[Mapping[str, Any]]) -> AcceptanceSummary | None:
    """Each response's own counts (`RequestRecord.speculation`, whichever engine wrote them) summed over the window:
    exact, per request; None when no response carried steps, drafted and accepted tokens."""
    whole = [s for s in specs if all(s.get(k) is not None for k in ("drafts", "draft_tokens", "accepted_tokens"))]
    if not whole:
        return None
    source = f"{whole[0].get('source')} (per response, summed)"
    drafts = float(sum(s["drafts"] for s in whole))
    drafted = float(sum(s["draft_tokens"] for s in whole))
    accepted = float(sum(s["accepted_tokens"] for s in whole))
    if drafts <= 0 or drafted <= 0:
        return AcceptanceSummary(source, False, drafts, drafted, accepted)
    per_pos: dict[int, float] = {}
    if all(s.get("accepted_per_position") for s in whole):  # a position's rate needs every response's count of it
        for s in whole:
            for j, v in enumerate(s["accepted_per_position"]):
                per_pos[j] = per_pos.get(j, 0.0) + v
    positions = tuple(per_pos[j] / drafts for j in sorted(per_pos))
    rate, length = acceptance_rate(accepted, drafted), acceptance_length(accepted, drafts)
    return AcceptanceSummary(source, True, drafts, drafted, accepted, rate, length, positions)


def from_gauges(kind: str, accept_length: float | None, accept_rate: float | None) -> AcceptanceSummary:
    """An engine's acceptance gauges (SGLang's): a recent-window average computed by the server, read after the load
    level."""
    active = bool(accept_length and accept_length > 1.0) or bool(accept_rate and accept_rate > 0)
    return AcceptanceSummary(
        f"{kind} gauges (server-wide, recent window; read, not a delta)",
        active,
        acceptance_rate=accept_rate,
        acceptance_length=accept_length,
        approximate=True,
    )


# ---------------------------------------------------------------------------------------------------------------
# Acceptance between two scrapes (and over a window's responses): the one place every command gets it from.
# ---------------------------------------------------------------------------------------------------------------


def acceptance_between(
    adapter: EngineAdapter,
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    records: Sequence[RequestRecord] = (),
    k: int | None = None,
) -> AcceptanceSummary | None:
    """Acceptance over the window between two scrapes (warmup records excluded); None when nothing was reported."""
    return acceptance_with_reason(adapter, before, after, records, k)[0]


def acceptance_with_reason(
    adapter: EngineAdapter,
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    records: Sequence[RequestRecord] = (),
    k: int | None = None,
) -> tuple[AcceptanceSummary | None, ReportWarning | None]:
    """(summary, why it is missing or inactive: a record the report words). Sources in order: the adapter's
    counters or gauges; its responses (the adapter's `window_acceptance`, e.g. llama.cpp's timings when its /metrics
    is off; or, for an engine that reports acceptance only in its responses, their counts summed); then the fallback
    engines' counters or gauges if the server happens to expose them (e.g. an `other` engine built on vLLM). A
    counter that went backwards (the server restarted between the scrapes) gives None: no delta can be trusted.
    Where the engine says it forced acceptance (its gauge, or a response's speculation), the summary's provenance is
    "forced" (`forced_evidence`): the numbers are a draw's, never the content's."""
    found, why = _acceptance(adapter, before, after, records, k)
    said = forced_evidence(adapter, after, records)
    if found is not None and said:
        found = replace(found, provenance=FORCED, forced_by=said)
    return found, why


def forced_evidence(
    adapter: EngineAdapter, after: MetricsSnapshot | None, records: Sequence[RequestRecord] = ()
) -> tuple[str, ...]:
    """What the engine said of forcing acceptance over the window: its forced gauge at 1 (the adapter's, or a
    fallback engine's, whose names any server may expose) after the window, and the responses whose speculation says
    `forced`; () when nothing says so."""
    said: list[str] = []
    kinds = (adapter.kind, *(k for k in FALLBACK_ENGINES if k != adapter.kind))
    gauges = dict.fromkeys(g for g in (adapter_for(k).forced_gauge for k in kinds) if g)
    for gauge in gauges if after is not None else ():
        values = [s.value for s in after.select(gauge)]  # type: ignore[union-attr]
        if any(v >= 0.5 for v in values):  # 1: forced (0: not); a rank of several that forces makes the whole
            said.append(f"{gauge} = {max(values):g}")
    if any(not r.warmup and r.speculation and r.speculation.get("forced") is True for r in records):
        said.append(RESPONSES_FORCED)
    return tuple(said)


# the evidence a response gives (`RequestRecord.speculation`'s "forced"), as `forced_by` keeps it
RESPONSES_FORCED = '"forced": true in its responses'


def _acceptance(
    adapter: EngineAdapter,
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    records: Sequence[RequestRecord],
    k: int | None,
) -> tuple[AcceptanceSummary | None, ReportWarning | None]:
    """`acceptance_with_reason` before what the engine says of forcing it."""
    have = before is not None and after is not None
    if have:
        found, why = _adapter_source(adapter.kind, adapter.acceptance, before, after)  # type: ignore[arg-type]
        if found is not None or why is not None:
            return found, why
    measured = [r for r in records if not r.warmup]
    found = adapter.window_acceptance(measured, k)
    if found is None and adapter.acceptance.kind == "per_response":  # whole counts in each response
        found = from_responses([r.speculation for r in measured if r.speculation])
    if found is not None:
        return found, None if found.active else _why(WarningKind.NO_DRAFTED_TOKENS, source=found.source)
    for kind in FALLBACK_ENGINES if have else ():
        found, why = _adapter_source(kind, adapter_for(kind).acceptance, before, after)  # type: ignore[arg-type]
        if found is not None or why is not None:
            return found, why
    prefixes = [p for p in (adapter_for(kind).metric_prefix for kind in FALLBACK_ENGINES) if p]
    return None, _why(WarningKind.NO_SPEC_METRICS, prefixes=prefixes)


def _why(kind: WarningKind, **fields: Any) -> ReportWarning:
    """Why acceptance is unknown or inactive, as a record: the counters or gauges it rests on, and their values."""
    return ReportWarning(kind, fields=fields)


def _adapter_source(
    kind: str, acc: AcceptanceMetrics, before: MetricsSnapshot, after: MetricsSnapshot
) -> tuple[AcceptanceSummary | None, ReportWarning | None]:
    """The counters or gauges `acc` names; (None, None) when the server exposes none of them."""
    if acc.kind == "counters":
        return _counter_acceptance(kind, acc, before, after)
    if acc.kind == "gauges":
        return _gauge_acceptance(kind, acc.accept_length_gauge or "", acc.accept_rate_gauge or "", after)
    return None, None


def _counter_acceptance(
    kind: str, metrics: AcceptanceMetrics, before: MetricsSnapshot, after: MetricsSnapshot
) -> tuple[AcceptanceSummary | None, ReportWarning | None]:
    """(None, None) when these counters are not exposed; (None, why) on a reset; else the summary (inactive when
    the counters did not move, with the reason)."""
    names = [metrics.drafts, metrics.draft_tokens, metrics.accepted_tokens]
    if any(n is None or after.resolve(n) is None for n in names):
        return None, None
    deltas: dict[str, float] = {}
    for n in names:
        # A counter absent before the window but present after it started at zero (lazily registered metrics).
        a, b = after.total(n) or 0.0, before.total(n) or 0.0  # type: ignore[arg-type]
        if a < b:  # the server restarted between the scrapes
            return None, _why(WarningKind.COUNTER_WENT_BACKWARDS, counter=n, before=b, after=a)
        deltas[n] = a - b  # type: ignore[index]
    accepted, drafted = deltas[metrics.accepted_tokens], deltas[metrics.draft_tokens]  # type: ignore[index]
    if accepted > drafted:  # a buggy exporter, or counters that reset at different times: nothing here holds
        names = {"accepted": metrics.accepted_tokens, "drafted": metrics.draft_tokens}
        return None, _why(WarningKind.COUNTERS_INCONSISTENT, **names, accepted_delta=accepted, drafted_delta=drafted)
    per_pos: dict[int, float] = {}
    if metrics.accepted_per_position:
        pa = after.by_label(metrics.accepted_per_position, "position")
        pb = before.by_label(metrics.accepted_per_position, "position")
        for pos, v in pa.items():
            if not pos.isdigit():
                continue
            d = v - pb.get(pos, 0.0)
            if d < 0:
                backwards = {"counter": metrics.accepted_per_position, "before": None, "after": None}
                return None, _why(WarningKind.COUNTER_WENT_BACKWARDS, **backwards)
            per_pos[int(pos)] = d
    found = from_counters(kind, metrics, deltas, per_pos)
    return found, None if found.active else _why(WarningKind.COUNTERS_DID_NOT_MOVE, engine=kind)


def _gauge_acceptance(
    kind: str, length_name: str, rate_name: str, after: MetricsSnapshot
) -> tuple[AcceptanceSummary | None, ReportWarning | None]:
    """Gauges for the latest batch, one per rank (SGLang's): averaged over ranks, read after the window."""
    lengths = [s.value for s in after.select(length_name)] if length_name else []
    if not lengths:
        return None, None
    rates = [s.value for s in after.select(rate_name)] if rate_name else []
    length = sum(lengths) / len(lengths)
    gauges = {"length_gauge": length_name, "length": length}
    if not all(0 <= r <= 1 for r in rates) or length < 0:  # a rate is a fraction; a length counts tokens
        return None, _why(WarningKind.GAUGES_OUT_OF_RANGE, **gauges, rate_gauge=rate_name, rates=rates)
    found = from_gauges(kind, length, sum(rates) / len(rates) if rates else None)
    return found, None if found.active else _why(WarningKind.GAUGE_NO_STEPS, **gauges)
