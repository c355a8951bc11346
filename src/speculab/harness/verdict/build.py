"""The A/B report: every number computed once, from `ABRun`, by pure functions.

`build_report(inputs)` is the only entry point. Presentation (`speculab.report`: console, HTML, summary.json) reads
a `Report` and formats; it never computes. The parts live in `model` (the dataclasses), `arm_level` (per arm and
load), `comparison` (per load and candidate: paired comparisons and gates), `across_loads` (crossover, what-if,
capacity), `ranking` and `correctness`; this module assembles them. How each number is made (docs/results.md has
the long form):

* per arm and load: the bench metrics (`analysis.metrics`) over the measured requests of every repeat, pooled;
  throughput per repeat with a t-interval over repeats.
* per load and candidate: paired per-prompt ratios of each compared metric (`analysis.figures.COMPARED_METRICS`;
  `analysis.comparison.paired`). With several repeats each prompt's value is the median over its repeats in that arm
  (one pair per prompt, so the bootstrap resamples prompts, the independent unit; at concurrency > 1, groups of
  prompts sent together).
* gates, in this order: runs missing; error rate above the gate; no drafts (-> "speculation not active", never
  "no difference"); offered load not achieved (achieved < 95% of requested, or of the schedule's rate; or the client
  fell behind). A gated load has no verdict.
* crossover over the loads of one axis; what-if from per-position acceptance; cost and capacity from
  `analysis.cost`; correctness (checks, McNemar, output equivalence with divergence classification) in `correctness`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from speculab.config.experiment import DEFAULT_DECIDE_ON, DEFAULT_GUARDRAILS
from speculab.harness import stats
from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES
from speculab.harness.analysis.figures import COMPARED_METRICS, DEFAULT_FLOORS_S, HEADLINE
from speculab.harness.design import ArmInfo
from speculab.harness.results.ab_run import ABRun, not_checked
from speculab.harness.results.warnings import ACCEPTANCE_VALIDITY, ReportWarning, distinct
from speculab.harness.results.warnings import WarningKind as Kind
from speculab.harness.verdict.across_loads import (
    capacity_view,
    crossover_view,
    k_choices,
    predicted_band,
    prediction_checks,
    search_view,
    slo_capacity_view,
    what_if_views,
)
from speculab.harness.verdict.arm_level import arm_level, slo_targets
from speculab.harness.verdict.comparison import compare_level, margin_of
from speculab.harness.verdict.correctness import compare_correctness
from speculab.harness.verdict.model import (
    BASELINE_CHOICE,
    REPORT_SCHEMA,
    UNDECIDED_CHOICE,
    ArmLevel,
    ArmProgress,
    ArmView,
    CandidateReport,
    KChoice,
    LevelReport,
    RecommendationCost,
    RecommendationView,
    Report,
    ReportOptions,
    SetupView,
)
from speculab.harness.verdict.per_request import acceptance_outliers
from speculab.harness.verdict.phases.views import phase_views, speculation_timeline, timeline
from speculab.harness.verdict.phases.windows import phased_inputs, phased_level, with_window_load
from speculab.harness.verdict.ranking import rank_level
from speculab.harness.verdict.recommendation import Criteria, recommend, searched
from speculab.harness.workload import validity

# ---------------------------------------------------------------------------------------------------------------
# build_report
# ---------------------------------------------------------------------------------------------------------------


def _setup_view(inputs: ABRun) -> SetupView:
    s = inputs.setup
    cats: dict[str, int] = defaultdict(int)
    for it in s.items:
        cats[it.category or "uncategorised"] += 1
    return SetupView(
        name=s.name,
        workload_name=s.workload_name,
        workload_source=s.workload_source,
        api=s.api,
        # prompts not known (a vLLM file holds none): the prompts the baseline's first repeat sent
        prompts=len(s.items) or _sent(inputs, "baseline"),
        categories=dict(sorted(cats.items())),
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
        max_tokens=s.max_tokens,
        min_tokens=s.min_tokens,
        ignore_eos=s.ignore_eos,
        repeats=s.repeats,
        levels=tuple(f"{lv.label} ({', '.join(lv.roles)})" if lv.roles else lv.label for lv in s.levels),
        slo_ttft_s=s.slo_ttft_s,
        slo_tpot_s=s.slo_tpot_s,
        slo_e2e_s=s.slo_e2e_s,
        slo_attainment=s.slo_attainment,
        target_rate_rps=s.target_rate_rps,
        two_url_mode=s.two_url_mode,
        paired=s.paired,
        separate_runs=s.separate_runs,
        prompts_candidate=None if s.paired else _sent(inputs, next((a.name for a in inputs.candidates), "")),
        started_utc=s.started_utc,
        finished_utc=s.finished_utc,
        versions={k: str(v) for k, v in s.versions.items()},
    )


def _sent(inputs: ABRun, arm: str) -> int:
    """How many prompts an arm's first repeat sent (its first run at its first load)."""
    run = next((r for r in inputs.runs if r.arm == arm), None)
    return len({r.index for r in run.records if not r.warmup}) if run is not None else 0


