"""The recommendation per load band (harness.verdict.recommendation) on hand-built per-load verdicts: the bands
follow the per-load choices, equivalent keeps plain, band edges come from the crossover where it crosses between
the two loads, and the form says single config vs load-dependent."""

from __future__ import annotations

import math
from dataclasses import replace

from tests.unit.harness.verdict.test_ranking import FAST

from speculab.harness.verdict.model import (
    BASELINE_CHOICE,
    UNDECIDED_CHOICE,
    ArmView,
    CandidateReport,
    CrossoverView,
    Interval,
    LevelComparison,
    LevelReport,
    Ranked,
    Ratio,
    Report,
)
from speculab.harness.verdict.recommendation import Criteria, recommend
from speculab.report.phrases import recommendation_lines


def arm(name: str, method: str | None = None, k: int | None = None) -> ArmView:
    return ArmView(name, name if method is None else f"{method} k={k}", "speculab", "", None, method, k, None, 1,
                   None, None, "")  # fmt: skip


def cand(name: str, cross: CrossoverView | None = None) -> CandidateReport:
    return CandidateReport(name, name, None, cross, (), None, None, None, (), "")


def level(c: float, answers: dict[str, tuple[str, float]], gate: str = "ok") -> LevelReport:
    """One concurrency level; answers: candidate -> (TPOT decision, speedup). best = the verdict rule's."""
    ranking = tuple(Ranked(n, n, gate, d, s, s * 0.9, s * 1.1, None, d) for n, (d, s) in answers.items())
    faster = {n: s for n, (d, s) in answers.items() if d == "faster" and gate == "ok"}
    best = max(faster, key=faster.__getitem__) if faster else None
    return LevelReport(f"c{c:g}", f"concurrency {c:g}", "concurrency", c, (), (), (), best, ranking)


def crossing(load: float, low: float, high: float) -> CrossoverView:
    return CrossoverView("concurrency", (1, 4, 16), (1.5, 1.1, 0.9), (1.4, 1.0, 0.8), (1.6, 1.2, 1.0), "crosses",
                         load, low, high, False, False, "interp", "log")  # fmt: skip


# the fake's candidate (tests.fakes.ab_inputs) with enough prompts for a decided answer at every load (6 groups of
# 16 at concurrency 16), and no guardrails: the cost, Pareto and band tests read a decided recommendation
DECIDED = replace(FAST, guardrails=())

ARMS = (arm("baseline"), arm("ng4", "ngram", 4), arm("ng8", "ngram", 8), arm("draft", "draft_model", 4))


def test_bands_agree_with_each_loads_verdict_and_equivalent_keeps_plain() -> None:
    levels = [
        level(1, {"ng4": ("faster", 1.6), "draft": ("faster", 1.3)}),
        level(4, {"ng4": ("faster", 1.2), "draft": ("equivalent", 1.01)}),
        level(16, {"ng4": ("equivalent", 0.99), "draft": ("slower", 0.8)}),
    ]
    rec = recommend(levels, [cand("ng4", crossing(9.0, 6.0, 14.0)), cand("draft")], ARMS, 0.03)
    assert rec is not None
    # each load's choice is that load's best (the verdict's), plain where none is faster
    assert [c.choice for c in rec.loads] == [lv.best or BASELINE_CHOICE for lv in levels]
    assert [c.choice for c in rec.loads] == ["ng4", "ng4", BASELINE_CHOICE]
    assert rec.loads[2].decision == "equivalent"
    assert [b.choice for b in rec.bands] == ["ng4", BASELINE_CHOICE]
    assert rec.bands[0].loads == (1, 4) and rec.bands[0].k == 4 and rec.bands[0].method == "ngram"
    # the edge is ng4's crossover, with its interval, since it crosses between 4 and 16
    assert (rec.bands[0].upper_edge, rec.bands[0].upper_edge_low, rec.bands[0].upper_edge_high) == (9.0, 6.0, 14.0)
    assert rec.bands[0].edge_between == (4, 16)
    assert rec.bands[1].upper_edge is None and rec.bands[1].edge_between is None
    assert rec.form == "off-above" and rec.winner == "ng4" and rec.off_above == 9.0


