"""comparisons.csv: every paired comparison of the verdict model as one table to paste or load, one row per load x
candidate x compared metric (and the paired energy ratio where power was sampled), written beside summary.json and
rewritten by `speculab report`. Nothing here decides: each cell is a field of the model (`LevelComparison`,
`Ratio`), numbers at full precision, blank where the model has none."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.verdict.model import METRIC_UNITS, Interval, LevelComparison, Ratio, Report

COMPARISONS_CSV = "comparisons.csv"
COLUMNS = (
    "load", "load_kind", "load_value", "candidate", "candidate_label", "metric", "estimate", "low", "high",
    "confidence", "answer", "margin", "units", "n", "n_units", "counted",
)  # fmt: skip
ENERGY, ENERGY_UNITS = "j_per_output_token", "ratio (candidate J / baseline J per output token)"
NOT_IN_FILE = "not in the file"  # the answer of a metric either arm's result file does not hold


def write_comparisons(out_dir: Path, report: Report) -> Path:
    """Write out_dir/comparisons.csv (the header alone when nothing was compared); its path."""
    path = out_dir / COMPARISONS_CSV
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(COLUMNS)
    w.writerows(comparison_rows(report))
    write_atomic(path, text.getvalue())  # a reader (a spreadsheet, CI) trusts it whole, like summary.json
    return path


def comparison_rows(report: Report) -> list[list[str]]:
    """The table's rows, by load, then candidate, then metric in the verdict's order."""
    labels = {a.name: a.label for a in report.arms}
    confidence = _number(report.options.get("confidence"))
    rows = []
    for lv in report.levels:
        absent = {k for a in lv.arms for k in a.not_in_file}
        for c in lv.comparisons:
            head = [lv.label, lv.kind, _number(lv.value), c.candidate, labels.get(c.candidate, c.candidate)]
            # a comparison a gate left without metrics (runs missing) still has its row per metric: the gate's answer
            for metric in [m.metric for m in c.metrics] or list(METRIC_UNITS):
                r = c.metric(metric)
                shown = r if r is not None and metric not in absent else None
                estimate = [_number(shown.speedup), _number(shown.speedup_low), _number(shown.speedup_high)] if shown \
                    else ["", "", ""]  # fmt: skip
                margin = r.margin if r is not None else report.margin.get(metric)
                unit = METRIC_UNITS.get(metric, "")
                counts = [str(r.n_pairs), str(r.n_units), r.unit] if r is not None else ["", "", ""]
                rows.append([*head, metric, *estimate, confidence, _answer(c, r, metric in absent), _number(margin),
                             f"speedup (baseline {unit} / candidate {unit})", *counts])  # fmt: skip
            if c.energy_ratio is not None:  # power was sampled: the paired energy change, decided against no margin
                rows.append([*head, ENERGY, *_interval(c.energy_ratio), _number(c.energy_ratio.confidence), "", "",
                             ENERGY_UNITS, str(c.energy_ratio.n), str(c.energy_ratio.n), "repeat"])  # fmt: skip
    return rows


def _interval(iv: Interval) -> list[str]:
    return [_number(iv.estimate), _number(iv.low), _number(iv.high)]


def _answer(c: LevelComparison, r: Ratio | None, absent: bool) -> str:
    """The metric's answer against its margin; where a gate closed the load, the gate's answer (no verdict there)."""
    if absent:
        return NOT_IN_FILE
    if c.gate != "ok":
        return c.decision or c.gate
    return (r.decision or r.verdict) if r is not None else ""


def _number(x: float | None) -> str:
    """Full precision for a table to load; blank for a number the model does not have (None, NaN, infinite)."""
    if x is None or not math.isfinite(x):
        return ""
    return repr(float(x))
