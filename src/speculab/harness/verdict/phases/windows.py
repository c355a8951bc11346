"""A phased load judged phase by phase: each request belongs to the window its send time falls in, and each window
is a comparison unit as a load level is (the same verdict, gates, guardrails and recommendation: one verdict).

The windows of a schedule (docs/experiment.md, "Phased loads") are `load.phases.segments`: phase 1 whole; each
later phase whose load differs from the one before opens with a transition window, its first `transition_s`
seconds ("t<n>"), where an engine that adapts its speculation to the load has not caught up yet; the rest of it is
the phase's steady window ("p<n>"). A phase whose load did not change has no transition. `phased_inputs` turns a
run with a phased level into one whose levels are these windows (each a `LevelSpec` with its `window`), each
repeat's records cut by send time; the verdict is then built from that as from any run (`views` reads what it made).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from speculab.harness.analysis.windows import mean_in_flight
from speculab.harness.design import LevelSpec
from speculab.harness.load.phases import PHASE_STRIDE, segments
from speculab.harness.records import RequestSpec
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.verdict.model import ArmLevel


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


def with_window_load(arm: ArmLevel, whole: ABRun, spec: LevelSpec) -> ArmLevel:
    """A closed-loop window's achieved load: the requests in flight over the window, whenever sent (`whole`: the run
    before it was cut). A window's own records miss those sent before it and still running, which a closed loop at
    that concurrency holds too (at concurrency 32 with 1 s requests, a 2 s window's own would read half). Any other
    level's load is as `arm` has it."""
    schedule = phased_level(whole)
    if spec.window_s is None or spec.kind != "concurrency" or schedule is None:
        return arm
    start, end = spec.window_s
    held = []
    for run in whole.runs_for(arm.arm, schedule.key):
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
    """The run with its phased level cut into windows (None without one): each repeat's measured records by when the
    load sent them; the items those windows sent, as the phases numbered them (`load.phases.phase_index`), so pairs,
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
        # by when the load sent it (`scheduled_s`: a closed loop's stream freed, an open loop's arrival), the time the
        # runner chose its window's prompt by; a client that fell behind does not move it into the next window
        at = [(r.scheduled_s - t0 if t0 is not None else -1.0, r) for r in run.records if not r.warmup]
        for spec in specs:
            assert spec.window_s is not None
            start, end = spec.window_s
            kept = tuple(r for t, r in at if start <= t < end)
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
