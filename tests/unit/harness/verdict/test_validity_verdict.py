"""Issue 50 item 1 at the verdict: a run on synthetic prompts or with ignore_eos says first that acceptance is not
the user's traffic's, and its recommendation chooses neither a candidate nor a k on it; a candidate with forced
acceptance is never reported as measured; outputs too short for k are said; the same run on the user's prompts
ships as before."""

from __future__ import annotations

import json
from dataclasses import replace

from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs
from tests.unit.harness.verdict.test_recommendation import DECIDED

from speculab.harness.records import FORCED, MEASURED
from speculab.harness.results.ab_run import ABRun
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.choices import NOT_USERS, CandidateAnswer, GuardrailAnswer
from speculab.harness.verdict.model import Report, WarningKind
from speculab.harness.verdict.recommendation import not_users_answer
from speculab.report.console.ab import ab_renderable
from speculab.report.html.page import view
from speculab.report.phrases import verdict_line
from speculab.report.summary import summary_dict

HEADLINE = "acceptance measured on synthetic prompts: not your traffic's"


def _inputs(**setup: object) -> ABRun:
    run = make_inputs(n_prompts=96, repeats=2)
    return replace(run, setup=replace(run.setup, **setup))


def _lines(report: Report) -> list[str]:
    console = Console(width=1000, record=True)
    console.print(ab_renderable(report))
    return [ln for ln in console.export_text().splitlines() if ln.strip()]


def test_the_users_prompts_ship_and_say_nothing_of_validity() -> None:
    report = build_report(_inputs(), DECIDED)
    assert report.acceptance_validity == ()
    assert report.recommendation is not None and report.recommendation.form != "undecided"
    assert any(a.answer == "ship" for a in report.recommendation.answers)


def test_synthetic_prompts_are_said_first_and_choose_nothing() -> None:
    s = make_inputs().setup
    report = build_report(_inputs(workload_source="synthetic:input=20,output=64 (seed 0)"), DECIDED)
    (first, *_) = report.warnings
    assert first.kind is WarningKind.ACCEPTANCE_SYNTHETIC_PROMPTS and first.subject == ""
    assert first.fields["prompts"] == first.fields["of"] == 96 and len(s.items) == 40
    # the terminal: the title, then the validity line, before the recommendation
    lines = _lines(report)
    assert lines[1].startswith(HEADLINE), lines[:3]
    assert lines[2].startswith("recommendation: undecided"), lines[:3]
    assert sum(HEADLINE in ln for ln in lines) == 1  # said once, not again among the warnings
    rec = report.recommendation
    assert rec is not None and rec.form == "undecided" and rec.winner is None
    assert all(a.answer == "undecided" and a.why == NOT_USERS for a in rec.answers)
    assert all(a.speedup > 1 for a in rec.answers if a.level == "c1")  # the speed measured is kept for the reader
    assert "measured, but its acceptance is not your traffic's" in "\n".join(lines)
    # report.html: the validity box comes first; summary.json: the record first, with its words
    v = view(report)
    assert v["validity"] and v["validity"][0].startswith(HEADLINE) and not any(HEADLINE in w for w in v["warnings"])
    d = summary_dict(report)
    assert d["warnings"][0]["kind"] == "acceptance_synthetic_prompts" and d["warnings"][0]["text"].startswith(HEADLINE)
    assert Report.from_json(json.dumps(d)).acceptance_validity == report.acceptance_validity


def test_a_trace_of_synthesised_prompts_and_ignore_eos_are_said_too() -> None:
    report = build_report(_inputs(synthesised_prompts=30, ignore_eos=True), DECIDED)
    kinds = [w.kind for w in report.acceptance_validity]
    assert kinds == [WarningKind.ACCEPTANCE_SYNTHETIC_PROMPTS, WarningKind.ACCEPTANCE_IGNORE_EOS]
    assert report.acceptance_validity[0].fields == {"prompts": 30, "of": 96, "source": "trace"}
    lines = _lines(report)
    assert lines[2].startswith("acceptance measured with ignore_eos: not your traffic's"), lines[:4]
    assert report.recommendation is not None and report.recommendation.form == "undecided"


