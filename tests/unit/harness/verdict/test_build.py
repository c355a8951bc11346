"""build_report on synthetic inputs with known effects: it must find what was put in, and refuse verdicts it cannot
give (no drafts, load not achieved, errors, missing runs)."""

from __future__ import annotations

import json
import math

import pytest
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.analysis.windows import achieved_concurrency
from speculab.harness.design import LevelSpec
from speculab.harness.records import ChunkEvent, RequestRecord
from speculab.harness.results.ab_run import RepeatRun
from speculab.harness.stats import Distribution, Interval
from speculab.harness.verdict.arm_level import combine_acceptance
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions, WarningKind
from speculab.report.phrases import gated_verdict, reason_text, verdict_line, warning_lines, warning_text

FAST = ReportOptions(n_resamples=600)
SPEEDUPS = {"c1": 1.8, "c4": 1.3, "c16": 0.9}


@pytest.fixture(scope="module")
def faster_report() -> Report:
    cand = ArmEffect(
        tpot_factor={k: 1 / v for k, v in SPEEDUPS.items()}, tokens_per_chunk=3, acceptance_length=2.9, gpu_bytes=20.4e9
    )
    # 96 prompts: at concurrency 16 the verdict's units are groups of 16 prompts sent together, and it needs 6
    return build_report(make_inputs(n_prompts=96, repeats=2, candidates={"ngram-k4": cand}), FAST)


def test_faster_arm_detected_with_true_speedup_inside_interval(faster_report: Report):
    for key, true in SPEEDUPS.items():
        comp = faster_report.level(key).comparison("ngram-k4")
        tp = comp.metric("tpot_s")
        assert comp.gate == "ok"
        assert tp.speedup_low <= true <= tp.speedup_high, (key, tp)
        assert tp.verdict == ("faster" if true > 1 else "slower")
        assert comp.verdict == tp.verdict
        # TTFT is untouched by the fake's speculation: its ratio stays near 1
        assert abs(math.log(comp.metric("ttft_s").speedup)) < 0.05


def test_crossover_between_bracketing_loads(faster_report: Report):
    x = faster_report.candidates[0].crossover
    assert x is not None and x.status == "crosses" and x.axis == "concurrency"
    # speedup 1.3 at 4 and 0.9 at 16 (log-load interpolation): the crossing lies between them
    assert 4 < x.load < 16 and x.low <= x.load <= x.high


def test_acceptance_what_if_memory_and_cost(faster_report: Report):
    c = faster_report.candidates[0]
    assert c.acceptance.active and c.acceptance.acceptance_length == pytest.approx(2.9, rel=1e-6)
    assert "vllm:spec_decode_* counters" in c.acceptance.source
    assert len(c.acceptance.per_position) == 4
    assert c.what_if and c.what_if[0].observed_k == 4
    assert 1 <= c.what_if[0].recommended_k <= 8
    op = faster_report.level("c16").comparison("ngram-k4")
    assert op.memory_delta_bytes == pytest.approx(0.4e9, rel=0.05) and op.memory_kind == "gpu"
    # slower per token at 16 -> fewer tokens/s -> dearer per token
    assert op.cost_ratio is not None and op.cost_ratio.estimate > 1
    assert c.plan is not None and c.plan.target_rate_rps == 40.0


def test_verdict_line_names_loads_intervals_and_sources(faster_report: Report):
    line = verdict_line(faster_report, faster_report.candidates[0])
    assert line.startswith("ngram k=4: TPOT 1.")
    assert "faster [" in line and "at concurrency 1" in line and "at concurrency 16" in line
    assert "crossover ≈" in line and "acceptance length 2.90 (vllm:spec_decode_* counters" in line
    assert "memory +" in line and "$/1M tokens" in line and "correctness: identical outputs" in line