def _arm_view(a: ArmInfo) -> ArmView:
    cs = a.cold_start
    return ArmView(
        a.name,
        a.label,
        a.engine,
        a.url,
        a.command,
        a.method,
        a.num_speculative_tokens,
        a.usd_per_hour,
        a.gpus,
        cs.ready_s if cs else None,
        cs.first_token_s if cs else None,
        json.dumps(dict(a.server_info), indent=1, sort_keys=True, default=str) if a.server_info else "",
    )


def _warnings(inputs: ABRun, levels: Sequence[LevelReport], cands: Sequence[CandidateReport]) -> list[ReportWarning]:
    w: list[ReportWarning] = []
    labels = {a.name: a.label for a in inputs.arms}
    if inputs.interrupted:
        w.append(ReportWarning(Kind.INTERRUPTED))
    for c in cands:
        if c.single_change is False:
            w.append(ReportWarning(Kind.NOT_SINGLE_CHANGE, c.label, fields={"diff_lines": list(c.diff_lines)}))
        elif c.single_change is None:
            note = c.change_note.to_dict() if c.change_note is not None else None
            w.append(ReportWarning(Kind.CHANGE_UNVERIFIED, c.label, fields={"note": note}))
    for lv in levels:
        # one warning per reason and load, naming every candidate it withheld: a baseline at fault gates them all
        gated: dict[tuple[Any, ...], tuple[ReportWarning, list[str]]] = {}
        for comp in lv.comparisons:
            if comp.gate not in ("ok", "missing") and comp.gate_reason is not None:
                _, names = gated.setdefault(comp.gate_reason.key(), (comp.gate_reason, []))
                names.append(labels.get(comp.candidate, comp.candidate))
        w.extend(
            ReportWarning(Kind.NO_VERDICT, ", ".join(names), lv.label, {"reason": why.to_dict()})
            for why, names in gated.values()
        )
        for comp in lv.comparisons:
            if comp.prefix_cache is not None and comp.prefix_cache.beyond_noise:
                c = comp.prefix_cache
                w.append(
                    ReportWarning(
                        Kind.PREFIX_CACHE_MOVED,
                        labels.get(comp.candidate, comp.candidate),
                        lv.label,
                        {
                            "baseline_hit_rate": c.baseline_hit_rate,
                            "candidate_hit_rate": c.candidate_hit_rate,
                            "p_value": c.p_value,
                            "baseline_requests": c.baseline_requests,
                            "candidate_requests": c.candidate_requests,
                        },
                    )
                )
        for a in lv.arms:
            w.extend(_arm_warnings(a, lv, labels.get(a.arm, a.arm)))
    w.extend(_effect_not_medians(levels, labels))
    w.extend(_rate_across_k(inputs, cands))
    w.extend(
        ReportWarning(
            Kind.ACCEPTANCE_OUTLIERS, c.label, fields={"outliers": [asdict(o) for o in c.acceptance_outliers]}
        )
        for c in cands
        if c.acceptance_outliers
    )
    w.extend(prediction_checks(inputs, levels))
    command = repeats_command(inputs)
    w.extend(_near_margin(levels, labels, command))
    if inputs.setup.repeats < MIN_LAUNCHES:
        fields = {"repeats": inputs.setup.repeats, "needed": MIN_LAUNCHES, "command": command}
        w.append(ReportWarning(Kind.FEW_REPEATS, fields=fields))
    for c in cands:
        if c.correctness is not None:
            w.extend(replace(x, subject=c.label) for x in c.correctness.warnings)
    w.extend(inputs.notes)
    return distinct(w)


