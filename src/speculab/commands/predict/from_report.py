"""From a probe run's report to the prediction (docs/predict.md): each candidate's acceptance per position at the
lowest load, the step time of every arm at every probe load, the cost model fitted on the baseline's and the
candidate's probes, and the predicted speedup for every k up to the candidate's K across the load range
(`harness.search.predict`).

A step time is the arm's mean TPOT at the load times the tokens one of its steps yields: 1 for plain decoding, the
acceptance length its counters measured at that load for a candidate (the mean tokens per verification step), so
the cost is measured under the acceptance the content gave there. The batch is the requests in flight while each
request decoded, the mean over requests (`search.predict.experienced_batch`), not the asked concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from speculab.commands.predict.probes import check_name
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.search.predict import (
    CHAIN_METHODS,
    CandidatePrediction,
    Prediction,
    StepProbe,
    experienced_batch,
    fit_step_cost,
    k_schedule,
    load_grid,
    predict,
    width_check,
)
from speculab.harness.verdict.model import TPOT, ArmLevel, LevelReport, Report


def decode_batch(runs: Sequence[RepeatRun]) -> float | None:
    """The batch the arm's requests decoded in at a load (`experienced_batch` over its repeats' measured requests)."""
    values = []
    for run in runs:
        spans = [(r.sent_s, r.end_s) for r in run.records]
        decoding = [(r.chunks[0].t_s, r.end_s) for r in run.records if r.ok and not r.warmup and r.chunks]
        b = experienced_batch(decoding, spans)
        if b is not None:
            values.append(b)
    return float(np.mean(values)) if values else None


def step_probe(a: ArmLevel, k: int, batch: float | None) -> StepProbe | None:
    """One arm at one load as a cost probe; None where its TPOT, its batch or (for a candidate) its tokens per step is
    unknown."""
    # the mean, not the median: a request's TPOT is step x its steps / (n - 1), and its steps vary with its draws
    # (right-skewed), so the mean TPOT x the mean tokens per step is the step time, where the median would be low
    tpot = a.distributions[TPOT.name].mean if TPOT.name in a.distributions else math.nan
    if not math.isfinite(tpot) or tpot <= 0:
        return None
    if k == 0:
        per_step = 1.0
    else:
        length = a.acceptance.acceptance_length if a.acceptance is not None and a.acceptance.active else None
        if length is None or not math.isfinite(length):
            return None
        per_step = float(length)
    if batch is None or not batch > 0:
        return None
    return StepProbe(k, float(batch), tpot * per_step, per_step, False, a.ok)


def predict_from_report(
    parts: Sequence[tuple[Report, ABRun]],
    low: float,
    high: float,
    rng: np.random.Generator,
    *,
    requests_sent: int,
    sweep_requests: int,
    probe_wall_s: float | None = None,
) -> Prediction:
    """Every candidate of the probe runs (`parts`: each run's report and inputs; the first holds the lowest load,
    where acceptance is read), predicted over `low`..`high`; a candidate without positions at the lowest load, or
    with fewer than two usable probes, is skipped with its reason."""
    found = [(lv, inputs) for report, inputs in parts for lv in report.levels]
    found.sort(key=lambda x: x[0].value)
    first = parts[0][0]
    arms = {a.name: a for a in first.arms}

    def probe(name: str, lv: LevelReport, inputs: ABRun, k: int) -> StepProbe | None:
        a = lv.arm(name)
        if a is None:
            return None
        p = step_probe(a, k, decode_batch(inputs.runs_for(name, lv.key)))
        forced = a.acceptance is not None and a.acceptance.forced
        return replace(p, forced=forced) if p is not None else None

    base_probes = [p for lv, inputs in found if (p := probe("baseline", lv, inputs, 0))]
    out, skipped, noted = [], [], []  # noted: what the predictions made are to be read with
    loads = load_grid(low, high)
    lowest_level = found[0][0] if found else None
    # the workload's typical output length (the baseline's median at the lowest load): a step cut at the end of a
    # short answer yields fewer tokens, and the TPOT the verdict compares carries that
    base_low = lowest_level.arm("baseline") if lowest_level is not None else None
    lengths = base_low.distributions.get("output_tokens") if base_low is not None else None
    output_tokens = round(lengths.p50) if lengths is not None and math.isfinite(lengths.p50) else None
    for c in first.candidates:
        view = arms.get(c.name)
        k = view.num_speculative_tokens if view is not None else None
        lowest = lowest_level.arm(c.name) if lowest_level is not None else None
        acc = lowest.acceptance_positions if lowest is not None else None
        if acc is None or not k:
            skipped.append(ReportWarning(WarningKind.PREDICT_NO_POSITIONS, c.label, fields={"k": k}))
            continue
        cand = [p for lv, inputs in found if (p := probe(c.name, lv, inputs, acc.k_measured))]
        probes = base_probes + cand
        if len(cand) < 2 or len(base_probes) < 2:
            fields = {"baseline": len(base_probes), "candidate": len(cand)}
            skipped.append(ReportWarning(WarningKind.PREDICT_FEW_PROBES, c.label, fields=fields))
            continue
        fit = fit_step_cost(probes)
        chain = (view.method or "") in CHAIN_METHODS if view is not None else False
        ks = range(1, acc.k_measured + 1) if chain else [acc.k_measured]
        per_k = predict(acc, fit, loads, ks, rng, output_tokens=output_tokens)
        # `--check-k`: the candidate at its second k, held out of the fit and held against it
        k2 = (k + 1) // 2 if k >= 2 else None
        held = [p for lv, inputs in found if (p := probe(check_name(c.name, k2), lv, inputs, k2))] if k2 else []
        checked = width_check(fit, held)
        if checked is not None and checked.linear is False:
            worst = max(checked.probes, key=lambda p: abs(p.residual_s))
            fields = {"k": checked.k, "batch": worst.batch, "measured_s": worst.measured_s,
                      "predicted_s": worst.predicted_s, "low_s": worst.low_s, "high_s": worst.high_s}  # fmt: skip
            noted.append(ReportWarning(WarningKind.PREDICT_COST_NOT_LINEAR_IN_K, c.label, fields=fields))
        out.append(
            CandidatePrediction(
                c.name, c.label, view.method if view else None, acc.k_measured, chain, acc, fit, per_k,
                k_schedule(per_k), width_check=checked,
            )
        )  # fmt: skip
    return Prediction(
        low, high, tuple(out), tuple(skipped), requests_sent, sweep_requests, probe_wall_s, output_tokens, tuple(noted)
    )