def test_crossover_outside_the_band_gap_is_not_used_as_the_edge() -> None:
    levels = [level(1, {"ng4": ("faster", 1.5)}), level(4, {"ng4": ("slower", 0.9)})]
    # the point estimate crosses 1 beyond 4 (between 4 and 16), but the verdict already stops at 4
    rec = recommend(levels, [cand("ng4", crossing(9.0, 6.0, 14.0))], ARMS, 0.03)
    assert rec is not None
    assert rec.bands[0].upper_edge is None and rec.bands[0].edge_between == (1, 4)
    assert rec.bands[0].edge_source == "between measured loads"
    assert rec.form == "off-above" and rec.off_above is None
    assert rec.loads[1].decision == "slower" and rec.loads[1].answer == "plain"


def test_one_candidate_everywhere_is_a_single_config() -> None:
    levels = [level(c, {"ng4": ("faster", 1.4), "ng8": ("faster", 1.2)}) for c in (1, 4, 16)]
    rec = recommend(levels, [cand("ng4"), cand("ng8")], ARMS, 0.03)
    assert rec is not None
    assert rec.form == "single" and rec.winner == "ng4" and len(rec.bands) == 1 and rec.off_above is None


def test_different_k_per_load_is_a_per_load_schedule() -> None:
    levels = [
        level(1, {"ng4": ("faster", 1.4), "ng8": ("faster", 1.7)}),
        level(4, {"ng4": ("faster", 1.3), "ng8": ("faster", 1.1)}),
        level(16, {"ng4": ("equivalent", 1.0), "ng8": ("slower", 0.8)}),
    ]
    rec = recommend(levels, [cand("ng4"), cand("ng8")], ARMS, 0.03)
    assert rec is not None
    assert [b.choice for b in rec.bands] == ["ng8", "ng4", BASELINE_CHOICE]
    assert [b.k for b in rec.bands] == [8, 4, None]
    assert rec.form == "per-load" and rec.winner is None


def test_nothing_faster_anywhere_is_plain() -> None:
    levels = [level(1, {"ng4": ("equivalent", 1.0)}), level(4, {"ng4": ("slower", 0.8)})]
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03)
    assert rec is not None
    assert rec.form == "plain" and rec.winner is None and len(rec.bands) == 1
    assert [c.decision for c in rec.loads] == ["equivalent", "slower"]
    assert [c.answer for c in rec.loads] == ["plain", "plain"]
    assert all(math.isnan(c.speedup) for c in rec.loads)


def test_a_gated_load_is_undecided_never_plain() -> None:
    levels = [level(1, {"ng4": ("equivalent", 1.0)}), level(4, {"ng4": ("faster", 1.3)}, gate="errors")]
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03)
    assert rec is not None
    assert rec.form == "undecided" and rec.winner is None
    assert [c.answer for c in rec.loads] == ["plain", "undecided"]
    assert [c.choice for c in rec.loads] == [BASELINE_CHOICE, UNDECIDED_CHOICE]
    assert [c.decision for c in rec.loads] == ["equivalent", "errors"]
    # the two loads are two bands, and no edge is drawn next to the undecided one
    assert [b.choice for b in rec.bands] == [BASELINE_CHOICE, UNDECIDED_CHOICE]
    assert all(b.upper_edge is None and b.edge_between is None for b in rec.bands)


def test_first_report_lines_name_the_band_edge_and_the_rule() -> None:
    levels = [level(c, {"ng4": (d, s)}) for c, d, s in ((1, "faster", 1.6), (4, "faster", 1.2), (16, "slower", 0.8))]
    rec = recommend(levels, [cand("ng4", crossing(9.0, 6.0, 14.0))], ARMS, 0.03)

    class R:  # the two fields the lines read
        recommendation = rec
        arms = ARMS

    lines = recommendation_lines(R())
    assert lines[0] == "recommendation: ship ngram k=4, turned off above concurrency ~9"
    assert "band ends near concurrency 9 [6–14] (crossover of ng4)" in lines[1]
    assert lines[2].startswith("  concurrency 16: baseline (slower)")
    assert "±3% margin" in lines[-2] and lines[-2].startswith("  rule: ")
    assert lines[-1].startswith("  floors: ")  # the guardrails' floors under the rule
    assert recommendation_lines(type("Old", (), {"recommendation": None, "arms": ARMS})()) == []


