"""The recommendation: which configuration to ship at each load band, from the per-load verdicts.

Each candidate gets one of three answers at each measured load (`CandidateAnswer`): *ship* when it is faster than
the baseline on the deciding metric (TPOT unless `decide_on:` says otherwise) beyond the margin and no guardrail
(TTFT, E2E, error rate and correctness unless `guardrails:` says otherwise) is worse beyond its margin and, for a time
metric, beyond its absolute floor (`guardrail_floor:`; with an SLO limit on the metric, the SLO instead): a loss a
user would notice, not one only the statistics detect. A breach the floor or the SLO tolerates is shown (`TOLERATED`,
its record `GUARDRAIL_TOLERATED`) and never holds the candidate back; *plain* when the evidence says it does not pay
(equivalent or slower on the deciding metric, or a guardrail worse); *undecided* otherwise (inconclusive, too few
pairs, gated, missing, not finished, or a guardrail whose estimate leans worse beyond its margin while its interval
cannot tell). The load's choice is the shipping candidate with the largest speedup; plain only when every candidate
is shown not to pay; else undecided: an undecided load is never folded into plain, nor into an "off above" edge. A
candidate whose acceptance is not the user's traffic's (synthetic prompts, ignore_eos, forced, outputs too short:
`not_users_answer`) is undecided on the speed it showed. Where a load's best is tied with the candidate chosen at the
load below, that one is kept (one configuration over both is simpler, and the data does not prefer the other).

Neighbouring loads with the same choice form a band. Where a band with a candidate meets a plain band above it, the
edge is that candidate's crossover (`CandidateReport.crossover`, TPOT, with its interval) when it crosses between
those two loads; otherwise the edge is only known to lie between the two measured loads (`edge_between`). No edge
is drawn next to an undecided band.

The form says what to ship: "plain" (no candidate pays anywhere), "single" (one candidate pays at every measured
load), "off-above" (one candidate pays at the low loads, plain above: the engine's disable-by-batch-size form),
"per-load" (different candidates at different loads; "per-phase" where they are a phased load's windows, in time
order: a candidate that pays in its steady phases but breaks a guardrail at a transition is plain there, the window
named), "undecided" (some load is undecided: ship only where decided,
and say what would decide the rest) or "incomplete" (the run did not finish: no answer at all). Pure: reads the
report's parts, computes nothing statistical of its own but the error-rate test.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from speculab.config.experiment import DEFAULT_DECIDE_ON, DEFAULT_GUARDRAILS, SloTargets
from speculab.harness.analysis import cost as costlib
from speculab.harness.analysis.comparison.margin import decide, to_decide
from speculab.harness.analysis.figures import DEFAULT_FLOORS_S, HEADLINE
from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import CONFIDENCE
from speculab.harness.stats.proportions import two_proportion_p
from speculab.harness.verdict.across_loads import pareto_points
from speculab.harness.verdict.choices import (
    DISAGREE,
    LEANS_WORSE,
    NOT_MEASURED,
    NOT_USERS,
    NOT_WORSE,
    PLAIN,
    SHIP,
    TOLERATED,
    UNCLEAR,
    UNDECIDED,
    WORSE,
    ArmProgress,
    CandidateAnswer,
    GuardrailAnswer,
)
from speculab.harness.verdict.model import (
    BASELINE_CHOICE,
    MIN_LAUNCHES,
    UNDECIDED_CHOICE,
    ArmLevel,
    ArmView,
    CandidateReport,
    CorrectnessComparison,
    LevelReport,
    LoadChoice,
    Ratio,
    RecommendationBand,
    RecommendationView,
    SearchView,
)

NAN = math.nan


@dataclass(frozen=True, slots=True)
class Criteria:
    """What a candidate must show to be recommended: faster on `decide_on` beyond its margin, no guardrail worse
    beyond its margin (each time metric's own margin, carried by its `Ratio`, and its absolute floor in `floors`, or
    the SLO's limit on it; correctness: the checks' non-inferiority margin; error rate: more failures than the
    baseline beyond chance at `confidence`)."""

    decide_on: str = DEFAULT_DECIDE_ON
    guardrails: tuple[str, ...] = DEFAULT_GUARDRAILS
    confidence: float = CONFIDENCE
    # each time metric's absolute floor, seconds per request (0 or absent: its margin alone)
    floors: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_FLOORS_S))
    slo: SloTargets | None = None  # the run's SLO (`slos:`); None without one


def _axis(levels: Sequence[LevelReport]) -> str:
    """The load axis the bands run along: the sweep's kind if there is one, else the most common kind."""
    sweep = [lv.kind for lv in levels if "sweep" in lv.roles]
    if sweep:
        return sweep[0]
    return Counter(lv.kind for lv in levels).most_common(1)[0][0]


