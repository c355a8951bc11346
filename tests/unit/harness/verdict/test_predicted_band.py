"""A run started from a prediction (`run --prediction`): each comparison carries the band predicted at its load, the
terminal prints it beside the measurement, and a measurement wholly outside the band is a warning naming what likely
broke."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.design import LevelSpec
from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.phrases import warning_text
from speculab.report.recommendation import predicted_lines

LEVELS = (LevelSpec("concurrency", 1, ("low",)), LevelSpec("concurrency", 4, ("operating",)))
FAST = ReportOptions(n_resamples=400)


def report(curve: list[list[float]], tokens_per_step: float = 2.6):
    cand = ArmEffect(tpot_factor={"c1": 1 / 1.8, "c4": 1 / 1.3}, tokens_per_chunk=3, acceptance_length=2.6)
    inputs = make_inputs(n_prompts=36, repeats=2, levels=LEVELS, candidates={"ngram-k4": cand})
    predicted = {"file": "p.json", "candidates": {"ngram-k4": {"k": 4, "tokens_per_step": tokens_per_step,
                                                               "crossover": None, "curve": curve}}}  # fmt: skip
    return build_report(replace(inputs, setup=replace(inputs.setup, predicted=predicted)), FAST)


def test_the_band_is_read_at_each_load_on_log_load_and_a_measurement_inside_it_is_said_so():
    r = report([[1, 1.8, 1.6, 2.0], [16, 1.0, 0.9, 1.1]])
    band = r.level("c1").comparison("ngram-k4").predicted
    assert (band.estimate, band.low, band.high) == pytest.approx((1.8, 1.6, 2.0))
    at4 = r.level("c4").comparison("ngram-k4").predicted
    assert at4.estimate == pytest.approx(1.8 + (1.0 - 1.8) * 0.5)  # log 4 is halfway between log 1 and log 16
    assert "overlaps the band" in "\n".join(predicted_lines(r, r.level("c1")))
    assert not [w for w in r.warnings if w.kind == WarningKind.PREDICTION_MISSED]


def test_a_measurement_outside_the_band_is_a_warning_with_its_likely_causes():
    r = report([[1, 3.5, 3.2, 3.8], [4, 3.0, 2.8, 3.2]], tokens_per_step=3.4)
    missed = [w for w in r.warnings if w.kind == WarningKind.PREDICTION_MISSED]
    assert {w.load for w in missed} == {"concurrency 1", "concurrency 4"}
    causes = [c["cause"] for c in missed[0].fields["causes"]]
    assert causes[0] == "acceptance_at_load" and causes[-1] == "cost_model"  # 2.6 measured against 3.4 predicted
    text = warning_text(missed[0])
    assert "outside the predicted 3.50× [3.20–3.80]" in text and "acceptance moved" in text
    assert "outside the band" in "\n".join(predicted_lines(r, r.level("c1")))


def test_no_prediction_no_band_and_a_load_beyond_the_curve_is_not_extrapolated():
    r = report([[2, 1.8, 1.6, 2.0], [3, 1.5, 1.3, 1.7]])
    assert (
        r.level("c1").comparison("ngram-k4").predicted is None
        and r.level("c4").comparison("ngram-k4").predicted is None
    )
    plain = build_report(make_inputs(n_prompts=12, repeats=1, levels=LEVELS), FAST)
    assert all(c.predicted is None for lv in plain.levels for c in lv.comparisons)