def test_a_vs_a_says_no_difference():
    same = ArmEffect(acceptance_length=2.0)  # speculating, but no faster: the verdict must be "no difference"
    r = build_report(make_inputs(n_prompts=96, repeats=1, candidates={"ngram-k4": same}), FAST)
    for key in ("c1", "c16"):
        comp = r.level(key).comparison("ngram-k4")
        tp = comp.metric("tpot_s")
        assert comp.gate == "ok" and tp.verdict == "no detectable difference", (key, tp)
        assert tp.speedup_low <= 1 <= tp.speedup_high
        assert tp.min_detectable_change < 0.1
        assert tp.decision == "equivalent" and tp.margin == 0.03, (key, tp)  # within +-3 %: affirmed, not "no diff."
    assert "TPOT equivalent at concurrency 1: no difference larger than ±3%" in verdict_line(r, r.candidates[0])
    assert "crossover" not in verdict_line(r, r.candidates[0])  # nothing was faster: no crossover to speak of


def test_no_drafts_is_not_active_never_no_difference():
    idle = ArmEffect(acceptance_length=1.0)  # counters present, zero drafts
    r = build_report(make_inputs(n_prompts=20, repeats=1, candidates={"ngram-k4": idle}), FAST)
    for lv in r.levels:
        comp = lv.comparison("ngram-k4")
        assert comp.gate == "not active" and comp.verdict == "speculation not active"
    line = verdict_line(r, r.candidates[0])
    assert "speculation not active at concurrency 1" in line and "no detectable difference" not in line
    assert any("did not speculate" in w for w in warning_lines(r.warnings))


def test_underachieved_rate_load_gets_no_verdict():
    levels = (LevelSpec("concurrency", 1, ("low",)), LevelSpec("rate", 8, ("operating",)))
    slow = ArmEffect(tpot_factor={"c1": 0.5, "r8": 0.5}, acceptance_length=2.5, achieved_fraction={"r8": 0.8})
    r = build_report(make_inputs(n_prompts=30, repeats=1, levels=levels, candidates={"ngram-k4": slow}), FAST)
    ok, gated = r.level("c1").comparison("ngram-k4"), r.level("r8").comparison("ngram-k4")
    assert ok.gate == "ok" and ok.verdict == "faster"
    assert gated.gate == "load not achieved" and gated.verdict == "no verdict"
    assert gated.gate_reason is not None and gated.gate_reason.kind == WarningKind.GATE_LOAD_NOT_ACHIEVED
    assert gated.gate_reason.fields["achieved"] == pytest.approx(6.4, rel=0.02)
    assert "6.4 req/s sent of 8 requested" in reason_text(gated.gate_reason)
    assert gated_verdict(gated).startswith("no verdict: ngram k=4: 6.4 req/s sent of 8 requested, 80% of the schedule")
    assert r.level("r8").arm("ngram-k4").load_fraction == pytest.approx(0.8, rel=0.02)
    assert "no verdict at 8 req/s (load not achieved)" in verdict_line(r, r.candidates[0])


def test_error_rate_gate():
    flaky = ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5, error_rate=0.3)
    r = build_report(make_inputs(n_prompts=30, repeats=1, candidates={"ngram-k4": flaky}), FAST)
    comp = r.level("c1").comparison("ngram-k4")
    assert comp.gate == "errors" and comp.gate_reason is not None
    assert comp.gate_reason.kind == WarningKind.GATE_ERROR_RATE and comp.gate_reason.fields["max_error_rate"] == 0.02
    said = reason_text(comp.gate_reason)
    assert "error rate" in said and "2% gate" in said and "first: http: 503 Service Unavailable" in said
    assert any(f"no verdict — {said}" in w for w in warning_lines(r.warnings))  # the gate's warning: the same words


def test_partial_run_says_what_is_missing():
    inputs = make_inputs(n_prompts=20, repeats=2, skip=(("ngram-k4", "c16"),))
    # one more repeat cut short: records but no counters
    runs = list(inputs.runs)
    i = next(j for j, r in enumerate(runs) if r.arm == "baseline" and r.level == "c4" and r.repeat == 2)
    runs[i] = RepeatRun("baseline", "c4", 2, runs[i].records[:5], interrupted=True)
    r = build_report(inputs.with_runs(runs), FAST)
    missing = [warning_text(m) for m in r.missing]
    assert "ngram k=4 at concurrency 16: no runs" in missing
    assert any("repeat(s) [2] interrupted" in m for m in missing)
    assert {m.kind for m in r.missing} == {WarningKind.NO_RUNS, WarningKind.REPEATS_CUT}
    assert r.interrupted
    c16 = r.level("c16").comparison("ngram-k4")
    assert c16.gate == "missing" and c16.metrics == ()
    assert r.level("c1").comparison("ngram-k4").verdict == "faster"