# ---------------------------------------------------------------------------------------------------------------
# Guardrails: one answer each, from the numbers the verdict already made.
# ---------------------------------------------------------------------------------------------------------------


def held_to(r: Ratio, margin: float) -> str:
    """A time metric's answer against a relative margin: not worse when its interval's slow end lies within the
    margin (or it is faster or equivalent), worse when the whole interval lies beyond it (decision "slower"), leans
    worse when only the estimate does, else unclear."""
    bound = 1.0 / (1.0 + margin)
    decision = (r.decision or r.verdict) if margin == r.margin else decide(r.speedup_low, r.speedup_high, margin).value
    if decision in ("faster", "equivalent") or (math.isfinite(r.speedup_low) and r.speedup_low >= bound):
        return NOT_WORSE
    if decision == "slower":
        return WORSE
    if math.isfinite(r.speedup) and r.speedup < bound:
        return LEANS_WORSE
    return UNCLEAR


@dataclass(frozen=True, slots=True)
class Practical:
    """What a time guardrail's loss is judged against besides its margin, at one load: the baseline's median
    (`typical_s`, what turns the speedup into seconds), the floor, and the SLO's limit on the metric with the share of
    the candidate's requests within it. Whom and where, for the record of a tolerated breach."""

    typical_s: float = math.nan  # the baseline's p50 of the metric here; NaN: unknown (no floor can apply)
    floor_s: float = 0.0
    slo_limit_s: float | None = None  # the SLO's limit on this metric; None: none set
    within_slo: float | None = None  # the candidate's share of requests (failures count as outside) within it
    slo_target: float = 0.0  # the share the SLO asks for (`slos: {attainment}`)
    subject: str = ""
    load: str = ""


def time_guardrail(name: str, r: Ratio | None, practical: Practical | None = None,
                   confidence: float = CONFIDENCE) -> GuardrailAnswer:  # fmt: skip
    """A time metric held to its margin (`held_to`), and a breach of it held to what a user would notice: with an SLO
    limit on the metric, a candidate within its SLO (at least its target share of requests within the limit) is not
    held back, one outside it is; without one, a loss (the baseline's median times the slowdown) within the floor is
    not: the bar is max(margin, floor / the baseline's median). A breach not held against the candidate is TOLERATED,
    with its record; without the baseline's median (a level with no baseline arm) the margin alone decides."""
    if r is None:
        return GuardrailAnswer(name, NOT_MEASURED, NAN, NAN, NAN, NAN)
    p = practical or Practical()
    loss = p.typical_s * (1.0 / r.speedup - 1.0) if r.speedup > 0 and math.isfinite(p.typical_s) else NAN
    out = GuardrailAnswer(name, held_to(r, r.margin), r.speedup, r.speedup_low, r.speedup_high, r.margin, None,
                          r.to_decide, loss_s=loss if math.isfinite(loss) else None)  # fmt: skip
    if out.answer not in (WORSE, LEANS_WORSE):
        return out
    if p.slo_limit_s is not None and p.within_slo is not None:
        if p.within_slo < p.slo_target:
            return replace(out, slo_limit_s=p.slo_limit_s)
        return _tolerated(out, p, {"slo_limit_s": p.slo_limit_s, "within_slo": p.within_slo, "target": p.slo_target})
    if not (p.floor_s > 0 and math.isfinite(p.typical_s) and p.typical_s > 0):
        return out
    bar = max(r.margin, p.floor_s / p.typical_s)
    practical_answer = held_to(r, bar)
    if practical_answer in (NOT_WORSE, UNCLEAR):
        return _tolerated(replace(out, floor_s=p.floor_s), p, {"floor_s": p.floor_s})
    more = to_decide(r.speedup, r.speedup_low, r.speedup_high, bar, confidence)
    again = more if practical_answer == LEANS_WORSE and math.isfinite(more) else out.to_decide
    return replace(out, answer=practical_answer, floor_s=p.floor_s, to_decide=again)


