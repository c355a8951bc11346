"""A phased load as the lifecycle saves it (issue 52), without a server: both arms through `SCHEDULE` (concurrency
1 -> 8 -> 1, each change's first 20 s its transition window), each window a fake closed loop from its start whose
prompts are numbered as the runner numbers them, cut at the window's end as the runner stops sending."""

from __future__ import annotations

import dataclasses
import functools

from speculab.config.experiment import LoadPhase
from speculab.harness.design import LevelSpec
from speculab.harness.load.phases import PHASE_STRIDE
from speculab.harness.records import RequestRecord
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.verdict.phases.windows import window_specs
from tests.fakes.ab_inputs import ArmEffect, make_inputs, make_run

T0 = 1000.0  # the block's start on the records' clock
SCHEDULE = LevelSpec(
    "concurrency",
    8,
    ("operating",),
    phases=(LoadPhase(1, None, 80.0), LoadPhase(8, None, 40.0), LoadPhase(1, None, 80.0)),
    transition_s=20.0,
)
# prompts each window's fake closed loop is given: more than its time sends (~1.5 s requests); those it sends after the
# window's end are dropped, as the runner never sends them
GIVEN = 200
# the candidate: twice as fast alone, 1.5x slower at concurrency 8, and its transitions as its phases
CANDIDATE = ArmEffect(tpot_factor={"p1": 0.5, "t2": 1.5, "p2": 1.5, "t3": 0.5, "p3": 0.5}, tokens_per_chunk=2)
# an adaptive one: twice as fast in every phase, its first tokens late while it re-plans at the switch (`phased`)
ADAPTIVE = ArmEffect(tpot_factor=dict.fromkeys(("p1", "t2", "p2", "t3", "p3"), 0.5), tokens_per_chunk=2)


def _shifted(rec: RequestRecord, d: float) -> RequestRecord:
    chunks = tuple(dataclasses.replace(c, t_s=c.t_s + d) for c in rec.chunks)
    return dataclasses.replace(rec, scheduled_s=rec.scheduled_s + d, sent_s=rec.sent_s + d, end_s=rec.end_s + d,
                               chunks=chunks)  # fmt: skip


def _late_first_token(rec: RequestRecord, d: float) -> RequestRecord:
    """The same request with every chunk `d` later: its TTFT (and E2E) `d` longer, its TPOT the same."""
    chunks = tuple(dataclasses.replace(c, t_s=c.t_s + d) for c in rec.chunks)
    return dataclasses.replace(rec, end_s=rec.end_s + d, chunks=chunks)


def phased(candidate: ArmEffect = CANDIDATE, stall_into_high_s: float = 0.0) -> ABRun:
    return _phased("adaptive" if candidate is ADAPTIVE else "plain", stall_into_high_s)


@functools.cache
def _phased(which: str, stall_into_high_s: float) -> ABRun:
    """Both arms through SCHEDULE, each window a fake closed loop from its start, its prompts numbered as the
    runner numbers them (segment position x PHASE_STRIDE + k)."""
    candidate = ADAPTIVE if which == "adaptive" else CANDIDATE
    base = make_inputs(n_prompts=60, repeats=1, levels=(SCHEDULE,), candidates={"ngram-k4": candidate}, slo=False)
    items = base.setup.items
    runs = []
    for arm, eff in (("baseline", ArmEffect()), ("ngram-k4", candidate)):
        records: list[RequestRecord] = []
        for pos, spec in enumerate(window_specs(SCHEDULE)):
            assert spec.window_s is not None
            sent = [dataclasses.replace(items[k % len(items)], index=pos * PHASE_STRIDE + k) for k in range(GIVEN)]
            one = make_run(arm, spec, 1, sent, eff, seed=0)
            start, end = spec.window_s
            for r in one.records:
                r = _shifted(r, T0 + start)
                if r.sent_s >= T0 + end:
                    continue
                if arm == "ngram-k4" and spec.key == "t2":
                    r = _late_first_token(r, stall_into_high_s)
                records.append(r)
        windows = ((T0, max(r.end_s for r in records)),)
        runs.append(RepeatRun(arm, "phased", 1, tuple(records), windows_s=windows, order=len(runs)))
    return dataclasses.replace(base, runs=tuple(runs))
