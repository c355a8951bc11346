"""The headline's answers that `--fail-on` reads (issue 40): each candidate's TPOT answer per load, correctness when
worse, the error gate; read from the report model, never from the recommendation."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.design import LevelSpec
from speculab.harness.gates.answers import FAIL_ON_ANSWERS, headline_answers
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions, ReportWarning
from speculab.report.phrases import warning_text

FAST = ReportOptions(n_resamples=400)
ONE_LOAD = (LevelSpec("concurrency", 1, ("low", "sweep")),)


def _answers(baseline: ArmEffect | None = None, **candidates: ArmEffect) -> dict[str, set[str]]:
    """Each answer given, and where: a label, or the gate's record in the words the exit line says it."""
    inputs = make_inputs(n_prompts=30, repeats=1, levels=ONE_LOAD, candidates=candidates, baseline=baseline)
    out: dict[str, set[str]] = {}
    for answer, where in headline_answers(build_report(inputs, FAST)):
        out.setdefault(answer, set()).add(warning_text(where) if isinstance(where, ReportWarning) else where)
    return out


def test_a_slower_candidate_answers_slower_and_a_v_a_does_not():
    slower = _answers(**{"ngram-k4": ArmEffect(tpot_factor={"c1": 1.6}, tokens_per_chunk=1, acceptance_length=1.5)})
    assert slower == {"slower": {"ngram k=4 at concurrency 1"}}
    same = _answers(**{"ngram-k4": ArmEffect(acceptance_length=2.0)})
    assert "slower" not in same and "worse" not in same and "errors" not in same
    assert set(same) <= {"equivalent", "inconclusive"}


def test_correctness_worse_is_a_confident_divergence_at_temperature_0():
    base = ArmEffect(logprobs=True)
    cand = ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5, logprobs=True, diverge={1: (2, 3.0)})
    got = _answers(baseline=base, **{"ngram-k4": cand})
    assert got["worse"] == {"ngram k=4's correctness"} and "faster" in got


def test_the_error_gate_and_a_gated_load_answer_errors():
    got = _answers(**{"ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5, error_rate=0.2)})
    assert "errors" in got and any(
        "ngram k=4 at concurrency 1: " in w and "requests failed" in w for w in got["errors"]
    )
    assert "faster" not in got  # a gated load has no verdict


def test_speculation_not_active_is_no_verdict():
    got = _answers(**{"ngram-k4": ArmEffect(acceptance_length=1.0)})
    assert got == {"no-verdict": {"ngram k=4 at concurrency 1"}}
    assert "no-verdict" in FAIL_ON_ANSWERS


def test_the_answer_is_the_deciding_metrics():
    """`--decide-on ttft`: a candidate slower per token but not to its first token is not answered "slower"."""
    cand = ArmEffect(tpot_factor={"c1": 1.6}, acceptance_length=1.5)
    inputs = make_inputs(n_prompts=30, repeats=1, levels=ONE_LOAD, candidates={"ngram-k4": cand})
    by_tpot = {a for a, _ in headline_answers(build_report(inputs, FAST))}
    by_ttft = {a for a, _ in headline_answers(build_report(inputs, replace(FAST, decide_on="ttft_s")))}
    assert "slower" in by_tpot and "slower" not in by_ttft