def _tolerated(g: GuardrailAnswer, p: Practical, against: Mapping[str, float]) -> GuardrailAnswer:
    """A breach of the margin that the floor or the SLO tolerates: answer TOLERATED, and its record (shown in the
    recommendation and among the report's warnings): the metric, the relative answer it had (worse or leans worse),
    the speedup and its interval, the margin, the loss in seconds (None: unknown), and what tolerated it."""
    numbers = {"speedup": g.estimate, "low": g.low, "high": g.high, "margin": g.margin, "loss_s": g.loss_s, **against}
    # None, not NaN, where a number is unknown (an interval too few pairs give none): the record reads back from
    # summary.json as it was written
    fields = {"metric": g.name, "answer": g.answer,
              **{k: v if v is not None and math.isfinite(v) else None for k, v in numbers.items()}}  # fmt: skip
    breach = ReportWarning(WarningKind.GUARDRAIL_TOLERATED, p.subject, p.load, fields)
    return replace(g, answer=TOLERATED, breach=breach, slo_limit_s=against.get("slo_limit_s"))


def practical_at(lv: LevelReport, candidate: str, metric: str, crit: Criteria, subject: str) -> Practical:
    """What one candidate's loss on one time metric at one load is judged against besides its margin."""
    base, cand = lv.arm(BASELINE_CHOICE), lv.arm(candidate)
    dist = base.distributions.get(metric) if base is not None else None
    typical = dist.p50 if dist is not None and dist.n else NAN
    limit = crit.slo.limits.get(metric) if crit.slo is not None else None
    within = within_limit(cand, metric, limit) if limit is not None else None
    target = crit.slo.attainment if crit.slo is not None else 0.0
    return Practical(typical, float(crit.floors.get(metric, 0.0)), limit, within, target, subject, lv.label)


def within_limit(arm: ArmLevel | None, metric: str, limit: float) -> float | None:
    """The share of an arm's requests at one load whose `metric` is within `limit` (failed ones are not: the SLO's
    own rule, `analysis.cost.slo_attainment`, on this one limit); None where the arm kept no values of it."""
    values = getattr(arm.series, metric, ()) if arm is not None else ()
    if arm is None or not values or not arm.sent:
        return None
    one = SloTargets(**{metric: limit})
    # one limit set: the other two places of each (ttft, tpot, e2e) row are not read
    rows = [(v, v, v) for v in values] + [(None, None, None)] * max(0, arm.sent - len(values))
    return costlib.slo_attainment(rows, one)


def error_guardrail(base: ArmLevel | None, cand: ArmLevel | None, confidence: float) -> GuardrailAnswer:
    """More failed requests than the baseline beyond chance (pooled two-proportion test at `confidence`): worse;
    as many or fewer: not worse; more but within chance: unclear (it does not hold the answer)."""
    if base is None or cand is None or not base.sent or not cand.sent:
        return GuardrailAnswer("error_rate", NOT_MEASURED, NAN, NAN, NAN, 0.0)
    c, b = cand.error / cand.sent, base.error / base.sent
    p = two_proportion_p(c, cand.sent, b, base.sent)
    answer = NOT_WORSE if c <= b else WORSE if p < 1.0 - confidence else UNCLEAR
    return GuardrailAnswer("error_rate", answer, c - b, c - b, c - b, 0.0, p)


