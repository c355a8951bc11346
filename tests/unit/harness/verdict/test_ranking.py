"""Several candidates in one report: the best per load, ties the paired test cannot break, none that pays."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.results.codec import from_data
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions, WarningKind
from speculab.report.console.ab import ab_renderable
from speculab.report.phrases import reason_text

FAST = ReportOptions(n_resamples=300)


def three_candidates():
    # seed 1: with seed 0 the fake's 3 % per-request noise happens to separate the two equal candidates at c4
    # (p < 0.05, the 1 in 20 a test at 5 % allows); seeds 1-3 all give the tie
    return make_inputs(
        n_prompts=40,
        repeats=1,
        seed=1,
        candidates={
            # c1: k4 clearly best; c4: k4 and k8 the same effect (only the fake's per-request noise differs: a tie);
            # c16: none pays (40 prompts in groups of 16 are too few units for any verdict)
            "ngram-k4": ArmEffect(
                tpot_factor={"c1": 1 / 2.0, "c4": 1 / 1.5, "c16": 1.0}, tokens_per_chunk=2, acceptance_length=2.5
            ),
            "ngram-k8": ArmEffect(
                tpot_factor={"c1": 1 / 1.3, "c4": 1 / 1.5, "c16": 1.0}, tokens_per_chunk=2, acceptance_length=2.5, k=8
            ),
            "draft-k4": ArmEffect(
                tpot_factor={"c1": 1.2, "c4": 1.2, "c16": 1.2}, tokens_per_chunk=2, acceptance_length=2.0
            ),
        },
    )


def test_best_per_load_ties_and_none():
    report = build_report(three_candidates(), FAST)
    c1, c4, c16 = report.level("c1"), report.level("c4"), report.level("c16")
    assert c1.best == "ngram-k4" and c1.tied_with_best == ()
    assert next(r.candidate for r in c1.ranking) == "ngram-k4"
    k8 = next(r for r in c1.ranking if r.candidate == "ngram-k8")
    assert k8.vs_best is not None and k8.vs_best.verdict == "faster" and k8.vs_best.speedup > 1.3  # 2.0 / 1.3
    assert c4.best in ("ngram-k4", "ngram-k8") and len(c4.tied_with_best) == 1, c4.ranking  # equal effects: a tie
    assert c16.best is None
    assert all(r.verdict == "not enough paired data" and r.vs_best is None for r in c16.ranking)
    slower = next(r for r in c1.ranking if r.candidate == "draft-k4")
    assert slower.verdict == "slower" and slower.vs_best is None and slower is c1.ranking[-1]
    # summary.json carries it and reads back
    d = report.to_dict()
    assert [lv["best"] for lv in d["levels"]] == [lv.best for lv in report.levels]
    back = from_data(Report, d)
    assert back.level("c4").tied_with_best == c4.tied_with_best


def test_terminal_opens_with_the_best_per_load_and_the_load_by_candidate_table():
    report = build_report(three_candidates(), FAST)
    console = Console(width=160, record=True, color_system=None)
    console.print(ab_renderable(report, Path("/out")))
    text = console.export_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # the recommendation opens the report (tests/unit/harness/verdict/test_recommendation.py); the best per load next
    assert lines[1].startswith("recommendation: ship ngram k=4")
    lines = lines[lines.index(next(ln for ln in lines if ln.startswith("  rule: "))) :]
    assert lines[1].startswith("  floors: ")  # what a time guardrail's breach must also be to count
    lines = lines[1:]
    assert lines[1].startswith("highest load within the SLO")  # then one line per arm (report.slo_capacity)
    lines = [lines[0], *lines[2 + len(report.arms) :]]
    assert lines[1].startswith("at concurrency 1 (the low and sweep load): ngram k=4, TPOT 2.")
    assert " faster [" in lines[1]  # the headline names the metric and the direction
    assert "cannot be told apart from" in lines[2]
    # too few pairs at 16 for any candidate: undecided, not "none pays" (issue 36)
    assert lines[3].startswith("at concurrency 16") and "undecided" in lines[3]
    assert "TPOT speedup by load and candidate" in text and "*" in text


def test_k_from_data_puts_the_predicted_best_k_next_to_the_measured_ones():
    report = build_report(three_candidates(), FAST)
    kcs = {kc.level: kc for kc in report.k_choices}
    assert set(kcs) <= {"c1", "c4", "c16"} and "c1" in kcs  # n-gram ran at k=4 and k=8; the draft only at one k
    kc = kcs["c1"]
    assert kc.method == "ngram" and kc.source == "ngram-k8"  # the larger k's acceptance covers more positions
    assert [m.k for m in kc.measured] == [4, 8] and kc.measured_best_k == 4
    k8 = kc.measured[1]
    assert k8.predicted is not None and abs(k8.predicted - k8.speedup) < 1e-9  # fitted at the source's own k
    what_if = report.candidate("ngram-k8").what_if[0]
    assert kc.predicted_best_k == what_if.recommended_k
    console = Console(width=200, record=True, color_system=None)
    console.print(ab_renderable(report, Path("/out")))
    assert "k for ngram at concurrency 1: predicted best k=" in console.export_text()


def test_a_saturated_lagging_client_gates_the_load_like_an_under_delivered_rate():
    import dataclasses

    inputs = three_candidates()
    busy = {"cpu_s": 9.8, "wall_s": 10.0, "cpu_share": 0.98, "loop_lag_p99_s": 0.031}
    stalled = {"cpu_s": 2.0, "wall_s": 10.0, "cpu_share": 0.2, "loop_lag_p99_s": 0.2}  # a VM stall: lag, no CPU
    runs = []
    for r in inputs.runs:
        if r.level == "c4" and r.arm == "baseline":
            r = dataclasses.replace(r, client=busy)
        elif r.level == "c1":
            r = dataclasses.replace(r, client=stalled)
        runs.append(r)
    report = build_report(inputs.with_runs(runs), FAST)
    c4 = report.level("c4").comparison("ngram-k4")
    assert c4.gate == "load not achieved" and c4.gate_reason is not None
    assert c4.gate_reason.kind == WarningKind.GATE_CLIENT_BEHIND and c4.gate_reason.fields["cpu_share"] == 0.98
    assert "the client fell behind (CPU 98% of a core" in reason_text(c4.gate_reason)
    assert report.level("c4").arm("baseline").client_loop_lag_p99_s == 0.031
    assert report.level("c1").comparison("ngram-k4").gate == "ok"  # lag alone is not enough
