"""`speculab predict`'s page (OUT/report.html beside prediction.json): per candidate the predicted speedup against
load for each k with its band and crossover, the best k per load band and its flags in the engine's words, the
acceptance it used and the cost fit with each probe's residual, and what the probes cost; links to the probes' own
reports (OUT/probes/acceptance, OUT/probes/cost)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup

from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.model import Prediction
from speculab.report.console.predict import crossover_text, width_phrase
from speculab.report.html import plots
from speculab.report.html.page import TEMPLATES
from speculab.report.phrases import positions_phrase, warning_text

PREDICTION_PAGE = "report.html"


def _candidate(c: Any, low: float, high: float) -> dict[str, Any]:
    curves = {
        p.k: (
            [pt.load for pt in p.curve],
            [pt.speedup.estimate for pt in p.curve],
            [pt.speedup.low for pt in p.curve],
            [pt.speedup.high for pt in p.curve],
        )
        for p in c.per_k
    }
    crossings = {p.k: p.crossover.estimate for p in c.per_k}
    probes = [
        {
            "k": pr.k,
            "batch": f"{pr.batch:.1f}",
            "step_ms": f"{pr.step_s * 1e3:.2f}",
            "per_step": f"{pr.tokens_per_step:.2f}",
            "forced": "forced" if pr.forced else "measured",
            "residual_ms": f"{res * 1e3:+.2f}",
        }
        for pr, res in zip(c.fit.probes, c.fit.residuals, strict=True)
    ]
    return {
        "label": c.label,
        "plot": Markup(plots.predicted_speedup(curves, crossings, xlabel="concurrency")),
        "rows": [
            {"k": p.k, "per_step": f"{p.tokens_per_step:.2f}", "crossover": crossover_text(p.crossover, low, high)}
            for p in c.per_k
        ],
        "bands": [
            {"low": f"{b.low:.3g}", "high": f"{b.high:.3g}", "k": f"k={b.k}" if b.k else "plain decoding"}
            for b in c.schedule
        ],
        "flags": " ".join(c.engine_form.flags) if c.engine_form is not None and c.engine_form.flags else "",
        "form": c.engine_form.form if c.engine_form is not None else "",
        "chain": c.chain,
        "measured_k": c.measured_k,
        "acceptance": positions_phrase(c.acceptance),
        "width": width_phrase(c.width_check) if c.width_check is not None else "",  # `--check-k`
        "coefficients": [
            {
                "name": x.name,
                "estimate": f"{x.estimate * 1e3:.3f}",
                "low": f"{x.low * 1e3:.3f}",
                "high": f"{x.high * 1e3:.3f}",
            }
            for x in c.fit.coefficients
            if x.name in c.fit.terms
        ],
        "probes": probes,
        "dof": c.fit.dof,
    }


def prediction_view(pred: Prediction) -> dict[str, Any]:
    share = pred.requests_sent / pred.sweep_requests if pred.sweep_requests else float("nan")
    return {
        "low": f"{pred.low:g}",
        "high": f"{pred.high:g}",
        "candidates": [_candidate(c, pred.low, pred.high) for c in pred.candidates],
        "skipped": [warning_text(w) for w in (*pred.warnings, *pred.skipped)],  # each a warning line
        "requests": f"{pred.requests_sent:,}",
        "sweep": f"{pred.sweep_requests:,}",
        "share": f"{share:.0%}",
        "wall": f"{pred.probe_wall_s:.0f} s" if pred.probe_wall_s is not None else "not recorded",
        "output_tokens": pred.output_tokens,
        # the engine refused forced acceptance: the cost the prediction stands on was probed again, unforced
        "cost_dir": "cost-unforced"
        if any(w.kind is WarningKind.PREDICT_FORCING_REFUSED for w in pred.warnings)
        else "cost",
    }


def write_prediction_html(out_dir: Path, pred: Prediction) -> Path:
    path = out_dir / PREDICTION_PAGE
    write_atomic(path, TEMPLATES.get_template("prediction.html.j2").render(v=prediction_view(pred)))
    return path