def correctness_guardrail(c: CorrectnessComparison | None) -> GuardrailAnswer:
    """The checks' pass rate held to its non-inferiority margin (verdict.correctness); not measured without checks.
    Worse, whatever the checks say, where the candidate's outputs loop and the baseline's do not (`degeneration`), or
    where a check beyond equality makes it worse (a streaming-path defect, structured outputs less often valid): their
    numbers are the correctness verdict's, so the answer carries none."""
    loops = c is not None and c.degeneration is not None and c.degeneration.worse
    beyond = c is not None and c.worse and any(k is not None and k.worse for k in (c.stream_unary, c.structured_output))
    if loops or beyond:
        return GuardrailAnswer("correctness", WORSE, NAN, NAN, NAN, NAN)
    d = c.pass_rate_difference if c is not None else None
    if c is None or d is None or not c.non_inferiority:
        return GuardrailAnswer("correctness", NOT_MEASURED, NAN, NAN, NAN, NAN)
    m = c.non_inferiority_margin
    # byte-identical outputs for every prompt pass and fail the same checks: not worse, whatever the interval says
    same = c.n_divergent == 0 and c.identical_rate.n > 0 and c.identical == c.identical_rate.n
    answer = NOT_WORSE if same else {"not worse": NOT_WORSE, "worse": WORSE}.get(c.non_inferiority)
    if answer is None:
        answer = LEANS_WORSE if math.isfinite(d.estimate) and d.estimate < -m else UNCLEAR
    return GuardrailAnswer("correctness", answer, d.estimate, d.low, d.high, m)


def guardrails_at(lv: LevelReport, candidate: str, report: CandidateReport | None, crit: Criteria
                  ) -> tuple[GuardrailAnswer, ...]:  # fmt: skip
    """Every guardrail of one candidate at one load, in the order asked (the deciding metric is not its own)."""
    comp = lv.comparison(candidate)
    label = report.label if report is not None else candidate
    out = []
    for g in crit.guardrails:
        if g == crit.decide_on:
            continue
        if g == "error_rate":
            out.append(error_guardrail(lv.arm(BASELINE_CHOICE), lv.arm(candidate), crit.confidence))
        elif g == "correctness":
            out.append(correctness_guardrail(report.correctness if report is not None else None))
        else:
            r = comp.metric(g) if comp is not None and comp.gate == "ok" else None
            out.append(time_guardrail(g, r, practical_at(lv, candidate, g, crit, label), crit.confidence))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------
# Each candidate's answer at each load, and each load's choice.
# ---------------------------------------------------------------------------------------------------------------


def needed(r: Ratio | None) -> tuple[int | None, str]:
    """What would likely decide a metric, from its data: (about how many prompts in all at this load, "prompts"),
    or repeats when launches are the interval's unit, or requests of each run when unpaired; (None, "") when no
    amount of data is likely to (the estimate sits on the margin) or nothing says."""
    if r is None:
        return None, ""
    if (r.decision or r.verdict) == "not enough paired data":
        if r.unit == "launch":
            return MIN_LAUNCHES, "repeats"
        return MIN_PAIRS * max(1, r.group_size), "prompts"  # the groups rule (analysis.groups.groups_needed)
    if r.to_decide is None or not math.isfinite(r.to_decide):
        return None, ""
    if r.unit == "launch":
        return math.ceil(max(1, r.launches) * r.to_decide), "repeats"
    if r.unit == "unpaired":
        return math.ceil(max(r.samples or (r.n_pairs,)) * r.to_decide), "requests"
    units = r.n_units or r.n_pairs
    return math.ceil(units * r.to_decide) * max(1, r.group_size), "prompts"


def candidate_answer(lv: LevelReport, candidate: str, report: CandidateReport | None, crit: Criteria,
                     unfinished: frozenset[tuple[str, str]]) -> CandidateAnswer:  # fmt: skip
    """Ship, plain or undecided for one candidate at one load (the module's rule), with what would decide it."""
    comp = lv.comparison(candidate)
    ranked = next((x for x in lv.ranking if x.candidate == candidate), None)
    r = comp.metric(crit.decide_on) if comp is not None else None
    gate = comp.gate if comp is not None else (ranked.gate if ranked is not None else "missing")
    decision = (r.decision or r.verdict) if r is not None else (ranked.decision or ranked.verdict if ranked else "")
    speed = (r.speedup, r.speedup_low, r.speedup_high) if r is not None else (NAN, NAN, NAN)
    if ranked is not None and r is None:
        speed = (ranked.speedup, ranked.speedup_low, ranked.speedup_high)
    guards = guardrails_at(lv, candidate, report, crit)
    answer = _answer(candidate, lv.key, gate, decision, guards, unfinished)
    more, unit = None, ""
    if answer[0] == UNDECIDED and answer[1] == "guardrail":
        leaning = [g for g in guards if g.answer == LEANS_WORSE]
        # each against its own bar: the margin's, or the floor's where that is higher (`GuardrailAnswer.to_decide`)
        ratios = [(comp.metric(g.name), g.to_decide) for g in leaning] if comp is not None else []
        asks = [needed(replace(x, to_decide=t)) for x, t in ratios if x is not None]
        more, unit = max(asks, key=lambda a: a[0] or 0) if asks else (None, "")
    elif answer[0] == UNDECIDED and gate == "ok":
        more, unit = needed(r)
    return CandidateAnswer(candidate, lv.key, answer[0], answer[1], *speed, guards, more, unit)