def acceptance_validity(inputs: ABRun) -> list[ReportWarning]:
    """Why acceptance in this run cannot be the user's traffic's (`workload.validity`'s rules): synthetic prompts and
    ignore_eos for every candidate; forced acceptance and outputs too short for its k for each; and what a read
    file said of its dataset or settings (compare's notes of those kinds)."""
    s = inputs.setup
    synthesised = validity.synthesised_prompts(s.workload_source, s.synthesised_prompts, len(s.items))
    kind = "synthetic" if s.workload_source.startswith(validity.SYNTHETIC_SOURCE) else "trace"
    out = [validity.synthetic_prompts(synthesised, len(s.items), kind), validity.ignored_eos(s.ignore_eos)]
    out += [n for n in inputs.notes if n.kind in ACCEPTANCE_VALIDITY]
    for cand in inputs.candidates:
        runs = [r for r in inputs.runs if r.arm == cand.name]
        # what the engine said while measured; forced with nothing said and no launch that forced it: its source
        forced = [r.acceptance for r in runs if r.acceptance is not None and r.acceptance.forced]
        said = [b for a in forced for b in a.forced_by or (() if cand.forced_acceptance else (a.source,))]
        out.append(validity.forced(cand.forced_acceptance, list(dict.fromkeys(said))))
        k = cand.num_speculative_tokens or max(
            (len(r.acceptance.per_position) for r in runs if r.acceptance), default=0
        )
        ok = [x for r in runs for x in r.records if x.ok and not x.warmup]
        lengths = [r.acceptance.acceptance_length for r in runs if r.acceptance and r.acceptance.active]
        length = statistics.fmean(x for x in lengths if x is not None) if any(lengths) else None
        out.append(validity.short_outputs(k, [(x.completion_tokens, x.finish_reason) for x in ok], length))
        out[-2:] = [replace(w, subject=cand.label) for w in out[-2:] if w is not None]
    return distinct(w for w in out if w is not None)


def _arm_warnings(a: ArmLevel, lv: LevelReport, label: str) -> list[ReportWarning]:
    """What one arm at one load leaves unknown: tokens per chunk, acceptance, repeats without drafts."""
    out = []
    if a.token_count_sources.get("one_per_chunk"):
        out.append(ReportWarning(Kind.ONE_TOKEN_PER_CHUNK, label, lv.label))
    if a.repeats and a.acceptance is None and a.arm != "baseline":
        like_baseline = None
        base = lv.arm("baseline")
        tpc, btpc = (
            a.distributions["tokens_per_chunk"].mean,
            base.distributions["tokens_per_chunk"].mean if base else math.nan,
        )
        if measured_tpc(a) and math.isfinite(btpc) and abs(tpc - btpc) < 0.05:
            like_baseline = tpc  # streamed like the baseline: it may not have speculated
        out.append(ReportWarning(Kind.NO_ACCEPTANCE, label, lv.label, {"tokens_per_chunk": like_baseline}))
    if a.acceptance is not None and a.acceptance.active and a.acceptance.inactive_repeats:
        out.append(
            ReportWarning(
                Kind.REPEATS_WITHOUT_DRAFTS,
                label,
                lv.label,
                {"inactive_repeats": a.acceptance.inactive_repeats, "repeats": a.acceptance.repeats},
            )
        )
    return out


def _rate_across_k(inputs: ABRun, cands: Sequence[CandidateReport]) -> list[ReportWarning]:
    """Candidates of different K side by side, each with an acceptance rate: the rate (accepted / drafted tokens)
    falls with K by construction (a longer draft's later positions are accepted less often), so ranking K by it
    picks too short a K (vllm#39359). One warning for the run, naming each candidate's K, rate and length at the
    low load, and its first conditional rates where known; the report points to length and the conditional rates."""
    ks = {a.name: a.num_speculative_tokens for a in inputs.arms}
    rated = [
        c for c in cands if c.acceptance is not None and c.acceptance.acceptance_rate is not None and ks.get(c.name)
    ]
    if len({ks[c.name] for c in rated}) < 2:
        return []
    fields = [
        {
            "label": c.label,
            "k": ks[c.name],
            "rate": c.acceptance.acceptance_rate if c.acceptance else None,
            "length": c.acceptance.acceptance_length if c.acceptance else None,
        }
        for c in sorted(rated, key=lambda c: ks[c.name] or 0)
    ]
    return [ReportWarning(Kind.ACCEPTANCE_RATE_ACROSS_K, fields={"candidates": fields})]


