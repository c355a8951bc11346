"""`speculab predict`'s page: each candidate's curves for every k, the crossovers, the best k per band with the
engine's flags, the acceptance and the cost fit with each probe's residual, what the probes cost, links to them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from speculab.harness.analysis.acceptance import positions_from_counts
from speculab.harness.search.predict import (
    CandidatePrediction,
    EngineForm,
    Prediction,
    StepProbe,
    fit_step_cost,
    k_schedule,
    load_grid,
    predict,
)
from speculab.report.html.prediction import write_prediction_html


def prediction() -> Prediction:
    acc = positions_from_counts(1000.0, [850.0, 600.0, 380.0, 200.0], "counters")
    probes = [StepProbe(k, b, 0.008 + 0.001 * b + (0.0005 + 0.0006 * b) * k, 1.0, k > 0 and b > 1, 48)
              for b in (1, 6, 32) for k in (0, 4)]  # fmt: skip
    probes[-1] = StepProbe(4, 32, probes[-1].step_s * 1.02, 2.9, True, 48)  # a residual to show
    fit = fit_step_cost(probes)
    per_k = predict(acc, fit, load_grid(1, 64), range(1, 5), np.random.default_rng(0), draws=200)
    form = EngineForm("batch-size schedule", ("--speculative-config", '{"method":"ngram","<k>":4}'))
    cand = CandidatePrediction("ngram-k4", "ngram <k=4>", "ngram", 4, True, acc, fit, per_k, k_schedule(per_k), form)
    return Prediction(1, 64, (cand,), (), 288, 2880, 41.0, 33)


def test_the_page_shows_every_k_its_crossover_the_bands_the_flags_and_the_fit(tmp_path: Path):
    page = write_prediction_html(tmp_path, prediction()).read_text(encoding="utf-8")
    assert "Predicted speedup over concurrency 1–64" in page and page.count("<svg") == 1
    assert all(f"<tr><td>{k}</td>" in page for k in (1, 2, 3, 4)) and "crosses at" in page
    assert "Best k by load:" in page and "batch-size schedule" in page
    assert "&lt;k&gt;" in page and "ngram &lt;k=4&gt;" in page  # text escaped, never raw
    assert "288 requests, 41 s" in page and "would send 2,880" in page and "(10%)" in page
    assert 'href="probes/acceptance/report.html"' in page and 'href="probes/cost/report.html"' in page
    assert page.count("forced") >= 2 and "per_draft_per_request_s" in page and "outputs of 33 tokens" in page


def test_the_page_says_the_width_check_and_links_the_unforced_cost_after_a_refusal(tmp_path: Path):
    """`--check-k`'s held-out probes under the fit, and after the engine refused forced acceptance the cost link
    goes to the run the prediction stands on (probes/cost-unforced)."""
    from dataclasses import replace

    from speculab.harness.results.warnings import ReportWarning, WarningKind
    from speculab.harness.search.predict import width_check

    pred = prediction()
    (cand,) = pred.candidates
    held = [StepProbe(2, b, cand.fit.step_s(b, 2) * 1.5, 1.8, True, 48) for b in (6, 32)]  # far above the line
    refused = ReportWarning(WarningKind.PREDICT_FORCING_REFUSED, fields={"error": "Synthetic acceptance not supported"})
    pred = replace(pred, candidates=(replace(cand, width_check=width_check(cand.fit, held)),), warnings=(refused,))
    page = write_prediction_html(tmp_path, pred).read_text(encoding="utf-8")
    assert "cost at k=2, not fitted on:" in page and "NOT linear in k" in page
    assert 'href="probes/cost-unforced/report.html"' in page and 'href="probes/cost/report.html"' not in page
    assert "Synthetic acceptance not supported" in page  # the refusal, worded as a warning
