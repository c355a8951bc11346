"""Achieved load and throughput in two-URL mode: each arm over its own blocks, not the time the other arm ran.

Two-URL mode interleaves the arms block by block inside one level, so a figure divided by the level's whole span
counts the other arm's blocks too: two identical servers each looked about half loaded and no verdict was ever given
("load not achieved: 0.47 requests in flight of 1"). The lifecycle records each block's window; the report counts
those. Runs without windows (launch mode, compare, older directories) keep the figures they always had."""

from __future__ import annotations

import dataclasses
import json

import pytest
from tests.fakes.ab_inputs import ArmEffect, interleave_two_url, make_inputs

from speculab.harness.analysis.windows import achieved_concurrency
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_run import RepeatRun
from speculab.harness.verdict.arm_level import repeat_metrics, send_fraction
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions

FAST = ReportOptions(n_resamples=300)
LEVELS = (LevelSpec("concurrency", 1, ("low",)), LevelSpec("concurrency", 4, ("operating",)))
SAME = {"ngram-k4": ArmEffect()}  # A-vs-A: the candidate behaves as the baseline


@pytest.mark.parametrize(("level", "block"), [("c1", 2), ("c4", 16), ("c4", 8)])
def test_interleaved_arms_each_achieve_the_requested_concurrency(level: str, block: int) -> None:
    launch = make_inputs(n_prompts=32, repeats=1, levels=LEVELS, candidates=SAME)
    two_url = interleave_two_url(launch, block)
    blind = interleave_two_url(launch, block, record_windows=False)
    conc = float(level[1:])
    for arm in ("baseline", "ngram-k4"):
        (run,) = two_url.runs_for(arm, level)
        (old,) = blind.runs_for(arm, level)
        assert len(run.windows_s) == 32 // block
        assert achieved_concurrency(run.records, run.windows_s) == pytest.approx(conc)
        if arm == "baseline":  # ABBA: the baseline's blocks have the candidate's between them (B B)
            assert achieved_concurrency(old.records) < 0.7 * conc  # the defect: the other arm's blocks counted
            assert repeat_metrics(old).duration_s > 1.5 * sum(b - a for a, b in run.windows_s)
        (lr,) = launch.runs_for(arm, level)
        # throughput over the arm's own blocks: the same requests in the same per-block time as launched alone
        busy = sum(b - a for a, b in run.windows_s)
        assert repeat_metrics(run).duration_s == pytest.approx(busy)
        assert repeat_metrics(run).output_tok_s == pytest.approx(repeat_metrics(lr).output_tok_s, rel=0.35)


def test_two_url_a_vs_a_reaches_a_verdict_and_says_no_difference() -> None:
    # seed 1: the fake's per-request noise gives "no detectable difference" at both loads when run as launch mode
    launch = make_inputs(n_prompts=32, repeats=1, levels=LEVELS, candidates=SAME, slo=False, seed=1)
    launched = build_report(launch, FAST)
    assert all(lv.comparisons[0].verdict == "no detectable difference" for lv in launched.levels)
    for block in (2, 16):
        r = build_report(interleave_two_url(launch, block), FAST)
        for key in ("c1", "c4"):
            comp = r.level(key).comparison("ngram-k4")
            assert comp.gate == "ok", comp.gate_reason
            assert comp.verdict == "no detectable difference"
            # blocks of 2 at concurrency 4 keep both in flight: all the load 2 prompts allow (#37)
            assert all(a.load_fraction == pytest.approx(1.0) for a in r.level(key).arms)
    blind = build_report(interleave_two_url(launch, 2, record_windows=False), FAST)
    assert blind.level("c1").comparison("ngram-k4").gate == "load not achieved"  # the defect, without windows


def test_rate_loads_are_measured_over_each_arms_blocks() -> None:
    rate = (LevelSpec("rate", 4, ("operating",), "constant"),)
    launch = make_inputs(n_prompts=24, repeats=1, levels=rate, candidates=SAME, slo=False)
    r8 = launch.runs_for("baseline", "r4")[0]
    # three blocks of 8, 50 s apart: the schedule's 0.25 s gaps inside each block
    recs, windows = [], []
    for b in range(3):
        block = [x for x in r8.records if b * 8 <= x.index < (b + 1) * 8]
        d = 50.0 * b - min(x.scheduled_s for x in block)
        moved = [dataclasses.replace(x, scheduled_s=x.scheduled_s + d, sent_s=x.sent_s + d, end_s=x.end_s + d)
                 for x in block]  # fmt: skip
        recs += moved
        windows.append((min(x.scheduled_s for x in moved), max(x.end_s for x in moved)))
    run = RepeatRun("baseline", "r4", 1, tuple(recs), windows_s=tuple(windows))
    assert send_fraction(run.records, run.windows_s) == pytest.approx(1.0)
    from speculab.harness.verdict.arm_level import repeat_send_rate_rps

    assert repeat_send_rate_rps(run) == pytest.approx(4.0)
    assert repeat_send_rate_rps(dataclasses.replace(run, windows_s=())) < 0.3  # over the whole 100 s span


def test_launch_mode_figures_are_unchanged_by_recording_its_one_window() -> None:
    inputs = make_inputs(n_prompts=20, repeats=2)
    windowed = inputs.with_runs(
        [
            dataclasses.replace(r, windows_s=((min(x.sent_s for x in r.records), max(x.end_s for x in r.records)),))
            for r in inputs.runs
        ]
    )
    a, b = build_report(inputs, FAST).to_json(), build_report(windowed, FAST).to_json()
    assert json.loads(a) == json.loads(b)


def test_run_json_without_windows_still_reads() -> None:
    run = RepeatRun("baseline", "c1", 1, windows_s=((1.0, 2.5), (4.0, 5.0)))
    meta = run.meta_dict()
    assert meta["windows_s"] == [[1.0, 2.5], [4.0, 5.0]]
    assert RepeatRun.from_meta(meta).windows_s == ((1.0, 2.5), (4.0, 5.0))
    del meta["windows_s"]  # a run directory written before windows were recorded
    assert RepeatRun.from_meta(meta).windows_s == ()