def near_margin(low: float, high: float, margin: float) -> bool:
    """Does a speedup interval come within a third of the margin (log scale) of either margin bound? Then a launch
    effect the interval does not carry could decide it the other way."""
    if not (math.isfinite(low) and math.isfinite(high) and low > 0 and margin > 0):
        return False
    m = math.log1p(margin)
    return any(abs(abs(math.log(b)) - m) < m / 3 for b in (low, high))


def _effect_not_medians(levels: Sequence[LevelReport], labels: Mapping[str, str]) -> list[ReportWarning]:
    """Where the TPOT speedup (the per-prompt effect) and the ratio of the table's p50s differ by more than the
    margin, with why (comparison.prompt_spread): one warning for the run, listing where."""
    where, margin = [], 0.0
    for lv in levels:
        for c in lv.comparisons:
            tp, ps = c.metric(HEADLINE.name), c.prompt_spread
            if tp is None or ps is None or not ps.differs:
                continue
            margin = tp.margin
            where.append({"subject": labels.get(c.candidate, c.candidate), "load": lv.label, "speedup": tp.speedup,
                          "medians_speedup": ps.medians_speedup, "pairs": ps.pairs, "faster": ps.faster,
                          "slower": ps.slower, "low_quartile": ps.low_quartile, "high_quartile": ps.high_quartile,
                          "split": ps.split})  # fmt: skip
    return [ReportWarning(Kind.EFFECT_NOT_MEDIANS, fields={"where": where, "margin": margin})] if where else []


def repeats_command(inputs: ABRun) -> str:
    """Whose settings the advice to repeat names: `compare` (two separate runs), `demo` or `run`."""
    return "compare" if inputs.setup.separate_runs else inputs.setup.command


def _near_margin(levels: Sequence[LevelReport], labels: Mapping[str, str], command: str) -> list[ReportWarning]:
    """Where the launch effect is unmeasured and a TPOT interval ends near a margin bound, so that a launch effect
    smaller than the margin could change the answer: what would measure it. One warning per kind for the whole run,
    listing where (four copies of one piece of advice read as four problems)."""
    spread: list[dict[str, object]] = []
    near: list[dict[str, object]] = []
    launches, launched, margin = 1, False, 0.0
    for lv in levels:
        for c in lv.comparisons:
            tp = c.metric(HEADLINE.name)
            if c.gate != "ok" or tp is None or tp.unit == "launch" or not tp.decision:
                continue
            where = {"subject": labels.get(c.candidate, c.candidate), "load": lv.label}
            if tp.launch_spread is not None and tp.launch_spread > tp.margin:
                spread.append({**where, "launch_spread": tp.launch_spread, "launches": tp.launches})
            elif near_margin(tp.speedup_low, tp.speedup_high, tp.margin):
                # far from both bounds a launch effect below the margin would not change the answer: not listed
                near.append({**where, "speedup": tp.speedup, "speedup_low": tp.speedup_low,
                             "speedup_high": tp.speedup_high})  # fmt: skip
            else:
                continue
            launches, launched, margin = max(launches, c.launches), c.launched, tp.margin
    out = []
    if spread:
        fields = {"where": spread, "margin": margin, "repeats": MIN_LAUNCHES, "command": command}
        out.append(ReportWarning(Kind.LAUNCH_SPREAD, fields=fields))
    if near:
        repeats = max(MIN_LAUNCHES, 2 * launches) if launched else None
        fields = {"where": near, "margin": margin, "launched": launched, "launches": launches, "repeats": repeats,
                  "command": command}  # fmt: skip
        out.append(ReportWarning(Kind.NEAR_MARGIN, fields=fields))
    return out


def measured_tpc(a: ArmLevel) -> bool:
    """Tokens per chunk was measured (not assumed one per chunk) for every successful request of this arm."""
    return bool(a.token_count_sources) and "one_per_chunk" not in a.token_count_sources


def _missing(inputs: ABRun) -> list[ReportWarning]:
    """Each arm's planned repeats at each load that did not run, or ran only in part, as records."""
    out = []
    for lv in inputs.setup.levels:
        for arm in inputs.arms:
            runs = inputs.runs_for(arm.name, lv.key)
            have = {r.repeat for r in runs if any(not x.warmup for x in r.records)}
            want = set(range(1, inputs.setup.repeats + 1))
            if not have:
                out.append(ReportWarning(Kind.NO_RUNS, arm.label, lv.label))
            elif want - have:
                out.append(ReportWarning(Kind.REPEATS_MISSING, arm.label, lv.label, {"repeats": sorted(want - have)}))
            part = [r.repeat for r in runs if r.interrupted and r.records]
            if part:
                out.append(ReportWarning(Kind.REPEATS_CUT, arm.label, lv.label, {"repeats": part}))
    return out