def test_json_round_trip_is_exact(faster_report: Report):
    text = faster_report.to_json()
    json.loads(text)  # strict JSON: NaN became null
    assert "NaN" not in text and "Infinity" not in text
    again = Report.from_json(text)
    assert again.to_json() == text
    assert again.level("c1").comparison("ngram-k4").metric("tpot_s").verdict == "faster"
    # typed all the way down, not dicts: the HTML renders from a re-read summary the same way
    assert isinstance(again.level("c1").arm("baseline").distributions["tpot_s"], Distribution)
    assert isinstance(again.level("c1").arm("baseline").output_tok_s, Interval)
    assert again == faster_report
    with pytest.raises(ValueError, match="schema"):
        Report.from_json(json.dumps({"schema": "other"}))


def test_report_is_deterministic():
    inputs = make_inputs(n_prompts=12, repeats=1)
    assert build_report(inputs, FAST).to_json() == build_report(inputs, FAST).to_json()


def test_two_candidates_each_compared_to_the_baseline():
    cands = {
        "ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5),
        "draft_model-k4": ArmEffect(tpot_factor={"c1": 2.0}, acceptance_length=1.5),
    }
    r = build_report(make_inputs(n_prompts=20, repeats=1, candidates=cands), FAST)
    c1 = r.level("c1")
    assert c1.comparison("ngram-k4").verdict == "faster" and c1.comparison("draft_model-k4").verdict == "slower"
    assert [c.label for c in r.candidates] == ["ngram k=4", "draft_model k=4"]


def test_achieved_concurrency_counts_in_flight_while_sending():
    def rec(i: int, sent: float, end: float) -> RequestRecord:
        return RequestRecord(i, sent, sent, end, chunks=(ChunkEvent(end, "x", 1),))

    # two slots always busy from t=0 to t=3 (the last send), then the tail drains
    recs = [rec(0, 0, 1), rec(1, 0, 2), rec(2, 1, 3), rec(3, 2, 4), rec(4, 3, 5)]
    assert achieved_concurrency(recs) == pytest.approx(2.0)
    # all sent at once (n requests at concurrency n): both in flight until the first ends (#37)
    assert achieved_concurrency([rec(0, 0, 1), rec(1, 0, 1)]) == pytest.approx(2.0)
    assert achieved_concurrency([rec(0, 0, 0)]) is None  # a span of nothing: nothing to measure


def test_combine_acceptance_sums_counters_over_repeats():
    from speculab.harness.records import AcceptanceSummary

    a = AcceptanceSummary(
        "vllm:spec_decode_* counters (server-wide delta)", True, 100, 400, 200, 0.5, 3.0, (0.8, 0.6, 0.4, 0.2)
    )
    b = AcceptanceSummary(
        "vllm:spec_decode_* counters (server-wide delta)", True, 300, 1200, 300, 0.25, 2.0, (0.5, 0.3, 0.15, 0.05)
    )
    v = combine_acceptance([a, b])
    assert v.drafts == 400 and v.accepted_tokens == 500
    assert v.acceptance_length == pytest.approx(1 + 500 / 400) and v.acceptance_rate == pytest.approx(500 / 1600)
    assert v.per_position[0] == pytest.approx((0.8 * 100 + 0.5 * 300) / 400)
    idle = AcceptanceSummary("vllm:spec_decode_* counters (server-wide delta)", False, 0, 0, 0)
    assert not combine_acceptance([idle, idle]).active
    mixed = combine_acceptance([a, idle])
    assert mixed.active and mixed.inactive_repeats == 1
    assert combine_acceptance([]) is None
    g = combine_acceptance(
        [
            AcceptanceSummary(
                "sglang gauges (server-wide, recent window; read, not a delta)", True, acceptance_length=2.0
            )
        ]
    )
    assert g.approximate and g.acceptance_length == 2.0 and math.isnan(g.drafts or math.nan)


