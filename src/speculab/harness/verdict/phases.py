"""A phased load judged phase by phase: each request belongs to the window its send time falls in, and each window
is a comparison unit as a load level is (the same verdict, gates, guardrails and recommendation: one verdict).

The windows of a schedule (docs/experiment.md, "Phased loads") are `load.phases.segments`: phase 1 whole; each
later phase whose load differs from the one before opens with a transition window, its first `transition_s`
seconds ("t<n>"), where an engine that adapts its speculation to the load has not caught up yet; the rest of it is
the phase's steady window ("p<n>"). A phase whose load did not change has no transition. `phased_inputs` turns a
run with a phased level into one whose levels are these windows (each a `LevelSpec` with its `window`), each
repeat's records cut by send time; the verdict is then built from that as from any run. The phases' own view
(`phase_views`: load, windows, answers, p99 and stalls per window; `timeline`: latency over time) is read from the
levels and the recommendation that verdict made.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from speculab.harness.analysis.figures import E2E, TPOT, TTFT
from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.analysis.windows import mean_in_flight
from speculab.harness.design import LevelSpec
from speculab.harness.load.phases import PHASE_STRIDE, segments, windows
from speculab.harness.records import RequestSpec
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.stats import Distribution
from speculab.harness.verdict.model import (
    ArmLevel,
    LevelReport,
    PhaseArm,
    PhaseView,
    PhaseWindowView,
    RecommendationView,
    TimelinePoint,
)

MAX_TIMELINE_POINTS = 600  # per arm: the chart's points, thinned evenly in send order


def phased_level(inputs: ABRun) -> LevelSpec | None:
    """The run's phased level (a schedule is a run's only load), or None."""
    return next((lv for lv in inputs.setup.levels if lv.phases), None)


def window_specs(level: LevelSpec) -> tuple[LevelSpec, ...]:
    """The schedule's windows in time order (`load.phases.segments`), each a level of its own."""
    out = []
    for w in segments(level.phases, level.transition_s):
        p = w.phase
        role = "transition" if w.part == "t" else "phase"
        arrival = level.arrival if p.kind == "rate" else None
        out.append(LevelSpec(p.kind, p.value, (role,), arrival, level.max_concurrency, window=w.key,
                             window_s=(w.start_s, w.end_s)))  # fmt: skip
    return tuple(out)


def with_window_load(arm: ArmLevel, runs: Sequence[RepeatRun], spec: LevelSpec) -> ArmLevel:
    """A closed-loop window's achieved load: the requests in flight over the window, whenever sent (`runs`: the
    arm's whole schedule). A window's own records miss those sent before it and still running, which a closed loop
    at that concurrency holds too (at concurrency 32 with 1 s requests, a 2 s window's own would read half)."""
    if spec.window_s is None or spec.kind != "concurrency":
        return arm
    start, end = spec.window_s
    held = []
    for run in runs:
        t0 = block_start_s(run)
        if t0 is not None and not run.interrupted:
            held.append(mean_in_flight([r for r in run.records if not r.warmup], (t0 + start, t0 + end)))
    if not held:
        return arm
    achieved = statistics.fmean(held)
    return dataclasses.replace(arm, achieved_concurrency=achieved, load_fraction=achieved / spec.value)


def block_start_s(run: RepeatRun) -> float | None:
    """The clock time the schedule started in this repeat: its measured block's start (the records' clock)."""
    if run.windows_s:
        return run.windows_s[0][0]
    sent = [r.sent_s for r in run.records if not r.warmup]
    return min(sent) if sent else None