def run_confidence(inputs: ABRun) -> float:
    """95 %, or for a run with adaptive repeats 1 - the alpha of its last look (stats.sequential): the verdict
    it stopped on, at the level that keeps the whole design's false-positive rate at 5 %."""
    looks = (inputs.setup.sequential or {}).get("looks") or []
    if looks and looks[-1].get("alpha") is not None:
        return 1.0 - float(looks[-1]["alpha"])
    return stats.CONFIDENCE


def resolve_margins(opts: ReportOptions, run_margin: Mapping[str, float],
                    run_floor: Mapping[str, float] | None = None) -> ReportOptions:  # fmt: skip
    """Every paired metric's margin and the correctness margin, and every time guardrail's floor, explicit: the
    defaults, then the run's own `margin:` and `guardrail_floor:`, then the options' (`compare --margin`,
    `report --guardrail-floor`)."""
    given = {**run_margin, **(opts.margin or {})}
    time = {c.name: float(given.get(c.name, c.default_margin)) for c in COMPARED_METRICS}
    corr = opts.correctness
    if "correctness" in given:
        corr = replace(corr, margin=float(given["correctness"]))
    floors = {**(run_floor or {}), **(opts.guardrail_floor or {})}
    floor = {c.name: float(floors.get(c.name, c.default_floor_s)) for c in COMPARED_METRICS}
    return replace(opts, margin=time, correctness=corr, guardrail_floor=floor)


def _candidates(
    inputs: ABRun, levels: Sequence[LevelReport], opts: ReportOptions, warnings: list[ReportWarning]
) -> list[CandidateReport]:
    """Per candidate, across loads: acceptance at its low load, crossover, what-if, capacity, correctness, the
    single-change check (what-if notes go to `warnings`)."""
    base = inputs.baseline
    cands = []
    changes = {c.candidate: c for c in inputs.changes}
    for cand in inputs.candidates:
        low = next((lv for lv in levels if "low" in lv.roles and lv.arm(cand.name)), None)
        low = low or next((lv for lv in levels if lv.arm(cand.name)), None)
        low_arm = low.arm(cand.name) if low is not None else None
        acc = low_arm.acceptance if low_arm is not None else None
        # with a search its fit is the crossover (`search_view`): not a second interpolated between its probes (placed
        # around the crossing, they make its interval look narrower), nor between a schedule's windows (times)
        fixed = inputs.setup.search is None and not any(lv.window for lv in inputs.setup.levels)
        cross = crossover_view(cand, levels, inputs, opts) if fixed else None
        corr = compare_correctness(inputs, cand.name, opts.correctness, opts.max_error_rate)
        ch = changes.get(cand.name)
        cands.append(
            CandidateReport(
                name=cand.name,
                label=cand.label,
                acceptance=acc,
                acceptance_positions=low_arm.acceptance_positions if low_arm is not None else None,
                acceptance_outliers=acceptance_outliers(
                    inputs.runs_for(cand.name, low.key) if low is not None else (),
                    inputs.setup.items,
                    opts.correctness.allow_python_checks,
                ),
                crossover=cross,
                what_if=what_if_views(cand, levels, warnings),
                plan=capacity_view(cand, base, levels, inputs),
                correctness=corr,
                single_change=ch.verified if ch else None,
                diff_lines=ch.diff_lines if ch else (),
                change_note=ch.note if ch else not_checked("not_recorded"),
            )
        )
    return cands


