"""summary.json `slo_capacity` (issue 39 item 3): each arm's highest load within its SLO, from a fake run whose
per-arm TPOT at each load is scripted (tests/fakes/ab_inputs.py: base TPOT 20 ms x lognormal(0.4) per prompt)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fakes.ab_inputs import ArmEffect, make_inputs
from speculab.harness.design import LevelSpec
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report

CAND = "ngram-k4"


def _inputs(**slo: float | None):
    # the candidate within a 30 ms TPOT limit for ~99 % of prompts at 1 and 2, ~13 % at 4; the baseline for ~99.7 %
    # at 1 and ~3 % at 2 (P(lognormal) <= limit, load slowdown 2 % a stream). 120 prompts: 30 groups at 4, enough to
    # decide a load within a 0.9 target when every group meets it
    ab = make_inputs(
        n_prompts=120,
        levels=tuple(LevelSpec("concurrency", c, ("sweep",)) for c in (1, 2, 4)),
        baseline=ArmEffect(tpot_factor={"c1": 0.5, "c2": 2.0, "c4": 2.0}),
        candidates={CAND: ArmEffect(tpot_factor={"c1": 0.5, "c2": 0.6, "c4": 2.0}, tokens_per_chunk=3)},
    )
    setup = replace(ab.setup, slo_ttft_s=None, slo_tpot_s=0.03, slo_attainment=0.9)
    return replace(ab, setup=replace(setup, **slo))


def test_each_arm_gets_its_highest_load_within_slo_with_an_interval_between_the_loads_around_it():
    cap = build_report(_inputs()).slo_capacity
    assert cap is not None and set(cap) == {"baseline", CAND}
    base, cand = cap["baseline"], cap[CAND]
    assert base.status == "crosses" and base.low == 1.0 and base.high == 2.0 and 1.0 <= base.estimate <= 2.0
    assert cand.status == "crosses" and cand.low == 2.0 and cand.high == 4.0 and 2.0 <= cand.estimate <= 4.0
    assert cand.target == 0.9 and dict(cand.metric_limits) == {"tpot_s": 0.03} and cand.kind == "concurrency"


def test_an_slo_met_everywhere_or_nowhere_is_censored_at_the_loads_measured():
    loose = build_report(_inputs(slo_tpot_s=10.0)).slo_capacity
    assert loose is not None and all(c.status == "meets throughout" and c.low == 4.0 and c.high is None
                                     for c in loose.values())  # fmt: skip
    tight = build_report(_inputs(slo_tpot_s=1e-4)).slo_capacity
    assert tight is not None and all(c.status == "misses throughout" and c.low is None and c.high == 1.0
                                     for c in tight.values())  # fmt: skip
    assert all(c.estimate is None and (c.lowest, c.highest) == (1.0, 4.0) for c in tight.values())


def test_without_an_slo_there_is_no_capacity_and_summary_json_round_trips_it():
    assert build_report(_inputs(slo_tpot_s=None)).slo_capacity is None
    report = build_report(_inputs())
    d = report.to_dict()
    assert set(d["slo_capacity"][CAND]) >= {"estimate", "low", "high", "status", "target", "metric_limits"}
    assert d["search"] is None  # a fixed sweep: the capacity is top-level only
    assert Report.from_json(report.to_json()).slo_capacity == report.slo_capacity


@pytest.mark.parametrize("attainment", [0.5, 0.95])
def test_the_target_moves_the_edge(attainment):
    # the baseline at 2 meets ~3 %: above neither target; at 1 ~99.7 %: above both
    cap = build_report(_inputs(slo_attainment=attainment)).slo_capacity
    assert cap is not None and cap["baseline"].target == attainment and cap["baseline"].high == 2.0


def test_a_few_groups_all_within_the_slo_do_not_decide_it():
    # 24 prompts: 6 groups of 4 at the top, every one within a loose limit; as many all-within groups come from a
    # load at 0.85 a third of the time when a batch's requests meet or miss together, so the top is not decided
    ab = _inputs(slo_tpot_s=10.0)
    few = replace(ab, setup=replace(ab.setup, items=ab.setup.items[:24]))
    few = replace(few, runs=tuple(replace(r, records=tuple(x for x in r.records if x.index < 24)) for r in few.runs))
    cap = build_report(few).slo_capacity
    assert cap is not None and cap[CAND].status == "undetermined" and cap[CAND].high is None