def phased_inputs(inputs: ABRun) -> ABRun | None:
    """The run with its phased level cut into windows (None without one): each repeat's measured records by when they
    were sent; the items those windows sent, as the phases numbered them (`load.phases.phase_index`), so pairs,
    groups, categories and checks read them as any level's."""
    level = phased_level(inputs)
    if level is None:
        return None
    specs = window_specs(level)
    runs: list[RepeatRun] = []
    for run in inputs.runs:
        if run.level != level.key:
            runs.append(run)
            continue
        t0 = block_start_s(run)
        for spec in specs:
            assert spec.window_s is not None
            start, end = spec.window_s
            kept = tuple(r for r in run.records if not r.warmup and t0 is not None and start <= r.sent_s - t0 < end)
            span = ((t0 + start, t0 + end),) if t0 is not None else ()
            runs.append(dataclasses.replace(run, level=spec.key, records=kept, windows_s=span))
    sent = sorted({r.index for run in runs for r in run.records})
    setup = dataclasses.replace(inputs.setup, levels=specs, items=_sent_items(inputs.setup.items, sent))
    return dataclasses.replace(inputs, setup=setup, runs=tuple(runs))


def _sent_items(items: Sequence[RequestSpec], indices: Sequence[int]) -> tuple[RequestSpec, ...]:
    """The workload's items as each phase sent them: index i is item (i mod the stride) cycled, numbered i."""
    if not items:
        return ()
    return tuple(dataclasses.replace(items[(i % PHASE_STRIDE) % len(items)], index=i) for i in indices)


def phase_views(
    level: LevelSpec, cut: ABRun, levels: Sequence[LevelReport], rec: RecommendationView | None
) -> tuple[PhaseView, ...]:
    """Each phase of the schedule `level` with its windows' answers, from the verdict built on `cut` (its
    `phased_inputs`): the windows' comparisons, the recommendation's answers, each arm's p99 and stalls."""
    by_key = {lv.key: lv for lv in levels}
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
                steady=_window_view(steady, cut, rec) if steady is not None else None,
                transition=_window_view(into, cut, rec) if into is not None else None,
            )
        )
    return tuple(out)


def _window_view(lv: LevelReport, inputs: ABRun, rec: RecommendationView | None) -> PhaseWindowView:
    spec = next(s for s in inputs.setup.levels if s.key == lv.key)
    assert spec.window_s is not None
    answers = tuple(a for a in (rec.answers if rec is not None else ()) if a.level == lv.key)
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
    return PhaseWindowView(lv.key, lv.label, spec.window_s[0], spec.window_s[1], lv.comparisons, answers, arms)


def _p99(dists: Mapping[str, Distribution], name: str) -> float | None:
    d = dists.get(name)
    return d.p99 if d is not None and d.n and math.isfinite(d.p99) else None


def timeline(inputs: ABRun, level: LevelSpec) -> tuple[TimelinePoint, ...]:
    """Each arm's requests by send time into the schedule (its first repeat), with TPOT and E2E, and the acceptance
    its response carried where the engine reports it per response; thinned to `MAX_TIMELINE_POINTS` per arm."""
    out: list[TimelinePoint] = []
    for arm in inputs.arms:
        run = next((r for r in inputs.runs_for(arm.name, level.key)), None)
        t0 = block_start_s(run) if run is not None else None
        if run is None or t0 is None:
            continue
        points = sorted(((r.sent_s - t0, r) for r in run.records if r.ok and not r.warmup), key=lambda p: p[0])
        step = max(1, math.ceil(len(points) / MAX_TIMELINE_POINTS))
        for t, r in points[::step]:
            m = request_metrics(r)
            out.append(TimelinePoint(arm.name, t, m.tpot_s, m.e2e_s, _acceptance(r.speculation)))
    return tuple(out)


def _acceptance(spec: Mapping[str, Any] | None) -> float | None:
    """Accepted / drafted tokens of one response, where its engine reports them per response."""
    drafted, accepted = (spec or {}).get("draft_tokens"), (spec or {}).get("accepted_tokens")
    if isinstance(drafted, int | float) and drafted > 0 and isinstance(accepted, int | float):
        return float(accepted) / float(drafted)
    return None
