"""The recommendation with a search (`loads: {search: ...}`, issue 39 item 4): the search's crossover is the
off-above edge with its interval; never crossing is single or plain; an undetermined search is undecided, no edge."""

from __future__ import annotations

import math

import pytest

from speculab.harness.verdict.model import (
    ArmView,
    CandidateAnswer,
    LoadChoice,
    RecommendationBand,
    RecommendationView,
    SearchCrossover,
    SearchPoint,
    SearchView,
)
from speculab.harness.verdict.recommendation import searched
from speculab.report.recommendation import recommendation_lines, search_line

CAND = "ngram-k4"
ARMS = (
    ArmView("baseline", "plain", "vllm", "", None, None, None, None, 1, None, None, ""),
    ArmView(CAND, "ngram k=4", "vllm", "", None, "ngram", 4, None, 1, None, None, ""),
)
LOADS = (1.0, 7.0, 20.0, 28.0, 48.0)


def _rec(answers: dict[float, str], form: str = "undecided") -> RecommendationView:
    """Per-load answers of the one candidate as the per-load verdicts gave them (inconclusive near the crossover)."""
    choices = tuple(
        LoadChoice(f"c{v:g}", f"concurrency {v:g}", v, {"ship": CAND, "plain": "baseline"}.get(a, "undecided"),
                   "faster" if a == "ship" else "inconclusive", math.nan, math.nan, math.nan, answer=a)
        for v, a in answers.items()
    )  # fmt: skip
    cands = tuple(
        CandidateAnswer(CAND, f"c{v:g}", a, "faster" if a == "ship" else "inconclusive", 1.0, 1.0, 1.0)
        for v, a in answers.items()
    )
    band = RecommendationBand("undecided", "undecided", None, None, LOADS, (), 5.0, 4.0, 6.0, (1.0, 7.0), "x")
    return RecommendationView("concurrency", 0.03, choices, (band,), form, None, None, answers=cands)


def _search(status: str, est: float | None, low: float | None, high: float | None) -> SearchView:
    points = tuple(SearchPoint(v, f"c{v:g}", 0.7 - 0.03 * v, 0.6 - 0.03 * v, 0.8 - 0.03 * v, None) for v in LOADS)
    return SearchView("concurrency", "tpot_s", CAND, SearchCrossover(est, low, high), LOADS, status, 0.95, "fit",
                      1.0, 48.0, 12.0, 10, points, stop="tolerance")  # fmt: skip


MOSTLY = {1.0: "ship", 7.0: "ship", 20.0: "undecided", 28.0: "undecided", 48.0: "plain"}


def test_a_crossing_search_places_the_off_above_edge_with_its_interval():
    rec = searched(_rec(MOSTLY), _search("crosses", 23.5, 20.0, 28.0), ARMS)
    assert rec is not None and rec.form == "off-above" and rec.winner == CAND and rec.off_above == 23.5
    on, off = rec.bands
    assert on.choice == CAND and on.loads == (1.0, 7.0, 20.0) and off.loads == (28.0, 48.0)
    assert (on.upper_edge, on.upper_edge_low, on.upper_edge_high) == (23.5, 20.0, 28.0)
    assert on.edge_source == "search of 5 probes"


@pytest.mark.parametrize(
    ("status", "answers", "form"),
    [
        ("undetermined", MOSTLY, "undecided"),  # never an edge
        ("slower throughout", {v: "plain" for v in LOADS}, "plain"),
        ("faster throughout", {**MOSTLY, 48.0: "ship"}, "single"),
    ],
)
def test_otherwise_the_search_says_single_plain_or_undecided(status, answers, form):
    rec = searched(_rec(answers), _search(status, 23.5 if status == "crosses" else None, 20.0, 28.0), ARMS)
    assert rec is not None and rec.form == form
    if form in ("undecided", "plain"):
        assert rec.off_above is None and all(b.upper_edge is None for b in rec.bands)


