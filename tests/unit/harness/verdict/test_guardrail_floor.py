"""Guardrails of practical size (issue 50 item 5), on hand-built per-load verdicts: a time guardrail breached beyond
its relative margin by a loss within its absolute floor (or with the candidate within its SLO) does not hold the
candidate back, and the breach is shown (its answer `tolerated`, its record in the recommendation and the report's
warnings, its words in the headline and under the load); a loss beyond the floor still keeps plain."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tests.unit.harness.verdict.test_recommendation import ARMS, cand, judged, ratio

from speculab.config import SloTargets
from speculab.harness.results.codec import from_data
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import WarningKind
from speculab.harness.stats import Interval
from speculab.harness.stats.sample import describe
from speculab.harness.verdict.build import tolerated
from speculab.harness.verdict.model import ArmLevel, LevelReport, MemoryView, RecommendationView, Series
from speculab.harness.verdict.recommendation import Criteria, recommend
from speculab.report.phrases import guardrail_lines, recommendation_lines, warning_text

NO_IV = Interval(math.nan, math.nan, math.nan, 0.95, "t", 0)


def arm_at(name: str, p50: dict[str, float], sent: int = 24, series: Series | None = None) -> ArmLevel:
    """One arm at one load whose every request took `p50` (seconds per metric); `series`: its requests' values."""
    return ArmLevel(name, 1, 0, sent, sent, 0, 0.0, {}, "", None, None, 1.0, 1.0,
                    {m: describe([v] * sent) for m, v in p50.items()}, NO_IV, NO_IV, NO_IV, None, None, 0, (), {},
                    None, MemoryView(), series or Series())  # fmt: skip


def with_arms(lv: LevelReport, *arms: ArmLevel) -> LevelReport:
    return replace(lv, arms=arms)


class _R:
    """The fields the recommendation's lines read."""

    def __init__(self, rec: RecommendationView | None, levels: list[LevelReport]) -> None:
        self.recommendation, self.arms, self.levels = rec, ARMS, levels


# Issue 50's scripted engine: TPOT 2.50x faster, E2E 2.34x faster (0.56 s against 1.31 s), and the speculative
# first step 4 ms slower: TTFT 0.93x [0.93-0.94] on a baseline TTFT of 53 ms
ISSUE_50 = with_arms(
    judged(1, ratio("tpot_s", "faster", 2.5, 2.45, 2.55), ratio("ttft_s", "slower", 0.93, 0.925, 0.94),
           ratio("e2e_s", "faster", 2.34, 2.3, 2.38)),
    arm_at("baseline", {"ttft_s": 0.053, "e2e_s": 1.31, "tpot_s": 0.02}),
    arm_at("ng4", {"ttft_s": 0.057, "e2e_s": 0.56, "tpot_s": 0.008}),
)  # fmt: skip

# Issue 36's case: TPOT 2x faster, but TTFT 3x slower (100 ms -> 300 ms) and E2E slower (0.35 s -> 0.42 s)
ISSUE_36 = with_arms(
    judged(1, ratio("tpot_s", "faster", 2.0, 1.9, 2.1), ratio("ttft_s", "slower", 0.33, 0.30, 0.36),
           ratio("e2e_s", "slower", 0.83, 0.80, 0.86)),
    arm_at("baseline", {"ttft_s": 0.100, "e2e_s": 0.35, "tpot_s": 0.008}),
    arm_at("ng4", {"ttft_s": 0.300, "e2e_s": 0.42, "tpot_s": 0.004}),
)  # fmt: skip


