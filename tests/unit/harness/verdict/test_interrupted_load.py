"""A repeat cut short (kill -9, Ctrl-C, a server that died) never recorded the requests it had in flight, so its load
looks short of the asked one. It was gated "load not achieved ... use a faster client machine" (issue 25): a wrong
diagnosis. It is reported as interrupted, and achieved load is measured over the repeats that finished."""

from __future__ import annotations

from dataclasses import replace

from fakes.ab_inputs import ArmEffect, make_inputs
from speculab.harness.design import LevelSpec
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.phrases import warning_text

FAST = ReportOptions(n_resamples=400)
LEVELS = (LevelSpec("concurrency", 4, ("low", "operating")),)
FASTER = {"c4": 0.6}


def _with_short_second_repeat(*, interrupted: bool):
    """The candidate's repeat 2 ran at 60 % of the asked load (as a killed repeat's records show it)."""
    whole = make_inputs(n_prompts=24, repeats=2, levels=LEVELS, candidates={"ngram-k4": ArmEffect(tpot_factor=FASTER)})
    short = make_inputs(
        n_prompts=24,
        repeats=2,
        levels=LEVELS,
        candidates={"ngram-k4": ArmEffect(tpot_factor=FASTER, achieved_fraction={"c4": 0.6})},
    )
    cut = next(r for r in short.runs if r.arm == "ngram-k4" and r.repeat == 2)
    runs = [r for r in whole.runs if (r.arm, r.repeat) != ("ngram-k4", 2)]
    return whole.with_runs([*runs, replace(cut, interrupted=interrupted, records=cut.records[:16])])


def test_an_interrupted_repeat_is_not_a_load_failure() -> None:
    r = build_report(_with_short_second_repeat(interrupted=True), FAST)
    comp = r.level("c4").comparison("ngram-k4")
    assert comp.gate == "ok" and comp.gate_reason is None, comp.gate_reason
    assert r.level("c4").arm("ngram-k4").interrupted_repeats == 1
    assert any("repeat(s) [2] interrupted" in warning_text(m) for m in r.missing)  # listed as what it is


def test_a_finished_repeat_short_of_its_load_is_still_gated() -> None:
    r = build_report(_with_short_second_repeat(interrupted=False), FAST)
    assert r.level("c4").comparison("ngram-k4").gate == "load not achieved"
