"""What the report shows of a phased load, read from the verdict built on its windows (`windows.phased_inputs`):
each phase with its steady window and the transition that opens it, each window's decisions, the recommendation's
answers, each arm's tail (p99) and stalls; and each arm's requests over the schedule's time, for the chart."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from speculab.harness.analysis.figures import E2E, TPOT, TTFT
from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.design import LevelSpec
from speculab.harness.load.phases import windows
from speculab.harness.results.ab_run import ABRun
from speculab.harness.stats import Distribution
from speculab.harness.verdict.model import LevelReport, RecommendationView
from speculab.harness.verdict.phases.records import (
    CounterPoint,
    PhaseArm,
    PhaseMetric,
    PhaseView,
    PhaseWindowView,
    TimelinePoint,
)
from speculab.harness.verdict.phases.windows import block_start_s

MAX_TIMELINE_POINTS = 600  # per arm: the chart's points, thinned evenly in send order


def phase_views(
    level: LevelSpec, cut: ABRun, levels: Sequence[LevelReport], rec: RecommendationView | None
) -> tuple[PhaseView, ...]:
    """Each phase of the schedule `level` with its windows, from the verdict built on `cut` (its `phased_inputs`)."""
    by_key = {lv.key: lv for lv in levels}
    spans = {s.key: s.window_s for s in cut.setup.levels if s.window_s is not None}
    out = []
    for w in windows(level.phases):
        steady, into = by_key.get(f"p{w.number}"), by_key.get(f"t{w.number}")
        out.append(
            PhaseView(
                number=w.number,
                kind=w.phase.kind,
                value=w.phase.value,
                label=w.phase.label,
                start_s=w.start_s,
                end_s=w.end_s,
                steady=_window_view(steady, spans, rec) if steady is not None else None,
                transition=_window_view(into, spans, rec) if into is not None else None,
            )
        )
    return tuple(out)


def _window_view(
    lv: LevelReport, spans: Mapping[str, tuple[float, float]], rec: RecommendationView | None
) -> PhaseWindowView:
    answers = tuple(a for a in (rec.answers if rec is not None else ()) if a.level == lv.key)
    # the deciding metric first, then the guardrails' time metrics, as the recommendation held them
    names = (rec.decide_on, *rec.guardrails) if rec is not None else ()
    metrics = tuple(
        PhaseMetric(
            c.candidate,
            r.metric,
            (r.decision or r.verdict) if c.gate == "ok" else c.gate,
            r.speedup,
            r.speedup_low,
            r.speedup_high,
            r.n_pairs,
        )
        for c in lv.comparisons
        for name in names
        if (r := c.metric(name)) is not None
    )
    arms = tuple(
        PhaseArm(
            arm=a.arm,
            sent=a.sent,
            error=a.error,
            ttft_p99_s=_p99(a.distributions, TTFT.name),
            tpot_p99_s=_p99(a.distributions, TPOT.name),
            e2e_p99_s=_p99(a.distributions, E2E.name),
            stalled_requests=a.stalled_requests,
        )
        for a in lv.arms
    )
    start, end = spans[lv.key]
    return PhaseWindowView(lv.key, lv.label, start, end, metrics, answers, arms)


def _p99(dists: Mapping[str, Distribution], name: str) -> float | None:
    d = dists.get(name)
    return d.p99 if d is not None and d.n and math.isfinite(d.p99) else None


def timeline(inputs: ABRun, level: LevelSpec) -> tuple[TimelinePoint, ...]:
    """Each arm's requests by send time into the schedule (its first repeat), with TPOT and E2E, and the acceptance
    its response carried where the engine reports it per response; thinned to `MAX_TIMELINE_POINTS` per arm."""
    out: list[TimelinePoint] = []
    for arm in inputs.arms:
        run = next(iter(inputs.runs_for(arm.name, level.key)), None)
        t0 = block_start_s(run) if run is not None else None
        if run is None or t0 is None:
            continue
        points = sorted(((r.sent_s - t0, r) for r in run.records if r.ok and not r.warmup), key=lambda p: p[0])
        step = max(1, math.ceil(len(points) / MAX_TIMELINE_POINTS))
        for t, r in points[::step]:
            m = request_metrics(r)
            out.append(TimelinePoint(arm.name, t, m.tpot_s, m.e2e_s, _acceptance(r.speculation)))
    return tuple(out)


def speculation_timeline(inputs: ABRun, level: LevelSpec) -> tuple[CounterPoint, ...]:
    """Each arm's acceptance and k in use over the schedule (its first repeat), from its engine's counters diffed
    between consecutive /metrics samples (`MemorySample.spec_counters`); an interval without drafts or steps has
    none."""
    out: list[CounterPoint] = []
    for arm in inputs.arms:
        run = next(iter(inputs.runs_for(arm.name, level.key)), None)
        samples = [m for m in (run.memory if run is not None else ()) if m.spec_counters]
        for a, b in itertools.pairwise(samples):
            d = {k: b.spec_counters[k] - a.spec_counters.get(k, 0.0) for k in b.spec_counters}
            drafted, accepted = d.get("draft_tokens"), d.get("accepted_tokens")
            rate = accepted / drafted if drafted and accepted is not None and drafted > 0 else None
            steps = {int(k[2:]): v for k, v in d.items() if k.startswith("k=") and k[2:].isdigit()}
            total = sum(steps.values())
            k = sum(k * v for k, v in steps.items()) / total if total > 0 else None
            if rate is not None or k is not None:
                out.append(CounterPoint(arm.name, b.t_s, rate, k))
    return tuple(out)


def _acceptance(spec: Mapping[str, Any] | None) -> float | None:
    """Accepted / drafted tokens of one response, where its engine reports them per response."""
    drafted, accepted = (spec or {}).get("draft_tokens"), (spec or {}).get("accepted_tokens")
    if isinstance(drafted, int | float) and drafted > 0 and isinstance(accepted, int | float):
        return float(accepted) / float(drafted)
    return None
