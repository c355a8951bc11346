"""A phased load judged window by window (issue 52): records cut by send time into each phase's steady window and
the transition that opens it, each window a comparison unit of the one verdict, summary.json's `phases`."""

from __future__ import annotations

import dataclasses

import pytest
from tests.fakes.phased_inputs import ADAPTIVE, SCHEDULE, phased

from speculab.config.experiment import LoadPhase
from speculab.harness.design import LevelSpec
from speculab.harness.load.phases import PHASE_STRIDE
from speculab.harness.records import MemorySample
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.harness.verdict.phases.views import speculation_timeline
from speculab.harness.verdict.phases.windows import phased_inputs, window_specs

FAST = ReportOptions(n_resamples=300)


def test_windows_open_each_changed_phase_with_its_transition():
    specs = window_specs(SCHEDULE)
    assert [(s.key, s.value, s.window_s, s.roles) for s in specs] == [
        ("p1", 1, (0.0, 80.0), ("phase",)),
        ("t2", 8, (80.0, 100.0), ("transition",)),
        ("p2", 8, (100.0, 120.0), ("phase",)),
        ("t3", 1, (120.0, 140.0), ("transition",)),
        ("p3", 1, (140.0, 200.0), ("phase",)),
    ]
    assert specs[1].label == "into phase 2, concurrency 8 (80–100 s)"
    same = dataclasses.replace(SCHEDULE, phases=(LoadPhase(2, None, 5.0), LoadPhase(2, None, 5.0)))
    assert [s.key for s in window_specs(same)] == ["p1", "p2"]  # no change, no transition


def test_records_are_cut_by_send_time_and_keep_their_prompts():
    cut = phased_inputs(phased())
    assert cut is not None
    assert [lv.key for lv in cut.setup.levels] == ["p1", "t2", "p2", "t3", "p3"]
    whole = {r.index for r in phased().runs_for("baseline", "phased")[0].records}
    for pos, spec in enumerate(cut.setup.levels):
        (run,) = cut.runs_for("baseline", spec.key)
        assert {r.index for r in run.records} == {i for i in whole if i // PHASE_STRIDE == pos}
    # each window's items are the workload's, numbered as sent: checks and categories read them as any level's
    first_of_p2 = next(it for it in cut.setup.items if it.index == 2 * PHASE_STRIDE)
    assert first_of_p2.prompt == cut.setup.items[0].prompt


def test_each_phase_gets_its_verdict_and_summary_json_holds_it():
    report = build_report(phased(), FAST)
    assert [lv.key for lv in report.levels] == ["p1", "t2", "p2", "t3", "p3"]  # in time order
    assert [p.steady.metrics[0].decision for p in report.phases] == ["faster", "slower", "faster"]
    high = report.phases[1]
    assert (high.value, high.start_s, high.end_s) == (8, 80, 120) and high.transition is not None
    r = high.steady.metrics[0]
    assert r.speedup_high < 1 / 1.03 and r.speedup_low > 0.5  # with its interval
    assert report.candidates[0].crossover is None  # no load interpolated between times
    back = Report.from_json(report.to_json())
    assert back.to_dict()["phases"] == report.to_dict()["phases"]  # summary.json reads back as written
    assert {a.arm for a in back.phases[0].steady.arms} == {"baseline", "ngram-k4"}


def test_a_candidate_faster_in_steady_phases_but_late_at_a_transition_keeps_plain_there():
    report = build_report(phased(ADAPTIVE, stall_into_high_s=0.5), FAST)
    into = report.phases[1].transition
    assert into is not None
    (answer,) = into.answers
    assert (answer.answer, answer.why) == ("plain", "guardrail")
    (low,) = report.phases[0].steady.answers
    assert low.answer != "plain"
    arms = {a.arm: a for a in into.arms}
    assert arms["ngram-k4"].ttft_p99_s > arms["baseline"].ttft_p99_s + 0.4
    # the recommendation reads it: the windows in time order, plain at the transition, named
    rec = report.recommendation
    assert rec is not None and rec.form == "per-phase"
    assert [(c.level, c.answer) for c in rec.loads] == [
        ("p1", "ship"),
        ("t2", "plain"),
        ("p2", "ship"),
        ("t3", "ship"),
        ("p3", "ship"),
    ]
    assert all(b.edge_between is None and b.upper_edge is None for b in rec.bands)  # no edge between times


@pytest.mark.parametrize("key", ["phased"])
def test_a_schedule_is_one_level_on_disk(key):
    assert SCHEDULE.key == key and LevelSpec.from_dict(SCHEDULE.to_dict()) == SCHEDULE


def test_acceptance_and_k_in_use_over_time_come_from_the_counters_between_samples():
    inputs = phased(ADAPTIVE)
    counts = [(0.0, 0, 0, 0, 0), (10.0, 40, 30, 0, 10), (20.0, 40, 30, 10, 10), (30.0, 80, 50, 10, 20)]
    memory = tuple(
        MemorySample(t, spec_counters={"draft_tokens": d, "accepted_tokens": a, "k=0": k0, "k=4": k4})
        for t, d, a, k0, k4 in counts
    )
    runs = tuple(dataclasses.replace(r, memory=memory) if r.arm == "ngram-k4" else r for r in inputs.runs)
    got = speculation_timeline(dataclasses.replace(inputs, runs=runs), SCHEDULE)
    # 30 of 40 at k 4; no drafts at all (k 0: speculation skipped); 20 of 40 at k 4
    assert [(p.arm, p.t_s, p.acceptance, p.k) for p in got] == [
        ("ngram-k4", 10.0, 0.75, 4.0),
        ("ngram-k4", 20.0, None, 0.0),
        ("ngram-k4", 30.0, 0.5, 4.0),
    ]