@pytest.mark.parametrize(
    "answers",
    [
        {**MOSTLY, 1.0: "undecided"},  # the lowest probe does not ship
        {**MOSTLY, 7.0: "plain"},  # evidence against it below the interval
        {**MOSTLY, 1.0: "plain", 48.0: "ship"},  # the ends contradict a monotone effect
    ],
)
def test_per_load_answers_that_contradict_the_search_stand_as_they_are(answers):
    rec = _rec(answers, form="per-load")
    assert searched(rec, _search("crosses", 23.5, 20.0, 28.0), ARMS) is rec


def test_equivalent_inside_the_interval_is_what_a_crossing_looks_like():
    rec = searched(_rec({**MOSTLY, 20.0: "plain"}), _search("crosses", 23.5, 20.0, 28.0), ARMS)
    assert rec is not None and rec.form == "off-above"


def test_an_unfinished_run_stays_incomplete_and_no_search_changes_nothing():
    rec = _rec(MOSTLY, form="incomplete")
    assert searched(rec, _search("crosses", 23.5, 20.0, 28.0), ARMS) is rec
    assert searched(_rec(MOSTLY), None, ARMS) == _rec(MOSTLY)


def test_the_sentences_give_the_edge_its_interval_and_the_probes():
    labels = {CAND: "ngram k=4"}
    crossing = _search("crosses", 23.5, 20.0, 28.0)
    assert search_line(crossing, labels).startswith(
        "search: ngram k=4 stops paying on TPOT at concurrency 23.5 [20–28] (95% interval), from 5 probes"
    )
    never = search_line(_search("faster throughout", None, 48.0, None), labels)
    assert "never crosses between concurrency 1 and 48: faster at both ends (TPOT at 1: " in never
    assert "and at 48: " in never  # the evidence at each end
    assert search_line(_search("undetermined", None, None, None), labels).startswith("search: undetermined after 5")

    class _Undetermined:
        arms = ARMS
        search = _search("undetermined", None, None, None)
        recommendation = searched(_rec(MOSTLY), search, ARMS)

    assert recommendation_lines(_Undetermined())[0] == (
        "recommendation: undecided: the search did not place the crossover (see its line below)"
    )

    class _Report:
        arms = ARMS
        search = crossing
        recommendation = searched(_rec(MOSTLY), crossing, ARMS)

    head = recommendation_lines(_Report())[0]
    assert (
        head
        == "recommendation: ship ngram k=4, turn it off above concurrency 23.5 [20–28], found by a search of 5 probes"
    )


def test_the_search_follows_the_candidate_with_the_largest_effect_at_its_first_rounds_lowest_load():
    from types import SimpleNamespace as NS

    from speculab.harness.design import LevelSpec
    from speculab.harness.verdict.across_loads import followed_candidate

    def comp(name: str, speedup: float, gate: str = "ok") -> NS:
        return NS(candidate=name, gate=gate, metric=lambda m, s=speedup: NS(speedup=s) if m == "tpot_s" else None)

    probes = [LevelSpec("concurrency", v, ("search",)) for v in (1, 7, 48)]
    reports = {
        "c1": NS(comparisons=[comp("k2", 1.4), comp("k4", 1.9), comp("k8", 2.5, gate="errors")]),
        "c7": NS(comparisons=[comp("k2", 1.3), comp("k4", 1.0)]),
    }
    design = {"rounds": [[1, 7, 48]]}
    assert followed_candidate(design, probes, reports, "tpot_s") == "k4"  # k8 gated: no verdict to follow
    assert followed_candidate({"rounds": []}, probes, reports, "tpot_s") is None


def test_never_crossing_is_said_only_with_a_verdict_at_the_end_it_speaks_for():
    from speculab.harness.verdict.across_loads import _status

    design = {"low": 1, "high": 48}
    assert _status("faster throughout", [1.0, 7.0, 48.0], design) == "faster throughout"
    assert _status("faster throughout", [1.0, 7.0], design) == "undetermined"  # 48 gated: unmeasured beyond 7
    assert _status("slower throughout", [7.0, 48.0], design) == "undetermined"
    assert _status("crosses", [1.0, 7.0], design) == "crosses"