def _answer(candidate: str, level: str, gate: str, decision: str, guards: Sequence[GuardrailAnswer],
            unfinished: frozenset[tuple[str, str]]) -> tuple[str, str]:  # fmt: skip
    """(answer, why): not finished is undecided; equivalent or slower on the deciding metric keeps plain, and so does
    a worse guardrail; gated is undecided; faster ships unless a guardrail leans worse; anything else is undecided."""
    if (candidate, level) in unfinished or (BASELINE_CHOICE, level) in unfinished:
        return UNDECIDED, "not finished"
    if gate == "ok" and decision in ("equivalent", "slower"):
        return PLAIN, decision
    if any(g.answer == WORSE for g in guards):
        return PLAIN, "guardrail"
    if gate != "ok":
        return UNDECIDED, gate
    if decision == "faster":
        return (UNDECIDED, "guardrail") if any(g.answer == LEANS_WORSE for g in guards) else (SHIP, "faster")
    return UNDECIDED, decision or "no verdict"


# the why a load's choice shows, when its candidates' answers differ: the first that any of them has
_PLAIN_WHY = ("guardrail", "equivalent", "slower")
_UNDECIDED_WHY = ("not finished", NOT_USERS, "inconclusive", "not enough paired data", "guardrail")

# guardrails whose worse answer no acceptance could undo: the first token comes before any draft is verified, and
# failures and failed checks are the candidate's whatever it accepts
_ACCEPTANCE_FREE = ("ttft_s", "error_rate", "correctness")


def not_users_answer(a: CandidateAnswer) -> CandidateAnswer:
    """A candidate whose acceptance is not the user's traffic's (synthetic prompts, ignore_eos, forced, outputs too
    short for its k) is neither shipped nor kept plain on the speed it showed: that speed follows an acceptance the
    user's traffic would not give, so it is undecided, its speed kept for the reader, and more of the same data is
    not what would decide it. Plain stands where a guardrail no acceptance could undo is worse (TTFT, errors,
    correctness); an answer a gate withheld, or the run did not finish, stays as it is."""
    if a.answer == UNDECIDED and a.why not in _MORE_DATA:
        return a
    if a.answer == PLAIN and any(g.answer == WORSE and g.name in _ACCEPTANCE_FREE for g in a.guardrails):
        return a
    return replace(a, answer=UNDECIDED, why=NOT_USERS, needed=None, needed_unit="")


# the undecided answers that more data of the same kind would decide (`needed`)
_MORE_DATA = ("inconclusive", "not enough paired data", "guardrail")


def _load_choice(lv: LevelReport, answers: Sequence[CandidateAnswer]) -> LoadChoice:
    """The choice at one load: the shipping candidate with the largest speedup (the ranking's best when it ships,
    with its ties among those that ship), else undecided if any candidate is, else plain; with why."""
    ship = {a.candidate: a for a in answers if a.answer == SHIP}
    if ship:
        best = lv.best if lv.best in ship else max(ship.values(), key=lambda a: a.speedup).candidate
        a = ship[best]
        tied = tuple(t for t in lv.tied_with_best if t in ship) if best == lv.best else ()
        return LoadChoice(lv.key, lv.label, lv.value, best, "faster", a.speedup, a.speedup_low, a.speedup_high,
                          tied, answer=SHIP)  # fmt: skip
    undecided = [a.why for a in answers if a.answer == UNDECIDED]
    if undecided or not answers:
        why = next((w for w in _UNDECIDED_WHY if w in undecided), undecided[0] if undecided else "no candidate")
        return LoadChoice(lv.key, lv.label, lv.value, UNDECIDED_CHOICE, why, NAN, NAN, NAN, answer=UNDECIDED)
    whys = {a.why for a in answers}
    why = next((w for w in _PLAIN_WHY if w in whys), "not faster")
    return LoadChoice(lv.key, lv.label, lv.value, BASELINE_CHOICE, why, NAN, NAN, NAN, answer=PLAIN)