def test_recommendation_survives_summary_json() -> None:
    # Report.from_json is generic over the model: a recommendation written out reads back equal
    levels = [level(1, {"ng4": ("faster", 1.6)}), level(4, {"ng4": ("slower", 0.9)})]
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03)
    from speculab.harness.results.codec import from_data
    from speculab.harness.results.strict_json import json_safe
    from speculab.harness.verdict.model import RecommendationView

    back = from_data(RecommendationView, json_safe(rec))
    assert back.bands == rec.bands and back.form == rec.form
    assert [c.choice for c in back.loads] == [c.choice for c in rec.loads]
    assert Report.__dataclass_fields__["recommendation"].default is None


def test_a_tie_with_the_choice_below_keeps_one_band() -> None:
    levels = [
        level(1, {"ng4": ("faster", 2.0), "ng8": ("faster", 1.3)}),
        level(4, {"ng4": ("faster", 1.45), "ng8": ("faster", 1.5)}),
        level(16, {"ng4": ("slower", 0.9), "ng8": ("slower", 0.8)}),
    ]
    # at 4, ng8's point estimate is higher but the paired test cannot tell it from ng4
    levels[1] = LevelReport(*[getattr(levels[1], f) for f in ("key", "label", "kind", "value", "roles", "arms",
                            "comparisons", "best", "ranking")], tied_with_best=("ng4",))  # fmt: skip
    assert levels[1].best == "ng8"
    rec = recommend(levels, [cand("ng4"), cand("ng8")], ARMS, 0.03)
    assert rec is not None
    assert rec.loads[1].choice == "ng4" and rec.loads[1].kept_over == "ng8" and rec.loads[1].speedup == 1.45
    assert [b.choice for b in rec.bands] == ["ng4", BASELINE_CHOICE] and rec.form == "off-above"


def test_cost_intervals_come_with_repeats_and_are_absent_with_one() -> None:
    from tests.fakes.ab_inputs import make_inputs

    from speculab.harness.verdict.build import build_report

    two = build_report(make_inputs(n_prompts=96, repeats=2), DECIDED).recommendation
    assert two is not None and two.cost is not None
    c = two.cost
    assert c.repeats == 2 and c.plan.baseline.usd_per_month is not None
    assert c.least_favourable is not None and c.most_favourable is not None
    diffs = [p.monthly_difference_usd for p in (c.most_favourable, c.plan, c.least_favourable)]
    assert all(d is not None for d in diffs)
    assert diffs[0] <= diffs[1] <= diffs[2]  # type: ignore[operator]  # the least favourable end costs the most
    one = build_report(make_inputs(n_prompts=96, repeats=1), DECIDED).recommendation
    assert one is not None and one.cost is not None
    assert one.cost.least_favourable is None and one.cost.most_favourable is None and one.cost.repeats == 1


def test_the_cost_line_says_the_interval_or_that_one_repeat_has_none() -> None:
    from tests.fakes.ab_inputs import make_inputs

    from speculab.harness.verdict.build import build_report

    two = [
        ln for ln in recommendation_lines(build_report(make_inputs(n_prompts=96, repeats=2), DECIDED)) if "cost" in ln
    ]
    one = [
        ln for ln in recommendation_lines(build_report(make_inputs(n_prompts=96, repeats=1), DECIDED)) if "cost" in ln
    ]
    assert "across the throughput intervals" in two[0] and "/month" in two[0]
    assert "one repeat: no interval" in one[0]
    # two repeats whose interval's low end meets no SLO (a 2-repeat t-interval can reach 0): said, not silent
    report = build_report(make_inputs(n_prompts=96, repeats=2), DECIDED)
    rec = report.recommendation
    assert rec is not None and rec.cost is not None
    cut = replace(report, recommendation=replace(rec, cost=replace(rec.cost, least_favourable=None)))
    (line,) = [ln for ln in recommendation_lines(cut) if "cost" in ln]
    assert "no range: at an end of the throughput intervals" in line