def build_report(inputs: ABRun, options: ReportOptions | None = None) -> Report:
    """Every number of the A/B report from the raw inputs. Pure: same inputs and options, same report."""
    opts = options or ReportOptions()
    if opts.confidence is None:
        opts = replace(opts, confidence=run_confidence(inputs))
    opts = resolve_margins(opts, inputs.setup.margin, inputs.setup.guardrail_floor)
    # a phased load is judged window by window (verdict.phases): its windows are the levels from here on
    schedule, whole, inputs = phased_level(inputs), inputs, phased_inputs(inputs) or inputs
    crit = criteria(opts, inputs)
    base = inputs.baseline
    levels: list[LevelReport] = []
    # Shown by axis and load (c1, c2, c4, then rates), not in run order, a schedule's windows in time order (their
    # spans); the RNG seed follows the planned order.
    specs = inputs.setup.levels
    order = sorted(range(len(specs)), key=lambda j: (specs[j].kind, specs[j].shown_at))
    for i in order:
        lv = inputs.setup.levels[i]
        arms = {}
        for arm in inputs.arms:
            runs = inputs.runs_for(arm.name, lv.key)
            if runs:
                arms[arm.name] = with_window_load(arm_level(arm, lv, runs, inputs, opts), whole, lv)
        comps = []
        for j, cand in enumerate(inputs.candidates):
            rng = np.random.default_rng([opts.seed, i, j])
            comp = compare_level(lv, cand, base, arms, inputs, rng, opts)
            comps.append(replace(comp, predicted=predicted_band(inputs, cand.name, lv)))
        best, ranking, tied = rank_level(lv, comps, arms, inputs, np.random.default_rng([opts.seed, i, 99]),
                                         opts.n_resamples, opts.confidence, margin_of(opts, crit.decide_on),
                                         crit.decide_on)  # fmt: skip
        levels.append(
            LevelReport(
                lv.key, lv.label, lv.kind, lv.value, lv.roles, tuple(arms.values()), tuple(comps), best, ranking, tied
            )
        )

    warnings: list[ReportWarning] = acceptance_validity(inputs)  # said first: what the headline must say
    cands = _candidates(inputs, levels, opts, warnings)
    missing = _missing(inputs)
    arm_views = tuple(_arm_view(a) for a in inputs.arms)
    search = search_view(inputs, levels, opts)
    not_users = not_users_acceptance(inputs, warnings)
    title = inputs.setup.name or f"{', '.join(c.label for c in inputs.candidates)} vs {base.label}"
    rec = _with_cost(searched(_recommend(inputs, levels, cands, arm_views, opts, crit, not_users), search,
                              arm_views), levels, inputs)  # fmt: skip
    return Report(
        schema=REPORT_SCHEMA,
        title=title,
        setup=_setup_view(whole),  # the run as planned: a schedule's workload and its one load
        arms=arm_views,
        levels=tuple(levels),
        candidates=tuple(cands),
        warnings=tuple(distinct(warnings + _warnings(inputs, levels, cands) + tolerated(rec))),
        missing=tuple(missing),
        interrupted=inputs.interrupted or any(r.interrupted for r in inputs.runs),
        diagnosis=dict(inputs.diagnosis) if inputs.diagnosis is not None else None,
        k_choices=unchosen(k_choices(inputs, levels, cands), not_users),
        recommendation=rec,
        margin={**(opts.margin or {}), "correctness": opts.correctness.margin},
        options={
            "max_error_rate": opts.max_error_rate,
            "min_load_fraction": opts.min_load_fraction,
            "seed": opts.seed,
            "n_resamples": opts.n_resamples,
            "confidence": opts.confidence,
            "near_tie_logprob_gap": opts.correctness.near_tie_logprob_gap,
            "allow_python_checks": opts.correctness.allow_python_checks,
            "decide_on": crit.decide_on,
            "guardrails": list(crit.guardrails),
            "guardrail_floor": dict(crit.floors),
        },
        search=search,
        slo_capacity=slo_capacity_view(inputs, levels, opts),
        phases=phase_views(schedule, inputs, levels, rec) if schedule is not None else (),
        timeline=timeline(whole, schedule) if schedule is not None else (),
        speculation_timeline=speculation_timeline(whole, schedule) if schedule is not None else (),
    )


def criteria(opts: ReportOptions, inputs: ABRun) -> Criteria:
    """The deciding metric and the guardrails: the options' (`--decide-on`), else the run's own (`decide_on:`,
    `guardrails:`), else the defaults; the deciding metric is never its own guardrail. The time guardrails' floors are
    the options' as `resolve_margins` made them (else the figures table's), and the SLO the run's own (`slos:`)."""
    decide = opts.decide_on or inputs.setup.decide_on or DEFAULT_DECIDE_ON
    given = opts.guardrails if opts.guardrails is not None else inputs.setup.guardrails
    guards = tuple(g for g in (DEFAULT_GUARDRAILS if given is None else given) if g != decide)
    floors = dict(opts.guardrail_floor) if opts.guardrail_floor is not None else dict(DEFAULT_FLOORS_S)
    return Criteria(decide, guards, opts.confidence or stats.CONFIDENCE, floors, slo_targets(inputs))