def test_two_url_mode_unverified_change_and_unknown_acceptance():
    """An engine that reports nothing about speculation, behind two URLs: verdicts are given, but the report says
    the single change is unverified and that speculation could not be confirmed (hinting when chunks look plain)."""
    from dataclasses import replace

    from speculab.harness.results.ab_run import ChangeCheck, not_checked

    silent = ArmEffect(tpot_factor={"c1": 0.9, "c4": 0.9, "c16": 0.9})  # no counters, one token per chunk
    inputs = make_inputs(n_prompts=20, repeats=1, candidates={"ngram-k4": silent})
    arms = tuple(replace(a, command=None, server_info={"version": "0.9"}) for a in inputs.arms)
    inputs = replace(
        inputs,
        arms=arms,
        setup=replace(inputs.setup, two_url_mode=True),
        changes=(ChangeCheck("ngram-k4", (), None, not_checked("two_url")),),
    )
    r = build_report(inputs, FAST)
    assert r.level("c1").comparison("ngram-k4").gate == "ok"
    assert "acceptance unknown" in verdict_line(r, r.candidates[0])
    assert r.candidates[0].single_change is None
    assert any("single change could not be verified (two-URL mode" in w for w in warning_lines(r.warnings))
    assert any("may not have speculated" in w for w in warning_lines(r.warnings))
    assert '"version": "0.9"' in r.arms[0].server_info_json


def test_speedup_per_category(faster_report: Report):
    cats = faster_report.level("c1").comparison("ngram-k4").by_category
    assert [m.metric for m in cats] == ["code-edit", "rag-qa", "writing"]
    assert all(m.n_pairs == 32 and m.verdict == "faster" for m in cats)


def test_send_fraction_is_against_the_schedule_not_the_nominal_rate():
    from speculab.harness.verdict.arm_level import send_fraction

    def rec(i: int, sched: float, sent: float) -> RequestRecord:
        return RequestRecord(i, sched, sent, sent + 1, chunks=(ChunkEvent(sent + 1, "x", 1),))

    # a Poisson schedule that happens to run 10% slow is the offered load: fraction 1.0
    on_time = [rec(i, 1.1 * i, 1.1 * i) for i in range(10)]
    assert send_fraction(on_time) == pytest.approx(1.0)
    # a client that falls behind (a cap, or overload) sends over a longer span than scheduled
    late = [rec(i, float(i), 1.25 * i) for i in range(10)]
    assert send_fraction(late) == pytest.approx(0.8)
    assert send_fraction(late[:1]) is None


def test_a_run_of_n_prompts_at_concurrency_n_started_a_hair_apart_gets_a_verdict():
    """`speculab run` at concurrency 16 with 16 prompts: the client's sends spread over a millisecond, and the span
    from the first to the last send read a fraction of the load, "load not achieved" (#37)."""
    from dataclasses import replace

    levels = (LevelSpec("concurrency", 16, ("operating",)),)
    inputs = make_inputs(n_prompts=16, repeats=1, levels=levels, candidates={"ngram-k4": ArmEffect()})

    def spread(run: RepeatRun) -> RepeatRun:  # the i-th send 60 us after the one before, as a real client's
        recs = tuple(replace(r, sent_s=r.sent_s + 6e-5 * r.index, scheduled_s=r.scheduled_s) for r in run.records)
        return replace(run, records=recs)

    r = build_report(inputs.with_runs([spread(run) for run in inputs.runs]), FAST)
    lv = r.level("c16")
    assert all(a.load_fraction == pytest.approx(1.0, abs=0.01) for a in lv.arms)
    assert lv.comparison("ngram-k4").gate == "ok", lv.comparison("ngram-k4").gate_reason