def test_pareto_points_are_each_arm_at_each_load_with_the_frontier_and_the_shipped_point() -> None:
    from tests.fakes.ab_inputs import make_inputs

    from speculab.harness.verdict.build import build_report

    report = build_report(make_inputs(n_prompts=96, repeats=2), DECIDED)
    rec = report.recommendation
    assert rec is not None
    pts = {(p.arm, p.level): p for p in rec.pareto}
    assert set(pts) == {(a, lv) for a in ("baseline", "ngram-k4") for lv in ("c1", "c4", "c16")}
    for (arm, key), p in pts.items():
        a = report.level(key).arm(arm)  # type: ignore[union-attr]
        assert a is not None
        # the arm's own numbers, not new estimates: 1 / median TPOT, and tokens/s over its GPUs with the interval
        assert math.isclose(p.per_user_tok_s, 1 / a.distributions["tpot_s"].p50)
        assert math.isclose(p.tok_s_per_gpu, a.output_tok_s.estimate / p.gpus)
        assert p.tok_s_per_gpu_low <= p.tok_s_per_gpu <= p.tok_s_per_gpu_high
    # the shipped point at each load is the recommendation's choice there
    chosen = {c.level: c.choice for c in rec.loads}
    assert {k: a for (a, k), p in pts.items() if p.recommended} == chosen
    # the frontier: exactly the points no other point beats on both axes
    xy = [(p.per_user_tok_s, p.tok_s_per_gpu) for p in rec.pareto]
    for p in rec.pareto:
        beaten = any(u >= p.per_user_tok_s and y >= p.tok_s_per_gpu and (u, y) != (p.per_user_tok_s, p.tok_s_per_gpu)
                     for u, y in xy)  # fmt: skip
        assert p.on_frontier is not beaten
    # n-gram at c1 streams 1.8x faster per user than plain at c1: plain's c1 point cannot be on the frontier
    assert not pts[("baseline", "c1")].on_frontier and pts[("ngram-k4", "c1")].on_frontier


def test_an_off_above_deployment_costs_plain_where_plain_was_chosen() -> None:
    from tests.fakes.ab_inputs import make_inputs

    from speculab.harness.verdict.across_loads import capacity_view
    from speculab.harness.verdict.build import build_report

    # the default fake: n-gram 1.8x faster at c1, 1.3x at c4, slower at c16 -> off above c4
    inputs = make_inputs(n_prompts=96, repeats=2)
    report = build_report(inputs, DECIDED)
    rec = report.recommendation
    assert rec is not None and rec.form == "off-above" and rec.cost is not None and rec.cost.by_load
    # the plan is the deployment's: n-gram's measurements at c1/c4, the baseline's at c16
    chosen = {c.value: c.choice for c in rec.loads}
    assert chosen[16] == BASELINE_CHOICE
    cand = next(a for a in inputs.candidates if a.name == rec.cost.candidate)
    assert rec.cost.plan == capacity_view(cand, inputs.baseline, report.levels, inputs, chosen=chosen)
    everywhere = capacity_view(cand, inputs.baseline, report.levels, inputs)
    assert everywhere is not None and rec.cost.plan.candidate.gpus is not None and everywhere.candidate.gpus is not None
    # turned off where it is slower, it can only do as well as running it at every load
    assert rec.cost.plan.candidate.gpus <= everywhere.candidate.gpus
    assert "as recommended per load" in next(ln for ln in recommendation_lines(report) if "cost at" in ln)


# --- issue 36: three answers per load, guardrails beside the deciding metric --------------------------------------


def ratio(metric: str, decision: str, s: float, low: float, high: float, to_decide: float | None = None,
          n_units: int = 24, group_size: int = 1) -> Ratio:  # fmt: skip
    iv = Interval(1 / s, 1 / high, 1 / low, 0.95, "bootstrap-bca", n_units)
    return Ratio(metric, n_units * group_size, 0, iv, iv, s, low, high, 0.01, decision, 0.05, n_units=n_units,
                 group_size=group_size, margin=0.03, decision=decision, to_decide=to_decide)  # fmt: skip