def tolerated(rec: RecommendationView | None) -> list[ReportWarning]:
    """Every guardrail breach the floor or the SLO did not hold against a candidate, for the report's warnings: a
    breach is always shown, wherever warnings are (the terminal, report.html, summary.json)."""
    answers = rec.answers if rec is not None else ()
    return [g.breach for a in answers for g in a.guardrails if g.breach is not None]


def progress(inputs: ABRun) -> tuple[ArmProgress, ...]:
    """How far every arm got at every planned load: finished (every planned repeat, none cut short), partial or not
    run; () for `compare` (two separate runs: nothing to resume, and a load one file lacks is the "missing" gate)."""
    if inputs.setup.separate_runs:
        return ()
    out = []
    want = set(range(1, inputs.setup.repeats + 1))
    for lv in inputs.setup.levels:
        for arm in inputs.arms:
            runs = inputs.runs_for(arm.name, lv.key)
            have = {r.repeat for r in runs if any(not x.warmup for x in r.records)}
            cut = any(r.interrupted for r in runs)
            state = "not run" if not have else "partial" if cut or want - have else "finished"
            out.append(ArmProgress(arm.name, lv.key, state))
    return tuple(out)


def _recommend(inputs: ABRun, levels: Sequence[LevelReport], cands: Sequence[CandidateReport],
               arms: Sequence[ArmView], opts: ReportOptions, crit: Criteria,
               not_users: frozenset[str] = frozenset()) -> RecommendationView | None:  # fmt: skip
    """The recommendation, with how far the run got: an interrupted or partial run gets no ship/plain answer; a
    candidate whose acceptance is not the user's gets none either (`not_users`)."""
    done = progress(inputs)
    incomplete = inputs.interrupted or any(p.state != "finished" for p in done)
    return recommend(levels, cands, arms, margin_of(opts, crit.decide_on), crit, done, incomplete, not_users)


def unchosen(choices: Sequence[KChoice], not_users: frozenset[str]) -> tuple[KChoice, ...]:
    """The k choices, none made where it rests on a candidate whose acceptance is not the user's (its prediction's
    source, or a k it measured): their speeds stay, the choice goes."""

    def rests(kc: KChoice) -> bool:
        return bool({kc.source, *(m.candidate for m in kc.measured)} & not_users)

    return tuple(replace(kc, measured_best_k=None, not_users=True) if rests(kc) else kc for kc in choices)


def not_users_acceptance(inputs: ABRun, warnings: Sequence[ReportWarning]) -> frozenset[str]:
    """The candidates (names) an acceptance-validity record is about: its subject, or every one ("")."""
    about = {w.subject for w in warnings if w.kind in ACCEPTANCE_VALIDITY}
    return frozenset(c.name for c in inputs.candidates if "" in about or c.label in about)


def _with_cost(rec: RecommendationView | None, levels: Sequence[LevelReport], inputs: ABRun
               ) -> RecommendationView | None:  # fmt: skip
    """The recommendation's capacity plan against plain, with the ends of the throughput intervals."""
    if rec is None:
        return None
    if rec.form in ("incomplete", "undecided"):
        return rec  # no price for an answer not given: the cost is of a decided recommendation
    name = rec.winner or next(
        (b.choice for b in rec.bands if b.choice not in (BASELINE_CHOICE, UNDECIDED_CHOICE)), None
    )
    cand = next((c for c in inputs.candidates if c.name == name), None)
    if cand is None:
        return rec
    base = inputs.baseline
    # off-above and per-load deployments run as each load's choice (speculation off where plain was chosen, a
    # per-batch-size schedule's k where another candidate was): the plan reads each load's chosen arm, priced as the
    # shipped candidate; a single config is the candidate everywhere
    chosen = {c.value: c.choice for c in rec.loads} if rec.form in ("off-above", "per-load") else None
    plan = capacity_view(cand, base, levels, inputs, chosen=chosen)
    if plan is None:
        return rec
    worst = capacity_view(cand, base, levels, inputs, ("high", "low"), chosen)
    best = capacity_view(cand, base, levels, inputs, ("low", "high"), chosen)
    return replace(rec, cost=RecommendationCost(cand.name, plan, worst, best, inputs.setup.repeats, chosen is not None))