def test_forced_acceptance_is_never_reported_as_measured() -> None:
    run = _inputs()
    cand = replace(run.arms[1], forced_acceptance=("--forced-acceptance-rates 0.9,0.8",))
    forced_runs = tuple(
        replace(r, acceptance=replace(r.acceptance, provenance=FORCED, forced_by=("g = 1",)))
        if r.arm == cand.name and r.acceptance is not None
        else r
        for r in run.runs
    )
    report = build_report(replace(run, arms=(run.arms[0], cand), runs=forced_runs), DECIDED)
    (w,) = report.acceptance_validity
    assert w.kind is WarningKind.ACCEPTANCE_FORCED and w.subject == cand.label
    assert w.fields == {"configured": ["--forced-acceptance-rates 0.9,0.8"], "reported": ["g = 1"]}
    acc = report.candidates[0].acceptance
    assert acc is not None and acc.provenance == FORCED
    assert all(lv.arm(cand.name).acceptance.provenance == FORCED for lv in report.levels)  # type: ignore[union-attr]
    lines = _lines(report)
    assert lines[1].startswith(f"{cand.label}: acceptance forced, not measured"), lines[:3]
    assert any("2.90 forced" in ln for ln in lines)  # the acceptance column says forced
    assert "acceptance length 2.90 (forced, not measured: " in verdict_line(report, report.candidates[0])
    rows = [row for lv in view(report)["levels"] for row in lv["arms"] if row["arm"] == cand.label]
    assert len(rows) == 3 and all("forced, not measured" in row["acceptance"] for row in rows)
    html = view(report)["acceptance"][0]
    assert html["text"].startswith("forced, not measured") and "(forced)" in html["source"]
    assert summary_dict(report)["candidates"][0]["acceptance"]["provenance"] == FORCED
    assert report.recommendation is not None and report.recommendation.form == "undecided"
    # its launch config alone is enough: a forced launch whose engine said nothing is still never shown as measured
    alone = build_report(replace(run, arms=(run.arms[0], cand)), DECIDED)
    (w,) = alone.acceptance_validity
    assert w.kind is WarningKind.ACCEPTANCE_FORCED and w.fields["reported"] == []
    acc = alone.candidates[0].acceptance
    assert acc is not None and acc.provenance == FORCED and acc.forced_by == ("--forced-acceptance-rates 0.9,0.8",)
    assert any("2.90 forced" in ln for ln in _lines(alone))
    # the same arm started as usual: measured
    assert build_report(run, DECIDED).candidates[0].acceptance.provenance == MEASURED  # type: ignore[union-attr]


def test_outputs_too_short_for_k_are_said_and_choose_no_k() -> None:
    # the fake's outputs are 48-95 tokens, cut by the limit; at k = 31 with 24 tokens a step, four steps need 96
    effect = ArmEffect(tokens_per_chunk=3, k=31, acceptance_length=24.0,
                       tpot_factor={"c1": 1 / 1.8, "c4": 1 / 1.3, "c16": 1 / 0.9})  # fmt: skip
    report = build_report(make_inputs(n_prompts=96, repeats=2, candidates={"ngram-k31": effect}), DECIDED)
    (w,) = report.acceptance_validity
    assert w.kind is WarningKind.ACCEPTANCE_SHORT_OUTPUTS and w.subject == "ngram k=31"
    assert w.fields["k"] == 31 and w.fields["needed"] == 96 and w.fields["measured"] and w.fields["capped"] == 1.0
    assert report.recommendation is not None and report.recommendation.form == "undecided"
    # the same outputs at the fake's usual 2.9 tokens a step hold far more than four steps: nothing said
    usual = replace(effect, acceptance_length=2.9)
    assert build_report(make_inputs(n_prompts=96, repeats=2, candidates={"ngram-k31": usual})).acceptance_validity == ()


def test_only_what_no_acceptance_could_undo_keeps_plain_or_a_gates_answer() -> None:
    def answer(ans: str, why: str, guard: str = "", verdict: str = "") -> CandidateAnswer:
        guards = (GuardrailAnswer(guard, verdict, 0.5, 0.4, 0.6, 0.03),) if guard else ()
        return CandidateAnswer("ngram-k4", "c1", ans, why, 1.8, 1.7, 1.9, guards, 48, "prompts")

    for free in ("ttft_s", "error_rate", "correctness"):  # the first token, failures, checks: not the drafts' doing
        kept = answer("plain", "guardrail", free, "worse")
        assert not_users_answer(kept) == kept
    on_speed = (
        answer("ship", "faster"),
        answer("plain", "slower"),
        answer("plain", "guardrail", "e2e_s", "worse"),
        answer("undecided", "inconclusive"),
        answer("undecided", "guardrail", "ttft_s", "leans worse"),
    )
    for a in on_speed:
        out = not_users_answer(a)
        assert (out.answer, out.why, out.needed) == ("undecided", NOT_USERS, None), a
        assert (out.speedup, out.guardrails) == (a.speedup, a.guardrails)  # the speed measured stays
    for why in ("not active", "not finished", "missing"):  # a gate's reason, or an unfinished run, is the answer
        gated = answer("undecided", why)
        assert not_users_answer(gated) == gated
