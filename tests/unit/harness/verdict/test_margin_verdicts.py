"""The report's four answers against the margin on synthetic inputs with known effects, the launch as the unit when
each repeat relaunches, the warning near the margin, and the correctness non-inferiority answer."""

from __future__ import annotations

import json
import math

import pytest
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.design import LevelSpec
from speculab.harness.verdict.build import build_report, near_margin
from speculab.harness.verdict.model import Report, ReportOptions, WarningKind
from speculab.report.phrases import verdict_line, warning_lines
from speculab.report.summary import summary_dict

FAST = ReportOptions(n_resamples=300)
C1 = (LevelSpec("concurrency", 1, ("low", "operating")),)


def _tpot(report: Report, cand: str = "ngram-k4", level: str = "c1"):
    comp = report.level(level).comparison(cand)
    return comp, comp.metric("tpot_s")


def test_a_real_speedup_is_faster_beyond_the_margin_and_the_summary_says_so():
    cand = ArmEffect(tpot_factor={"c1": 1 / 1.3}, acceptance_length=2.5)
    r = build_report(make_inputs(n_prompts=48, repeats=1, levels=C1, candidates={"ngram-k4": cand}), FAST)
    comp, tp = _tpot(r)
    assert tp.decision == "faster" and comp.decision == "faster" and tp.margin == 0.03
    assert tp.speedup_low > 1.03
    line = verdict_line(r, r.candidates[0])
    assert "TPOT 1.2" in line and "faster [" in line and "at concurrency 1, beyond the ±3% margin" in line
    d = summary_dict(r)
    assert d["margin"] == {"tpot_s": 0.03, "e2e_s": 0.03, "ttft_s": 0.03, "itl_s": 0.03, "correctness": 0.05}
    m = d["levels"][0]["comparisons"][0]["metrics"][0]
    assert {m[k] for k in ("decision",)} == {"faster"} and m["verdict"] == "faster"
    assert m["margin"] == 0.03 and m["to_decide"] is None and m["unit"] == "prompt" and m["launches"] == 1
    json.dumps(d, allow_nan=False)


def test_a_small_clear_difference_is_within_the_margin_not_faster():
    # 1 % faster with very little noise: detectably different, and no reason to ship
    cand = ArmEffect(tpot_factor={"c1": 1 / 1.01}, acceptance_length=2.5)
    r = build_report(make_inputs(n_prompts=200, repeats=3, levels=C1, candidates={"ngram-k4": cand}), FAST)
    _, tp = _tpot(r)
    assert tp.verdict == "faster" and tp.decision == "equivalent", tp
    assert "detectably faster, but within the margin" in verdict_line(r, r.candidates[0])
    r5 = build_report(make_inputs(n_prompts=200, repeats=3, levels=C1, candidates={"ngram-k4": cand}),
                      ReportOptions(n_resamples=300, margin={"tpot_s": 0.0}))  # fmt: skip
    assert _tpot(r5)[1].decision == "faster" and r5.margin["tpot_s"] == 0.0  # margin 0: the detectable difference


def test_an_interval_astride_the_margin_is_inconclusive_and_says_how_much_more_would_decide():
    cand = ArmEffect(tpot_factor={"c1": 1 / 1.06}, acceptance_length=2.5)
    r = build_report(make_inputs(n_prompts=12, repeats=1, levels=C1, candidates={"ngram-k4": cand}), FAST)
    _, tp = _tpot(r)
    assert tp.decision == "inconclusive", tp
    assert tp.to_decide is not None and tp.to_decide > 1
    assert "would likely decide it" in verdict_line(r, r.candidates[0])
    assert any("TPOT near the ±3% margin" in w and "repeats" in w for w in warning_lines(r.warnings)), r.warnings


