"""The correctness verdict beyond equality (issue 50 item 3): a candidate whose streams drop their last tokens is
named as a streaming-path defect and worse, never as outputs that differ; above temperature 0 the check is not judged;
structured outputs less often valid make the candidate worse; a lossy candidate is judged by its checks only."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.results.ab_run import ABRun
from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.correctness import CorrectnessOptions, compare_correctness
from speculab.harness.verdict.recommendation import correctness_guardrail
from speculab.report.phrases import reason_text, warning_text

OPTS = CorrectnessOptions()
CAND = "ngram-k4"
SAMPLE = (0, 3, 5, 8)


def _with_unary(inputs: ABRun, drop: dict[str, int]) -> ABRun:
    """Each arm's unary sample is its whole text; an arm in `drop` streams each prompt less its last N words."""
    unary, runs = {}, []
    for run in inputs.runs:
        n = drop.get(run.arm, 0)
        recs = tuple(replace(r, output_text=" ".join(r.output_text.split(" ")[: len(r.output_text.split(" ")) - n]))
                     for r in run.records)  # fmt: skip
        runs.append(replace(run, records=recs))
        if run.level == inputs.setup.levels[0].key and run.repeat == 1:
            unary[run.arm] = tuple(replace(r, stream=False, chunks=()) for r in run.records if r.index in SAMPLE)
    return replace(inputs.with_runs(runs), unary=unary, setup=replace(inputs.setup, stream_unary=len(SAMPLE)))


def test_a_candidate_that_drops_its_last_tokens_only_when_streaming_is_a_streaming_defect_not_outputs_that_differ():
    inputs = _with_unary(make_inputs(n_prompts=12, repeats=1), {CAND: 2})
    r = compare_correctness(inputs, CAND, OPTS)
    assert r.worse and r.verdict.kind is WarningKind.STREAMING_DEFECT
    assert r.stream_unary is not None and r.stream_unary.worse
    assert (r.stream_unary.baseline.passed, r.stream_unary.candidate.passed) == (4, 0)
    said = reason_text(r.verdict)
    assert said.startswith("streaming-path defect: 4 of 4 prompts streamed otherwise than the same request answered")
    assert "not outputs that differ between the arms" in said and "the stream lacks 2 tokens" in said
    defects = [w for w in r.warnings if w.kind is WarningKind.STREAMING_DEFECT]
    assert [w.fields["side"] for w in defects] == ["candidate"]  # the baseline's streams are whole
    assert "item 0 (p0)" in warning_text(replace(defects[0], subject="ngram k=4"))
    assert correctness_guardrail(r).answer == "worse"  # a defect of its streams holds a faster candidate back


def test_a_baseline_streaming_alike_and_a_candidate_alike_say_so():
    r = compare_correctness(_with_unary(make_inputs(n_prompts=12, repeats=1), {}), CAND, OPTS)
    assert not r.worse and r.verdict.kind is WarningKind.CORRECTNESS_IDENTICAL
    assert r.stream_unary.finding.kind is WarningKind.STREAM_UNARY_ALIKE and r.stream_unary.finding.fields["of"] == 4
    older = compare_correctness(make_inputs(n_prompts=12, repeats=1), CAND, OPTS)
    assert older.stream_unary is None and older.structured_output is None  # a run that sent no sample: nothing said


def test_above_temperature_zero_stream_against_unary_is_not_judged():
    inputs = _with_unary(make_inputs(n_prompts=12, repeats=1, temperature=0.7), {CAND: 2})
    r = compare_correctness(inputs, CAND, OPTS)
    assert r.stream_unary.finding.kind is WarningKind.STREAM_UNARY_NOT_JUDGED and not r.stream_unary.worse
    assert r.stream_unary.baseline is None and "not judged" in reason_text(r.stream_unary.finding)


FMT = {"type": "json_object"}


def test_structured_outputs_less_often_valid_make_the_candidate_worse():
    inputs = make_inputs(n_prompts=12, repeats=1)
    items = tuple(replace(it, response_format=FMT, checks=()) for it in inputs.setup.items)
    runs = [replace(run, records=tuple(replace(r, output_text='{"a": 1}' if run.arm == "baseline" else "a is 1")
                                       for r in run.records)) for run in inputs.runs]  # fmt: skip
    r = compare_correctness(replace(inputs.with_runs(runs), setup=replace(inputs.setup, items=items)), CAND, OPTS)
    s = r.structured_output
    assert s is not None and s.worse and (s.baseline.passed, s.candidate.passed) == (12, 0)
    assert r.worse and r.verdict.kind is WarningKind.STRUCTURED_OUTPUT
    assert reason_text(r.verdict).startswith("structured outputs valid less often (0% vs the baseline's 100% of 12")


def test_a_lossy_candidate_is_judged_by_its_checks_never_by_equality():
    cand = ArmEffect(acceptance_length=2.0, logprobs=True, diverge={3: (10, 2.5), 7: (20, 2.5)})
    inputs = make_inputs(n_prompts=20, repeats=1, baseline=ArmEffect(logprobs=True), candidates={CAND: cand})
    exact = compare_correctness(inputs, CAND, OPTS)
    assert exact.worse and exact.verdict.kind is WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES
    by = ("--speculative-config acceptance_method=typical_acceptance_sampler",)
    arms = tuple(replace(a, lossy_acceptance=by) if a.name == CAND else a for a in inputs.arms)
    r = compare_correctness(replace(inputs, arms=arms), CAND, OPTS)
    assert not r.worse and r.verdict.kind is WarningKind.LOSSY_ACCEPTANCE and r.lossy_acceptance == by
    assert reason_text(r.verdict).startswith("judged by checks only: its acceptance is lossy (--speculative-config")
    assert r.n_confident == 2  # still counted for the record, never held against it
    assert WarningKind.LOSSY_ACCEPTANCE in {w.kind for w in r.warnings}
    assert WarningKind.UNCLASSIFIED_DIVERGENCES not in {w.kind for w in r.warnings}