def _one_per_load(choices: Sequence[LoadChoice], levels: Sequence[LevelReport]
                  ) -> tuple[list[LoadChoice], list[LevelReport]]:  # fmt: skip
    """One choice per load along the axis: a load measured more than once (a search's re-measured probe, `c12-2`)
    keeps its latest measurement where every measurement gives the same answer and choice, and is undecided where
    they differ: each measurement has its own verdict, and picking one of them would choose by chance."""
    out: list[tuple[LoadChoice, LevelReport]] = []
    for ch, lv in zip(choices, levels, strict=True):
        if out and out[-1][1].value == lv.value:
            prev, first = out[-1][0], out[-1][1]
            if (prev.answer, prev.choice) != (ch.answer, ch.choice) or prev.decision == DISAGREE:
                ch = LoadChoice(first.key, prev.label, first.value, UNDECIDED_CHOICE, DISAGREE, NAN, NAN, NAN,
                                answer=UNDECIDED)  # fmt: skip
                lv = first
            out[-1] = (replace(ch, label=prev.label), lv)  # the load's own label (its first), not its last probe's
        else:
            out.append((ch, lv))
    return [c for c, _ in out], [lv for _, lv in out]


def _fewer_bands(choices: list[LoadChoice], levels: Sequence[LevelReport]) -> list[LoadChoice]:
    """Where the best at a load is tied with (not faster beyond the margin than) the candidate chosen at the load
    below, keep that one: the data does not prefer the best, and one configuration over both loads is simpler to
    ship than a switch. Walks upwards, so a run of ties follows the lowest load's choice."""
    out: list[LoadChoice] = []
    for ch, lv in zip(choices, levels, strict=True):
        prev = out[-1].choice if out else None
        if prev is not None and prev != ch.choice and prev in ch.tied:
            r = next(x for x in lv.ranking if x.candidate == prev)
            tied = tuple(t for t in ch.tied if t != prev)
            ch = replace(ch, choice=prev, speedup=r.speedup, speedup_low=r.speedup_low, speedup_high=r.speedup_high,
                         tied=tied, kept_over=ch.choice)  # fmt: skip
        out.append(ch)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Bands, form, and the whole view.
# ---------------------------------------------------------------------------------------------------------------