def test_the_run_margin_and_the_options_margin():
    inputs = make_inputs(n_prompts=24, repeats=1, levels=C1)
    from dataclasses import replace

    run_margin = replace(inputs, setup=replace(inputs.setup, margin={"tpot_s": 0.10, "correctness": 0.02}))
    r = build_report(run_margin, FAST)
    assert r.margin["tpot_s"] == 0.10 and r.margin["e2e_s"] == 0.03 and r.margin["correctness"] == 0.02
    assert _tpot(r)[1].margin == 0.10
    again = build_report(run_margin, ReportOptions(n_resamples=300, margin={"tpot_s": 0.05}))  # compare --margin
    assert again.margin["tpot_s"] == 0.05 and again.margin["correctness"] == 0.02


def test_with_three_or_more_launches_the_interval_carries_launch_to_launch_variance():
    same = ArmEffect(acceptance_length=2.0, launch_sd=0.02)  # identical arms, launches differ by ~2 %
    base = ArmEffect(launch_sd=0.02)
    inputs = make_inputs(n_prompts=48, repeats=4, levels=C1, baseline=base, candidates={"ngram-k4": same}, seed=5)
    comp, tp = _tpot(build_report(inputs, FAST))
    assert tp.unit == "launch" and tp.launches == 4 and comp.launched
    from dataclasses import replace

    two_url = replace(inputs, setup=replace(inputs.setup, two_url_mode=True))  # the same data, one server each
    comp2, tp2 = _tpot(build_report(two_url, FAST))
    assert tp2.unit == "prompt" and tp2.launches == 1 and not comp2.launched
    width, width2 = math.log(tp.speedup_high / tp.speedup_low), math.log(tp2.speedup_high / tp2.speedup_low)
    assert width > 2 * width2, (tp, tp2)  # the launches widen it


def test_fewer_than_three_launches_say_the_launch_effect_is_unmeasured():
    from speculab.report.phrases import launch_phrase

    r = build_report(make_inputs(n_prompts=24, repeats=2, levels=C1), FAST)
    comp, tp = _tpot(r)
    assert tp.unit == "prompt" and comp.launches == 2 and comp.launched
    assert launch_phrase(comp).startswith("launch effect unmeasured (2 launches per arm")
    assert tp.launch_spread is not None and tp.launch_spread < 0.03  # the fake's launches do not differ
    assert not any("launch pairs' TPOT effects differ" in w for w in warning_lines(r.warnings))


def test_two_launches_that_differ_by_more_than_the_margin_are_warned_about():
    wobbly = ArmEffect(launch_sd=0.10)  # launches 10 % apart, as the reference engine's on a 2-core VM (bench)
    inputs = make_inputs(n_prompts=24, repeats=2, levels=C1, baseline=wobbly,
                         candidates={"ngram-k4": ArmEffect(acceptance_length=2.0, launch_sd=0.10)}, seed=3)  # fmt: skip
    r = build_report(inputs, FAST)
    _, tp = _tpot(r)
    assert tp.unit == "prompt" and tp.launch_spread > 0.03, tp
    assert any(
        "launch pairs' TPOT effects differ by" in w and "`repeats: 3`" in w for w in warning_lines(r.warnings)
    ), r.warnings


def test_near_margin():
    assert near_margin(1.025, 1.10, 0.03) and near_margin(0.90, 0.975, 0.03)
    assert not near_margin(1.10, 1.20, 0.03) and not near_margin(0.995, 1.005, 0.03)


@pytest.mark.parametrize(("fails", "answer"), [(0, "not worse"), (2, "not worse"), (30, "worse")])
def test_correctness_non_inferiority(fails: int, answer: str):
    """Checks pass rates paired per prompt: the candidate may not be lower by more than 5 points (one-sided)."""
    from tests.fakes.ab_inputs import with_check_failures

    # 200 prompts, 100 of them checked: with 30 checked, even 0 of 30 discordant cannot rule out 5 points
    inputs = with_check_failures(make_inputs(n_prompts=200, repeats=1, levels=C1), "ngram-k4", fails)
    corr = build_report(inputs, FAST).candidates[0].correctness
    assert corr is not None and corr.non_inferiority == answer, corr
    assert corr.non_inferiority_margin == 0.05 and corr.pass_rate_difference.n == 100
    if answer == "worse":
        assert corr.verdict.kind is WarningKind.CORRECTNESS_WORSE and corr.verdict.fields["margin"] == 0.05