def judged(c: float, tpot: Ratio, *others: Ratio, name: str = "ng4") -> LevelReport:
    """One load where `name` has these paired answers (TPOT first): its comparison and its ranking entry."""
    comp = LevelComparison(
        name, "ok", None, tpot.verdict, (tpot, *others), None, None, None, "", decision=tpot.decision
    )
    ranked = Ranked(name, name, "ok", tpot.verdict, tpot.speedup, tpot.speedup_low, tpot.speedup_high, None,
                    tpot.decision)  # fmt: skip
    best = name if tpot.decision == "faster" else None
    return LevelReport(f"c{c:g}", f"concurrency {c:g}", "concurrency", c, (), (), (comp,), best, (ranked,))


class _R:
    """The fields the recommendation's lines read."""

    def __init__(self, rec: object, levels: list[LevelReport]) -> None:
        self.recommendation, self.arms, self.levels = rec, ARMS, levels


FASTER_TPOT = ratio("tpot_s", "faster", 2.0, 1.9, 2.1)


def test_a_slower_guardrail_keeps_plain_and_the_headline_names_it() -> None:
    levels = [
        judged(1, FASTER_TPOT, ratio("ttft_s", "slower", 0.33, 0.30, 0.36), ratio("e2e_s", "slower", 0.8, 0.7, 0.9))
    ]
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "plain" and rec.winner is None
    (a,) = rec.answers
    assert (a.answer, a.why) == ("plain", "guardrail")
    assert {g.name: g.answer for g in a.guardrails} == {
        "ttft_s": "worse", "e2e_s": "worse", "error_rate": "not measured", "correctness": "not measured"
    }  # fmt: skip
    head = recommendation_lines(_R(rec, levels))[0]
    assert head.startswith("recommendation: keep plain decoding: ngram k=4 at concurrency 1: TPOT 2.00× faster, but")
    assert "but TTFT 0.33× slower [0.30–0.36], E2E 0.80× slower [0.70–0.90]: not recommended" in head
    # without guardrails, the same data ships: the guardrail is what kept it out
    bare = recommend(levels, [cand("ng4")], ARMS, 0.03, Criteria(guardrails=()))
    assert bare is not None and bare.form == "single" and bare.winner == "ng4"