def recommend(levels: Sequence[LevelReport], candidates: Sequence[CandidateReport], arms: Sequence[ArmView],
              margin: float, criteria: Criteria | None = None, progress: Sequence[ArmProgress] = (),
              incomplete: bool = False,
              not_users: frozenset[str] = frozenset()) -> RecommendationView | None:  # fmt: skip
    """Each candidate's answer at each load, bands of one choice along the load axis, their edges, and the form to
    ship; None without loads. `progress`: how far each arm got (launch and two-URL runs; () for compare, whose
    absent loads are the "missing" gate); `incomplete`: the run did not finish (form "incomplete"); `not_users`: the
    candidates whose acceptance is not the user's traffic's (`not_users_answer`)."""
    if not levels or not candidates:
        return None
    crit = criteria or Criteria()
    axis = _axis(levels)
    # a phased load's windows (verdict.phases) stay in time order, each its own answer: a phase is not a load to
    # merge with another of the same value, nor a band with an edge between loads
    phased = any(r in ("phase", "transition") for lv in levels for r in lv.roles)
    on_axis = list(levels) if phased else sorted((lv for lv in levels if lv.kind == axis), key=lambda lv: lv.value)
    reports = {c.name: c for c in candidates}
    unfinished = frozenset((p.arm, p.level) for p in progress if p.state != "finished")
    answers = [[candidate_answer(lv, c.name, c, crit, unfinished) for c in candidates] for lv in on_axis]
    answers = [[not_users_answer(a) if a.candidate in not_users else a for a in row] for row in answers]
    per_load = [_load_choice(lv, a) for lv, a in zip(on_axis, answers, strict=True)]
    choices = per_load if phased else _fewer_bands(*_one_per_load(per_load, on_axis))
    views = {a.name: a for a in arms}
    # the crossover is the headline's: an edge of the bands only when the headline decides
    bands = _bands(choices, views, reports if crit.decide_on == HEADLINE.name else {}, edges=not phased)
    form, winner = _form(bands, choices, incomplete)
    if phased and form == "per-load":
        form = "per-phase"
    off_above = bands[0].upper_edge if form == "off-above" else None
    pareto = pareto_points(on_axis, {c.level: c.choice for c in choices}, views)
    guards = tuple(g for g in crit.guardrails if g != crit.decide_on)
    limits = crit.slo.limits if crit.slo is not None else {}
    return RecommendationView(axis, margin, tuple(choices), tuple(bands), form, winner, off_above, pareto=pareto,
                              decide_on=crit.decide_on, guardrails=guards,
                              answers=tuple(a for row in answers for a in row), progress=tuple(progress),
                              floors={g: float(crit.floors[g]) for g in guards if g in crit.floors},
                              slo_limits={g: v for g, v in limits.items() if g in guards and v is not None}
                              )  # fmt: skip


def _bands(choices: Sequence[LoadChoice], views: Mapping[str, ArmView], reports: Mapping[str, CandidateReport],
           edges: bool = True) -> list[RecommendationBand]:  # fmt: skip
    """Neighbouring loads of one choice, each with its upper edge (none next to an undecided band). `reports`: the
    candidates whose crossover may place an edge ({} when the deciding metric is not TPOT, the crossover's).
    Without `edges` (a phased load's windows, neighbours in time), no band has one."""
    groups: list[list[LoadChoice]] = []
    for ch in choices:
        if groups and groups[-1][-1].choice == ch.choice:
            groups[-1].append(ch)
        else:
            groups.append([ch])
    bands = []
    for i, g in enumerate(groups):
        above = groups[i + 1] if i + 1 < len(groups) else None
        edged = edges and above is not None and UNDECIDED_CHOICE not in (g[-1].choice, above[0].choice)
        edge = _edge(g[-1], above[0], reports) if edged and above else (None, None, None, None, None, "")
        arm = views.get(g[0].choice)
        plain = "plain (no speculation)" if g[0].choice == BASELINE_CHOICE else UNDECIDED_CHOICE
        bands.append(
            RecommendationBand(
                choice=g[0].choice,
                label=arm.label if arm else plain,
                method=arm.method if arm else None,
                k=arm.num_speculative_tokens if arm else None,
                loads=tuple(c.value for c in g),
                load_labels=tuple(c.label for c in g),
                upper_edge=edge[0],
                upper_edge_low=edge[1],
                upper_edge_high=edge[2],
                edge_between=(edge[3], edge[4]) if edged else None,  # type: ignore[arg-type]
                edge_source=edge[5],
            )
        )
    return bands


def _form(bands: Sequence[RecommendationBand], choices: Sequence[LoadChoice], incomplete: bool
          ) -> tuple[str, str | None]:  # fmt: skip
    """(form, winner): what shape the recommendation takes, and the one candidate it ships where there is one."""
    chosen = [b.choice for b in bands if b.choice not in (BASELINE_CHOICE, UNDECIDED_CHOICE)]
    if incomplete:
        return "incomplete", None
    if any(c.answer == UNDECIDED for c in choices):
        return "undecided", chosen[0] if len(set(chosen)) == 1 else None
    if not chosen:
        return "plain", None
    if len(set(chosen)) > 1:
        return "per-load", None
    if len(bands) == 1:
        return "single", chosen[0]
    if bands[0].choice == chosen[0] and len(bands) == 2:
        return "off-above", chosen[0]
    # one candidate but plain at the low loads (it pays only under load) or in between: no engine form switches
    # speculation on above a load, so ship it where it pays and say where it does not
    return "per-load", chosen[0]