def test_a_few_milliseconds_of_ttft_do_not_hold_back_a_candidate_much_faster_end_to_end() -> None:
    rec = recommend([ISSUE_50], [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "single" and rec.winner == "ng4"
    (a,) = rec.answers
    assert (a.answer, a.why) == ("ship", "faster")
    guards = {g.name: g for g in a.guardrails}
    ttft = guards["ttft_s"]
    assert ttft.answer == "tolerated" and guards["e2e_s"].answer == "not worse"
    assert ttft.loss_s == pytest.approx(0.053 * (1 / 0.93 - 1)) and ttft.floor_s == 0.02  # ~4.0 ms, against 20 ms
    # the breach is a record: in the recommendation, among the report's warnings, and in summary.json's form
    assert ttft.breach is not None and ttft.breach.kind == WarningKind.GUARDRAIL_TOLERATED
    assert ttft.breach.fields["answer"] == "worse" and tolerated(rec) == [ttft.breach]
    assert from_data(RecommendationView, json_safe(rec)).answers == rec.answers
    assert warning_text(ttft.breach) == (
        "ng4 at concurrency 1: TTFT 0.93× slower [0.93–0.94], +4.0 ms a request (within the 20.0 ms floor): beyond "
        "the ±3% margin, not held against it"
    )
    # shown where breaches show: the headline, the line under the load's table, and the rule
    lines = recommendation_lines(_R(rec, [ISSUE_50]))
    assert lines[0] == (
        "recommendation: ship ngram k=4 at every measured load; not held against it: TTFT 0.93× slower [0.93–0.94], "
        "+4.0 ms a request (within the 20.0 ms floor) at concurrency 1"
    )
    assert lines[-2].startswith("  rule: ships where TPOT is faster beyond the ±3% margin")
    assert lines[-1] == (
        "  floors: a time guardrail counts only where a request also loses more than TTFT 20.0 ms, E2E 20.0 ms"
    )
    (under,) = guardrail_lines(_R(rec, [ISSUE_50]), ISSUE_50)
    assert "ngram k=4: ship · guardrails: TTFT tolerated: 0.93× slower [0.93–0.94], +4.0 ms a request" in under


def test_without_a_floor_the_same_breach_keeps_plain_as_before() -> None:
    """The floor is what ships it: the margin alone (`guardrail_floor: 0`) gives issue 50's verdict back."""
    rec = recommend([ISSUE_50], [cand("ng4")], ARMS, 0.03, Criteria(floors={}))
    assert rec is not None and rec.form == "plain" and tolerated(rec) == []
    head = recommendation_lines(_R(rec, [ISSUE_50]))[0]
    assert head == (
        "recommendation: keep plain decoding: ngram k=4 at concurrency 1: TPOT 2.50× faster, but TTFT 0.93× slower "
        "[0.93–0.94]: not recommended"
    )


def test_a_loss_beyond_the_floor_still_keeps_plain() -> None:
    """Issue 36's case: 200 ms more to the first token and 70 ms more end to end are beyond the 20 ms floor."""
    rec = recommend([ISSUE_36], [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "plain" and rec.winner is None
    (a,) = rec.answers
    assert (a.answer, a.why) == ("plain", "guardrail")
    guards = {g.name: g for g in a.guardrails}
    assert guards["ttft_s"].answer == guards["e2e_s"].answer == "worse" and tolerated(rec) == []
    assert guards["ttft_s"].loss_s == pytest.approx(0.1 * (1 / 0.33 - 1)) and guards["ttft_s"].floor_s == 0.02
    head = recommendation_lines(_R(rec, [ISSUE_36]))[0]
    assert head.startswith("recommendation: keep plain decoding: ngram k=4 at concurrency 1: TPOT 2.00× faster, but")
    assert "TTFT 0.33× slower [0.30–0.36], E2E 0.83× slower [0.80–0.86]: not recommended" in head


def test_a_bar_that_the_floor_raises_is_the_one_an_undecided_answer_is_judged_against() -> None:
    """TTFT 0.70x [0.55-0.90] on 100 ms: beyond the 3 % margin throughout (worse), but only its estimate is beyond the
    floor's bar (20 ms of 100 ms: 1 / 1.2 = 0.83): it leans worse, and the load is undecided."""
    lv = with_arms(
        judged(1, ratio("tpot_s", "faster", 2.0, 1.9, 2.1), ratio("ttft_s", "slower", 0.70, 0.55, 0.90)),
        arm_at("baseline", {"ttft_s": 0.100}),
    )
    rec = recommend([lv], [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "undecided"
    (a,) = rec.answers
    ttft = next(g for g in a.guardrails if g.name == "ttft_s")
    assert (a.answer, a.why, ttft.answer, ttft.floor_s) == ("undecided", "guardrail", "leans worse", 0.02)
    assert ttft.to_decide is not None and ttft.to_decide > 1 and a.needed is not None


def test_without_the_baselines_median_the_margin_alone_decides() -> None:
    """A load with no baseline arm kept (nothing turns the speedup into seconds): no floor is claimed."""
    rec = recommend([replace(ISSUE_50, arms=())], [cand("ng4")], ARMS, 0.03)
    assert rec is not None and rec.form == "plain"
    assert next(g for g in rec.answers[0].guardrails if g.name == "ttft_s").loss_s is None


def slo_level(candidate_ttfts: tuple[float, ...]) -> LevelReport:
    """TTFT 3x slower (100 ms -> 300 ms) but E2E faster; the candidate's 24 requests took `candidate_ttfts`."""
    return with_arms(
        judged(1, ratio("tpot_s", "faster", 2.0, 1.9, 2.1), ratio("ttft_s", "slower", 0.33, 0.30, 0.36),
               ratio("e2e_s", "faster", 1.5, 1.4, 1.6)),
        arm_at("baseline", {"ttft_s": 0.100, "e2e_s": 1.5}),
        arm_at("ng4", {"ttft_s": 0.300, "e2e_s": 1.0}, series=Series(ttft_s=candidate_ttfts)),
    )  # fmt: skip


def test_with_an_slo_a_breach_is_judged_against_it_instead_of_the_floor() -> None:
    slo = Criteria(slo=SloTargets(ttft_s=0.5, attainment=0.9))
    # 200 ms more is beyond the floor, but every request is within the 500 ms TTFT SLO: shipped, the breach shown
    within = recommend([slo_level((0.3,) * 24)], [cand("ng4")], ARMS, 0.03, slo)
    assert within is not None and within.form == "single" and within.slo_limits == {"ttft_s": 0.5}
    ttft = next(g for g in within.answers[0].guardrails if g.name == "ttft_s")
    assert (ttft.answer, ttft.slo_limit_s, ttft.floor_s) == ("tolerated", 0.5, None)
    assert ttft.breach is not None and ttft.breach.fields["within_slo"] == 1.0
    assert "(100% of its requests within the SLO's 500.0 ms on TTFT, 90% asked)" in warning_text(ttft.breach)
    floors = recommendation_lines(_R(within, [slo_level((0.3,) * 24)]))[-1]
    assert floors.endswith("more than E2E 20.0 ms; TTFT only where the candidate misses its SLO (500.0 ms)")
    # 4 of 24 requests past 500 ms: 83 % within, below the 90 % asked: the breach counts, whatever the floor
    outside = recommend([slo_level((0.3,) * 20 + (0.6,) * 4)], [cand("ng4")], ARMS, 0.03, slo)
    assert outside is not None and outside.form == "plain" and outside.answers[0].why == "guardrail"
    ttft = next(g for g in outside.answers[0].guardrails if g.name == "ttft_s")
    assert (ttft.answer, ttft.slo_limit_s, ttft.breach) == ("worse", 0.5, None)
    # an SLO without a TTFT limit leaves TTFT to its floor: 200 ms is beyond it
    e2e_only = recommend([slo_level((0.3,) * 24)], [cand("ng4")], ARMS, 0.03, Criteria(slo=SloTargets(e2e_s=2.0)))
    assert e2e_only is not None and e2e_only.form == "plain"