def test_a_guardrail_leaning_worse_holds_the_load_undecided_with_what_would_decide_it() -> None:
    leaning = ratio("ttft_s", "inconclusive", 0.54, 0.38, 1.25, to_decide=4.0)
    rec = recommend([judged(1, FASTER_TPOT, leaning)], [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "undecided" and rec.loads[0].choice == UNDECIDED_CHOICE
    (a,) = rec.answers
    assert (a.answer, a.why, a.needed, a.needed_unit) == ("undecided", "guardrail", 96, "prompts")  # 24 x 4.0
    # an inconclusive guardrail whose estimate is within the margin does not hold it
    near = ratio("ttft_s", "inconclusive", 0.99, 0.90, 1.09, to_decide=3.0)
    ok = recommend([judged(1, FASTER_TPOT, near)], [cand("ng4")], ARMS, 0.03)
    assert ok is not None and ok.form == "single" and ok.answers[0].guardrails[0].answer == "unclear"


def test_a_faster_candidate_held_back_by_a_guardrail_is_named_beside_the_one_shipped() -> None:
    """The demo on CI: ngram 2.62x faster with TTFT leaning worse, eagle 1.32x with none: eagle ships at that load,
    and the band's line says ngram was faster but held back, and why (else it reads as if eagle were the fastest)."""
    leaning = ratio("ttft_s", "inconclusive", 0.94, 0.89, 0.99, to_decide=5.0)
    fast, slow = (
        judged(1, FASTER_TPOT, leaning, name="ng4"),
        judged(1, ratio("tpot_s", "faster", 1.3, 1.1, 1.5), name="ng8"),
    )
    lv = replace(fast, comparisons=fast.comparisons + slow.comparisons, ranking=fast.ranking + slow.ranking)
    rec = recommend([lv], [cand("ng4"), cand("ng8")], ARMS, 0.03)
    assert rec is not None and rec.winner == "ng8" and rec.loads[0].choice == "ng8"
    (band,) = recommendation_lines(_R(rec, [lv]))[1:2]
    assert band.startswith("  concurrency 1: ngram k=8 (1.30× [1.10–1.50]; ngram k=4: TPOT 2.00× faster, but TTFT")
    assert "leans worse" in band and "undecided" in band
    # without the guardrail the faster one ships and nothing is said of a held-back candidate
    bare = recommend([lv], [cand("ng4"), cand("ng8")], ARMS, 0.03, Criteria(guardrails=()))
    assert bare is not None and bare.winner == "ng4"
    assert "ngram k=8" not in recommendation_lines(_R(bare, [lv]))[1]


def test_decide_on_changes_the_deciding_metric() -> None:
    levels = [judged(1, FASTER_TPOT, ratio("ttft_s", "equivalent", 1.0, 0.99, 1.01))]
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03, Criteria(decide_on="ttft_s"))
    assert rec is not None and rec.form == "plain" and rec.loads[0].decision == "equivalent"
    assert rec.decide_on == "ttft_s" and "ttft_s" not in rec.guardrails


def test_an_undecided_load_names_what_would_decide_it() -> None:
    levels = [judged(1, FASTER_TPOT), judged(4, ratio("tpot_s", "inconclusive", 1.7, 0.9, 2.5, 2.0, 3, 4))]
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "undecided" and rec.winner == "ng4" and rec.off_above is None
    assert rec.answers[1].needed == 24 and rec.answers[1].needed_unit == "prompts"  # ceil(3 groups x 2) x 4
    lines = recommendation_lines(_R(rec, levels))
    assert lines[0] == "recommendation: ship ngram k=4 at concurrency 1 only; undecided at concurrency 4 (see below)"
    assert "about 24 prompts in all would likely decide it" in lines[2]
    assert all("band ends" not in ln for ln in lines)


def test_an_unfinished_run_says_what_finished_and_how_to_finish_never_ship_or_keep_plain() -> None:
    from speculab.harness.verdict.model import ArmProgress

    levels = [judged(1, FASTER_TPOT), level(4, {"ng4": ("equivalent", 1.0)})]
    done = [ArmProgress("baseline", "c1", "finished"), ArmProgress("ng4", "c1", "finished"),
            ArmProgress("baseline", "c4", "partial"), ArmProgress("ng4", "c4", "not run")]  # fmt: skip
    rec = recommend(levels, [cand("ng4")], ARMS, 0.03, progress=done, incomplete=True)
    assert rec is not None and rec.form == "incomplete" and rec.winner is None
    assert [c.answer for c in rec.loads] == ["ship", "undecided"]  # c4 did not finish: not its "equivalent"
    lines = recommendation_lines(_R(rec, levels), "runs/x")
    assert not any(ln.startswith(("recommendation: ship", "recommendation: keep plain")) for ln in lines)
    assert lines[1] == "  finished: baseline, ngram k=4 at concurrency 1"
    assert lines[2] == "  not finished: baseline at concurrency 4 (partial); ngram k=4 at concurrency 4 (not run)"
    assert lines[3] == "  finish it: speculab run --resume runs/x"


def test_error_rate_guardrail_is_worse_only_beyond_chance() -> None:
    from types import SimpleNamespace

    from speculab.harness.verdict.recommendation import error_guardrail

    base = SimpleNamespace(sent=200, error=0)
    assert error_guardrail(base, SimpleNamespace(sent=200, error=12), 0.95).answer == "worse"
    assert error_guardrail(base, SimpleNamespace(sent=200, error=1), 0.95).answer == "unclear"
    assert error_guardrail(base, SimpleNamespace(sent=200, error=0), 0.95).answer == "not worse"
    assert error_guardrail(None, None, 0.95).answer == "not measured"


def test_decide_on_comes_from_the_options_else_the_run_else_tpot() -> None:
    from tests.fakes.ab_inputs import make_inputs

    from speculab.harness.verdict.build import build_report

    inputs = make_inputs(n_prompts=12, repeats=1)
    plain = build_report(inputs, FAST)
    assert plain.recommendation is not None and plain.recommendation.decide_on == "tpot_s"
    assert plain.recommendation.guardrails == ("ttft_s", "e2e_s", "error_rate", "correctness")
    run = replace(inputs, setup=replace(inputs.setup, decide_on="e2e_s", guardrails=("ttft_s",)))
    r = build_report(run, FAST)
    assert r.recommendation is not None and r.recommendation.decide_on == "e2e_s"
    assert r.recommendation.guardrails == ("ttft_s",) and r.options["decide_on"] == "e2e_s"
    # the ranking (and so each load's best) is by the deciding metric
    lv = r.levels[0]
    comp = lv.comparison("ngram-k4")
    assert comp is not None and lv.ranking[0].speedup == comp.metric("e2e_s").speedup  # type: ignore[union-attr]
    # the options win over the run; the deciding metric is never its own guardrail
    o = build_report(run, replace(FAST, decide_on="ttft_s")).recommendation
    assert o is not None and o.decide_on == "ttft_s" and o.guardrails == ()


def test_report_decide_on_flag(tmp_path, capsys) -> None:
    import json

    from tests.fakes.ab_inputs import make_inputs

    from fakes.cli_runner import one_line_error, run_main
    from speculab.harness.results.ab_dir import save_inputs

    inputs = make_inputs(n_prompts=12, repeats=1)
    save_inputs(tmp_path, inputs)
    code, _, err = run_main(capsys, "report", str(tmp_path), "--decide-on", "tpott")
    assert code == 2 and "--decide-on: unknown metric 'tpott'; did you mean `tpot`?" in one_line_error(err)
    assert not (tmp_path / "summary.json").exists()
    code, out, err = run_main(capsys, "report", str(tmp_path), "--decide-on", "e2e")
    assert code == 0, err
    assert json.loads((tmp_path / "summary.json").read_text())["recommendation"]["decide_on"] == "e2e_s"
    assert "rule: ships where E2E is faster" in out


def test_a_load_measured_again_is_one_load_undecided_where_its_measurements_disagree() -> None:
    """A search measures a load again (`c12-2`): the recommendation has one choice per load, the latest measurement's
    where every measurement agrees, undecided where they differ (picking one verdict would choose by chance), and
    the band line says so once under the load's own label (it named the last probe for every measurement before)."""
    again = replace(level(12, {"ng4": ("faster", 1.3)}), key="c12-2", label="concurrency 12 (probe 2)")
    agree = [level(1, {"ng4": ("faster", 1.5)}), level(12, {"ng4": ("faster", 1.2)}), again]
    rec = recommend(agree, [cand("ng4")], ARMS, 0.03)
    assert rec is not None and [c.value for c in rec.loads] == [1, 12]
    assert rec.loads[1].level == "c12-2" and rec.loads[1].answer == "ship" and rec.form == "single"
    assert rec.loads[1].label == "concurrency 12"  # the load's own label, not its last probe's
    differ = [level(1, {"ng4": ("faster", 1.5)}), level(12, {"ng4": ("slower", 0.8)}), again]
    rec = recommend(differ, [cand("ng4")], ARMS, 0.03)
    assert rec is not None and [c.value for c in rec.loads] == [1, 12]
    assert rec.loads[1].choice == UNDECIDED_CHOICE and rec.loads[1].decision == "its measurements disagree"
    assert rec.form == "undecided"

    class R:  # the fields the lines read
        recommendation = rec
        arms = ARMS
        levels = tuple(differ)

    lines = recommendation_lines(R())
    assert lines[0] == "recommendation: ship ngram k=4 at concurrency 1 only; undecided at concurrency 12 (see below)"
    said = "  concurrency 12: undecided (its measurements disagree: 2 measurements at this load gave different answers)"
    assert [ln for ln in lines[1:] if "concurrency 12" in ln] == [said], lines