def _edge(below: LoadChoice, above: LoadChoice, reports: dict[str, CandidateReport]
          ) -> tuple[float | None, float | None, float | None, float, float, str]:  # fmt: skip
    """(estimate, low, high, measured load below, measured load above, source) of the edge between two bands."""
    lo, hi = below.value, above.value
    # a candidate band ending in plain: its own crossover, when it crosses between the two loads
    cand = below.choice if below.choice != BASELINE_CHOICE else above.choice
    rep = reports.get(cand)
    cross = rep.crossover if rep is not None else None
    if (cross is not None and cross.status == "crosses" and cross.load is not None
            and lo <= cross.load <= hi):  # fmt: skip
        return cross.load, cross.low, cross.high, lo, hi, f"crossover of {cand}"
    return None, None, None, lo, hi, "between measured loads"


def searched(
    rec: RecommendationView | None, search: SearchView | None, arms: Sequence[ArmView]
) -> RecommendationView | None:
    """With `loads: {search: ...}` the search's answer shapes the recommendation (docs/recommendation.md): its
    probes sit near the crossover on purpose, where per-load verdicts are inconclusive or equivalent, so the edge is
    the search's crossover with its interval ("off-above"), provided the followed candidate ships at the lowest probe
    and is shown not to pay (plain) at no probe below the interval; faster throughout the range with it shipping at
    the lowest probe is "single"; slower throughout with plain at the lowest probe is "plain"; an undetermined
    search is undecided, never an edge. Where the per-load answers contradict the search's, they stand as they are;
    an unfinished run stays "incomplete"."""
    if rec is None or search is None or rec.form == "incomplete":
        return rec
    cand, c = search.candidate, search.crossover
    lowest = min(rec.loads, key=lambda x: x.value, default=None)

    def answer_at(level: str) -> str | None:
        return next((a.answer for a in rec.answers if a.candidate == cand and a.level == level), None)

    at_lowest = answer_at(lowest.level) if lowest is not None else None
    view = next((a for a in arms if a.name == cand), None)
    everywhere = tuple(rec.loads)
    # evidence against the candidate below the interval (plain there: slower, equivalent, or a guardrail worse)
    floor = c.low if c.low is not None else -math.inf
    against = any(answer_at(x.level) == PLAIN and x.value < floor for x in everywhere)
    if search.status == "crosses" and at_lowest == SHIP and not against and c.estimate is not None and view:
        est = c.estimate
        below = tuple(x for x in everywhere if x.value <= est)
        above = tuple(x for x in everywhere if x.value > est)
        between = (below[-1].value, above[0].value) if below and above else None
        source = f"search of {len(search.probes)} probes"
        on = _band(cand or "", view.label, view, below, est, c.low, c.high, between, source)
        bands = tuple(b for b in (on, _band(BASELINE_CHOICE, "plain (no speculation)", None, above)) if b.loads)
        return replace(rec, bands=bands, form="off-above", winner=cand, off_above=est)
    if search.status == "faster throughout" and at_lowest == SHIP and view is not None:
        band = _band(cand or "", view.label, view, everywhere)
        return replace(rec, bands=(band,), form="single", winner=cand, off_above=None)
    if search.status == "slower throughout" and at_lowest == PLAIN:
        band = _band(BASELINE_CHOICE, "plain (no speculation)", None, everywhere)
        return replace(rec, bands=(band,), form="plain", winner=None, off_above=None)
    if search.status == "undetermined":
        edgeless = tuple(
            replace(b, upper_edge=None, upper_edge_low=None, upper_edge_high=None, edge_source="") for b in rec.bands
        )
        return replace(rec, bands=edgeless, form="undecided", off_above=None)
    return rec


def _band(
    choice: str,
    label: str,
    view: ArmView | None,
    loads: Sequence[LoadChoice],
    edge: float | None = None,
    low: float | None = None,
    high: float | None = None,
    between: tuple[float, float] | None = None,
    source: str = "",
) -> RecommendationBand:
    return RecommendationBand(
        choice,
        label,
        view.method if view else None,
        view.num_speculative_tokens if view else None,
        tuple(c.value for c in loads),
        tuple(c.label for c in loads),
        edge,
        low,
        high,
        between,
        source,
    )
