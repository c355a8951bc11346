"""Across loads: the crossover load, the what-if for other draft lengths, and the capacity plan."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from speculab.config import SloTargets
from speculab.harness.analysis import cost as costlib
from speculab.harness.analysis import whatif as whatiflib
from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN
from speculab.harness.analysis.comparison.paired import grouped_ratios, paired_ratios
from speculab.harness.analysis.crossover import LoadSpeedup, crossover
from speculab.harness.analysis.figures import HEADLINE, TPOT, compared_metric
from speculab.harness.analysis.groups import MIN_PAIRS, group_size
from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.design import ArmInfo, LevelSpec
from speculab.harness.results.ab_run import ABRun
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.search.fit import FASTER_THROUGHOUT, SLOWER_THROUGHOUT, UNDETERMINED, Probe, fit_crossover
from speculab.harness.search.goodput import fit_slo_capacity, unit_attainment
from speculab.harness.search.predict import band_at
from speculab.harness.stats import CONFIDENCE, Interval
from speculab.harness.verdict.arm_level import arm_price, slo_targets
from speculab.harness.verdict.choices import ParetoPoint
from speculab.harness.verdict.comparison import arm_values, judge, level_group_size, prompt_groups
from speculab.harness.verdict.model import (
    AcceptanceView,
    ArmView,
    CandidateReport,
    CrossoverView,
    KChoice,
    KMeasured,
    KRow,
    LevelReport,
    PlanSide,
    PlanView,
    Ratio,
    ReportOptions,
    SearchCrossover,
    SearchPoint,
    SearchView,
    SloCapacity,
    WhatIfView,
)

# ---------------------------------------------------------------------------------------------------------------
# Across loads: crossover, what-if, capacity, the Pareto points.
# ---------------------------------------------------------------------------------------------------------------


def _axis_levels(inputs: ABRun) -> tuple[str, list[LevelSpec]]:
    """The loads of one axis for curves: the sweep's axis if there is a sweep, else the operating point's."""
    levels = list(inputs.setup.levels)
    sweep = [lv for lv in levels if "sweep" in lv.roles]
    op = next((lv for lv in levels if "operating" in lv.roles), levels[0] if levels else None)
    axis = sweep[0].kind if sweep else (op.kind if op else "concurrency")
    same = sorted({lv.value: lv for lv in levels if lv.kind == axis}.values(), key=lambda lv: lv.value)
    return axis, same


def crossover_view(
    cand: ArmInfo, levels: Sequence[LevelReport], inputs: ABRun, opts: ReportOptions
) -> CrossoverView | None:
    axis, axis_levels = _axis_levels(inputs)
    keys = {lv.key for lv in axis_levels}
    points: list[LoadSpeedup] = []
    sizes: dict[float, int] = {}
    excluded: list[ReportWarning] = []
    for lv in levels:
        if lv.key not in keys:
            continue
        comp = lv.comparison(cand.name)
        if comp is None or comp.gate != "ok":
            if comp is not None and comp.gate != "missing" and comp.gate_reason is not None:
                excluded.append(replace(comp.gate_reason, load=lv.label))
            continue
        tp = comp.metric(HEADLINE.name)
        if tp is None or (tp.n_units or tp.n_pairs) < MIN_PAIRS:
            excluded.append(ReportWarning(WarningKind.TOO_FEW_PAIRS, load=lv.label))
            continue
        points.append(LoadSpeedup(lv.value, tp.speedup, tp.speedup_low, tp.speedup_high, ()))
        sizes[lv.value] = tp.group_size
    if len(points) < 2:
        return None
    # Replicates are not kept in the Report (thousands of numbers), so recompute them here for the interval, over
    # the same units as the level's verdict.
    points = _with_replicates(points, cand, axis, inputs, opts, sizes)
    c = crossover(points, log_load=axis in ("concurrency", "trace"))
    return CrossoverView(
        axis,
        tuple(p.load for p in points),
        tuple(p.speedup for p in points),
        tuple(p.low for p in points),
        tuple(p.high for p in points),
        c.status.value,
        c.load,
        c.low,
        c.high,
        c.low_censored,
        c.high_censored,
        c.method,
        c.scale,
        tuple(excluded),
    )


def _with_replicates(
    points: list[LoadSpeedup],
    cand: ArmInfo,
    axis: str,
    inputs: ABRun,
    opts: ReportOptions,
    sizes: dict[float, int],
) -> list[LoadSpeedup]:
    """Bootstrap replicates of the TPOT speedup at each load (same seed scheme as the report: reproducible)."""
    out = []
    by_value = {lv.value: lv for lv in inputs.setup.levels if lv.kind == axis}
    for p in points:
        lv = by_value[p.load]
        rng = np.random.default_rng([opts.seed, 7, int(p.load * 1000)])
        cand_tpot, base_tpot, _ = arm_values(
            inputs.setup, inputs.runs_for(cand.name, lv.key), inputs.runs_for("baseline", lv.key), HEADLINE.name
        )
        c = judge(inputs, HEADLINE.name, cand_tpot, base_tpot, rng, opts, sizes.get(p.load, 1), DEFAULT_MARGIN)
        out.append(LoadSpeedup.from_comparison(p.load, c))
    return out


def _profile(acc: AcceptanceView, k: int | None) -> whatiflib.AcceptanceProfile | None:
    if acc.per_position:
        return whatiflib.profile_from_per_position(list(acc.per_position))
    if acc.drafts and acc.accepted_tokens is not None and k:
        return whatiflib.profile_from_totals(acc.drafts, acc.accepted_tokens, k)
    if acc.acceptance_length is not None and k and 1.0 <= acc.acceptance_length <= k + 1:
        return whatiflib.profile_from_totals(1.0, acc.acceptance_length - 1.0, k)
    return None


def what_if_views(
    cand: ArmInfo, levels: Sequence[LevelReport], warnings: list[ReportWarning]
) -> tuple[WhatIfView, ...]:
    """At the low load and at the operating point: predicted speedup for k = 1..8 from measured acceptance."""
    out = []
    seen = set()
    for role in ("low", "operating"):
        lv = next((x for x in levels if role in x.roles), None)
        if lv is None or lv.key in seen:
            continue
        seen.add(lv.key)
        a, comp = lv.arm(cand.name), lv.comparison(cand.name)
        if a is None or a.acceptance is None or not a.acceptance.active or comp is None or comp.gate != "ok":
            continue
        tp = comp.metric(HEADLINE.name)
        if tp is None or not math.isfinite(tp.speedup):
            continue
        try:
            prof = _profile(a.acceptance, cand.num_speculative_tokens)
            if prof is None:
                continue
            w = whatiflib.what_if_from_observation(prof, tp.speedup)
        except ValueError as e:
            warnings.append(ReportWarning(WarningKind.WHAT_IF_SKIPPED, cand.label, lv.label, {"error": str(e)}))
            continue
        out.append(
            WhatIfView(
                lv.key,
                lv.label,
                prof.per_position,
                prof.alpha,
                prof.source,
                w.step_cost,
                w.step_cost_source,
                tuple(KRow(p.k, p.expected_tokens, p.speedup, p.model) for p in w.predictions),
                w.recommended_k,
                w.observed_k,
                w.observed_speedup,
                w.notes,
            )
        )
    return tuple(out)


def capacity_view(
    cand: ArmInfo,
    base: ArmInfo,
    levels: Sequence[LevelReport],
    inputs: ABRun,
    ends: tuple[str, str] = ("estimate", "estimate"),
    chosen: Mapping[float, str] | None = None,
) -> PlanView | None:
    """The capacity plan at the target rate. `ends` picks which end of each arm's (baseline, candidate) requests/s
    interval over repeats feeds it ("estimate", "low", "high"; closed-loop loads only): the recommendation's cost
    interval is the plan at (high, low) and (low, high). None where an end is not finite (one repeat).

    `chosen` (load -> arm name): a load-dependent deployment, the candidate's server running as the arm chosen at
    each load (plain above an off-above edge measures as the baseline there), priced as the candidate."""
    slo, target = slo_targets(inputs), inputs.setup.target_rate_rps
    bp, cp = arm_price(base), arm_price(cand)
    if slo is None or target is None or bp is None or cp is None:
        return None
    axis = "rate" if any(lv.kind == "rate" for lv in levels) else "concurrency"

    def results(arm: str, end: str, by_load: Mapping[float, str] | None = None) -> list[costlib.LoadResult] | None:
        out = []
        for lv in levels:
            a = lv.arm(by_load.get(lv.value, arm) if by_load else arm)
            if lv.kind != axis or a is None or a.repeats == 0 or a.slo_attainment is None:
                continue
            rate = a.achieved_rate_rps if axis == "rate" else getattr(a.requests_per_s, end)
            if rate is None or not math.isfinite(rate):
                if end != "estimate":
                    return None  # an interval end that does not exist: no plan at that end
                continue
            out.append(costlib.LoadResult(lv.value, rate, a.slo_attainment))
        return out

    rb, rc = results(base.name, ends[0]), results(cand.name, ends[1], chosen)
    if rb is None or rc is None:
        return None
    p = costlib.compare_plans(target, rb, rc, slo, bp, cp)

    def side(c: costlib.CapacityPlan) -> PlanSide:
        return PlanSide(c.goodput_rps_per_replica, c.replicas, c.gpus, c.usd_per_month)

    return PlanView(target, axis, side(p.baseline), side(p.candidate), p.monthly_difference_usd, p.gpu_difference)


def _draft_model(arm: ArmInfo) -> str:
    """The draft model a candidate's command names in its speculative-config JSON ("" if none or unknown): k values
    of one method compare only with the same draft."""
    for a in arm.command or ():
        if a.startswith("{") and '"method"' in a:
            try:
                return str(json.loads(a).get("model") or "")
            except ValueError:
                return ""
    return ""


def k_choices(inputs: ABRun, levels: Sequence[LevelReport], cands: Sequence[CandidateReport]) -> tuple[KChoice, ...]:
    """For each method that ran at two or more k (same draft model): at each load where the what-if ran, its
    predicted best k (from the largest measured k's acceptance profile, which covers the most draft positions) next
    to every measured k's speedup and the prediction for it."""
    by_method: dict[tuple[str, str], list[ArmInfo]] = {}
    for c in inputs.candidates:
        if c.method and c.num_speculative_tokens:
            by_method.setdefault((c.method, _draft_model(c)), []).append(c)
    out = []
    reports = {c.name: c for c in cands}
    for (method, _), group in by_method.items():
        if len({c.num_speculative_tokens for c in group}) < 2:
            continue
        src = max(group, key=lambda c: c.num_speculative_tokens or 0)
        for w in reports[src.name].what_if:
            lv = next(x for x in levels if x.key == w.level)
            predicted = {r.k: r.speedup for r in w.rows}
            measured = []
            for c in sorted(group, key=lambda c: c.num_speculative_tokens or 0):
                r = next((x for x in lv.ranking if x.candidate == c.name), None)
                if r is None or r.gate != "ok":
                    continue
                k = c.num_speculative_tokens or 0
                measured.append(KMeasured(k, c.name, r.speedup, r.speedup_low, r.speedup_high, predicted.get(k)))
            verdicts = {x.candidate: x.decision for x in lv.ranking}
            faster = [m for m in measured if verdicts.get(m.candidate) == "faster"]
            best = max(faster, key=lambda m: m.speedup).k if faster else None
            out.append(
                KChoice(
                    method,
                    lv.key,
                    lv.label,
                    src.name,
                    w.recommended_k,
                    predicted.get(w.recommended_k, math.nan),
                    tuple(measured),
                    best,
                )
            )
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------
# A search (`loads: {search: ...}`): the followed candidate's effect at each probe, and the crossover's fit.
# ---------------------------------------------------------------------------------------------------------------

SEARCH_ROLE = "search"


def search_view(inputs: ABRun, levels: Sequence[LevelReport], opts: ReportOptions) -> SearchView | None:
    """The search's answer from what its probes measured (None without a search): each probe's per-unit effects on
    the deciding metric, the monotone fit of `harness.search.fit` and its crossover interval. The run asks the same
    after every round to place the next (commands.run.probing)."""
    design = inputs.setup.search
    if design is None:
        return None
    metric = str(design.get("metric") or HEADLINE.name)
    # in the order measured; a round's level that an interruption cut short (or left unrun) is no probe
    ran = {r.level for r in inputs.runs if not r.interrupted and any(not x.warmup for x in r.records)}
    probes = [lv for lv in inputs.setup.levels if SEARCH_ROLE in lv.roles and lv.key in ran]
    reports = {lv.key: lv for lv in levels}
    cand = design.get("candidate") or followed_candidate(design, probes, reports, metric)
    measured = [(lv, _probe_effects(inputs, lv, reports.get(lv.key), cand, metric) if cand else None) for lv in probes]
    rng = np.random.default_rng([opts.seed, 39])
    fit = fit_crossover(
        [Probe(lv.value, got[0]) for lv, got in measured if got is not None],
        rng,
        confidence=opts.confidence or CONFIDENCE,
        log_load=design["kind"] == "concurrency",
    )
    fitted = {p[0]: p[2] for p in fit.points}
    return SearchView(
        kind=design["kind"],
        metric=metric,
        candidate=cand,
        crossover=SearchCrossover(fit.estimate, fit.low, fit.high),
        probes=tuple(lv.value for lv in probes),
        status=_status(fit.status, [lv.value for lv, got in measured if got is not None and got[0]], design),
        confidence=fit.confidence,
        method=fit.method,
        range_low=float(design["low"]),
        range_high=float(design["high"]),
        tolerance=float(design["tolerance"]),
        max_probes=int(design["max_probes"]),
        points=tuple(
            _search_point(lv, got, fitted.get(lv.value))
            for lv, got in sorted(measured, key=lambda m: (m[0].value, m[0].attempt))
        ),
        rounds=tuple(tuple(float(x) for x in r) for r in design.get("rounds", ())),
        stop=design.get("stop"),
        goodput=slo_capacity_view(inputs, levels, opts, {lv.key for lv in probes}),
    )


def _status(status: str, with_verdict: Sequence[float], design: Mapping[str, Any]) -> str:
    """The fit's status, but "never crosses between low and high" only with evidence at the end it speaks for: a
    probe at `high` (faster throughout) or `low` (slower throughout) with a verdict. A gated end (errors, load not
    reached) leaves the range past the last verdict unmeasured: undetermined."""
    end = {FASTER_THROUGHOUT: float(design["high"]), SLOWER_THROUGHOUT: float(design["low"])}.get(status)
    if end is not None and end not in {float(x) for x in with_verdict}:
        return UNDETERMINED
    return status


def followed_candidate(
    design: Mapping[str, object], probes: Sequence[LevelSpec], reports: Mapping[str, LevelReport], metric: str
) -> str | None:
    """The candidate a search follows: the one with the largest effect on the deciding metric at the lowest load of
    its first round (where speculation pays most); with one candidate, that one. None before that load has a
    verdict."""
    rounds = design.get("rounds") or []
    first = {float(x) for x in rounds[0]} if rounds else set()  # type: ignore[index]
    lowest = min((lv for lv in probes if lv.value in first), key=lambda lv: lv.value, default=None)
    report = reports.get(lowest.key) if lowest is not None else None
    if report is None:
        return None
    ranked = [
        (r.speedup, c.candidate)
        for c in report.comparisons
        if c.gate == "ok" and (r := c.metric(metric)) is not None and math.isfinite(r.speedup)
    ]
    return max(ranked)[1] if ranked else None


def _probe_effects(
    inputs: ABRun, lv: LevelSpec, report: LevelReport | None, cand: str, metric: str
) -> tuple[tuple[float, ...], Ratio] | None:
    """One probe's effects, one per pairing unit as the level's verdict counts them (groups sent together):
    log(baseline / candidate) for a lower-is-better metric; None where the level has no verdict (gated, missing)."""
    comp = report.comparison(cand) if report is not None else None
    ratio = comp.metric(metric) if comp is not None and comp.gate == "ok" else None
    if ratio is None or report is None:
        return None
    size = level_group_size(lv, report.arm("baseline"), report.arm(cand))
    cand_v, base_v, _ = arm_values(
        inputs.setup, inputs.runs_for(cand, lv.key), inputs.runs_for("baseline", lv.key), metric
    )
    pairs = paired_ratios(cand_v, base_v)
    groups = prompt_groups(inputs, size)
    units = grouped_ratios(pairs, groups) if groups is not None else pairs
    sign = -1.0 if compared_metric(metric).lower_is_better else 1.0
    return tuple(float(sign * x) for x in units.log_ratios()), ratio


def _search_point(lv: LevelSpec, got: tuple[tuple[float, ...], Ratio] | None, fitted: float | None) -> SearchPoint:
    """A probe as the view shows it; a probe without a verdict (gated, missing) keeps its place with no effect."""
    if got is None:
        return SearchPoint(lv.value, lv.key, math.nan, math.nan, math.nan, None)
    effects, r = got

    def log(x: float) -> float:
        return math.log(x) if math.isfinite(x) and x > 0 else math.nan

    return SearchPoint(lv.value, lv.key, log(r.speedup), log(r.speedup_low), log(r.speedup_high), fitted, effects)


# ---------------------------------------------------------------------------------------------------------------
# With SLOs set: each arm's highest load within its SLO (goodput's edge), from the loads measured.
# ---------------------------------------------------------------------------------------------------------------


def slo_capacity_view(
    inputs: ABRun, levels: Sequence[LevelReport], opts: ReportOptions, keys: set[str] | None = None
) -> dict[str, SloCapacity] | None:
    """Per arm, the highest load of the axis (a sweep's levels, a search's probes; `keys`: only these levels) at
    which it meets its SLO attainment target, with its interval (harness.search.goodput); None without SLOs."""
    slo = slo_targets(inputs)
    if slo is None:
        return None
    axis, _ = _axis_levels(inputs)
    specs = [lv for lv in inputs.setup.levels if lv.kind == axis and (keys is None or lv.key in keys)]
    reports = {lv.key: lv for lv in levels}
    limits = {k: v for k, v in slo.limits.items() if v is not None}
    out = {}
    for i, arm in enumerate(inputs.arms):
        units = ((lv.value, _slo_units(inputs, lv, reports.get(lv.key), arm.name, slo)) for lv in specs)
        probes = [Probe(load, u) for load, u in units if u]
        fit = fit_slo_capacity(
            probes,
            slo.attainment,
            np.random.default_rng([opts.seed, 39, 1, i]),
            confidence=opts.confidence or CONFIDENCE,
            log_load=axis in ("concurrency", "trace"),
        )
        out[arm.name] = SloCapacity(
            fit.status, fit.estimate, fit.low, fit.high, slo.attainment, limits, axis,
            fit.lowest, fit.highest, fit.confidence, fit.method,
        )  # fmt: skip
    return out


def _slo_units(
    inputs: ABRun, lv: LevelSpec, report: LevelReport | None, arm: str, slo: SloTargets
) -> tuple[float, ...]:
    """Each pairing unit's fraction of `arm`'s requests at one load within the SLO (a failed request is not): the
    verdict's units, groups of prompts sent together (every arm's in-flight count sizes them, so the groups are the
    same in each arm); a repeat cut short is left out, as by the search (its unrecorded requests were the slow ones)."""
    arms = report.arms if report is not None else ()
    groups = prompt_groups(inputs, group_size(lv.kind, lv.value, (a.achieved_concurrency for a in arms)))
    outcomes = []
    for run in inputs.runs_for(arm, lv.key):
        if run.interrupted:
            continue
        for r in run.records:
            if r.warmup:
                continue
            m = request_metrics(r)
            met = m.ok and costlib.request_meets_slo(m.ttft_s, m.tpot_s, m.e2e_s, slo)
            outcomes.append(((groups or {}).get(r.index, -1 - r.index), met))
    return unit_attainment(outcomes)


def pareto_points(levels: Sequence[LevelReport], chosen: Mapping[str, str], arms: Mapping[str, ArmView]
                  ) -> tuple[ParetoPoint, ...]:  # fmt: skip
    """Every arm at every load: per-user tokens/s (1 / median TPOT) against output tokens/s per GPU, the frontier
    marked, and the point the recommendation ships at each load. Reads the arms' own distributions and throughput
    intervals; nothing new is estimated."""
    raw = []
    for lv in levels:
        for a in lv.arms:
            view = arms.get(a.arm)
            gpus = max(1, view.gpus if view is not None else 1)
            tpot = a.distributions.get(TPOT.name)
            per_user = 1.0 / tpot.p50 if tpot is not None and tpot.n and tpot.p50 > 0 else math.nan
            iv = a.output_tok_s
            raw.append((lv, a.arm, view.label if view else a.arm, per_user, iv, gpus))
    finite = [(u, iv.estimate / g) for _, _, _, u, iv, g in raw if math.isfinite(u) and math.isfinite(iv.estimate)]

    def dominated(u: float, y: float) -> bool:
        return any(u2 >= u and y2 >= y and (u2 > u or y2 > y) for u2, y2 in finite)

    out = []
    for lv, arm, label, u, iv, g in raw:
        y = iv.estimate / g
        ok = math.isfinite(u) and math.isfinite(y)
        out.append(ParetoPoint(arm, label, lv.key, lv.label, lv.value, u, y, iv.low / g, iv.high / g, g,
                               on_frontier=ok and not dominated(u, y),
                               recommended=chosen.get(lv.key) == arm))  # fmt: skip
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------
# A run started from a prediction (`run --prediction`, docs/predict.md): the band beside each verdict, and where a
# measurement fell outside it, what likely broke.
# ---------------------------------------------------------------------------------------------------------------

ACCEPTANCE_MOVED = 0.10  # a tokens-per-step change from the prediction's beyond this share: acceptance moved
BATCH_BELOW = 0.8  # requests in flight below this share of the concurrency asked: the decode batch was smaller


def predicted_band(inputs: ABRun, candidate: str, lv: LevelSpec) -> Interval | None:
    """The predicted TPOT speedup of `candidate` at a concurrency level (None: no prediction for it, or a load
    outside the predicted range, or not a concurrency)."""
    rows = (inputs.setup.predicted or {}).get("candidates") or {}
    row = rows.get(candidate)
    if row is None or lv.kind != "concurrency":
        return None
    band = band_at([tuple(p) for p in row["curve"]], lv.value)
    return None if band is None else Interval(band.estimate, band.low, band.high, CONFIDENCE, "predicted", 0)


def prediction_checks(inputs: ABRun, levels: Sequence[LevelReport]) -> list[ReportWarning]:
    """Each comparison whose measured TPOT speedup interval lies wholly outside its predicted band, with what likely
    broke: acceptance at this load unlike the low load's (adaptive proposers, content that changes with load), fewer
    requests in flight than asked (prefill steps, a client behind: the decode batch was smaller), and always the cost
    model itself (its residuals are in prediction.json)."""
    rows = (inputs.setup.predicted or {}).get("candidates") or {}
    labels = {a.name: a.label for a in inputs.arms}
    out = []
    for lv in levels:
        for comp in lv.comparisons:
            r = comp.metric(TPOT.name)
            band = comp.predicted
            if band is None or r is None or not (math.isfinite(r.speedup_low) and math.isfinite(r.speedup_high)):
                continue
            if r.speedup_low <= band.high and band.low <= r.speedup_high:
                continue
            causes = []
            arm = lv.arm(comp.candidate)
            said = rows.get(comp.candidate, {}).get("tokens_per_step")
            acc = arm.acceptance if arm is not None else None
            length = acc.acceptance_length if acc is not None and acc.active else None
            if said and length is not None and abs(length / said - 1) > ACCEPTANCE_MOVED:
                causes.append({"cause": "acceptance_at_load", "predicted": said, "measured": length})
            batch = arm.achieved_concurrency if arm is not None else None
            if batch is not None and batch < BATCH_BELOW * lv.value:
                causes.append({"cause": "batch_below_concurrency", "in_flight": batch, "asked": lv.value})
            causes.append({"cause": "cost_model"})
            fields = {
                "predicted": [band.estimate, band.low, band.high],
                "measured": [r.speedup, r.speedup_low, r.speedup_high],
                "causes": causes,
            }
            out.append(
                ReportWarning(
                    WarningKind.PREDICTION_MISSED, labels.get(comp.candidate, comp.candidate), lv.label, fields
                )
            )
    return out
