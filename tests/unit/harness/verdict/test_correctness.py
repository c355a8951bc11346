"""Correctness: check pass rates and McNemar, output equivalence at temperature 0 with divergence classification,
distribution comparison at temperature > 0."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.records import ChunkEvent, RequestRecord
from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.correctness import (
    CorrectnessComparison,
    CorrectnessOptions,
    compare_correctness,
    divergence,
)
from speculab.report.phrases import checks_phrase, failure_lines, reason_text, warning_lines

OPTS = CorrectnessOptions()


def _said(r: CorrectnessComparison) -> str:
    """The correctness verdict as the report says it."""
    return reason_text(r.verdict)


def _rec(text: str, tokens: list[str] | None = None, gaps: list[float] | None = None) -> RequestRecord:
    lps = None
    if tokens is not None:
        gaps = gaps or [3.0] * len(tokens)
        lps = tuple(
            {"token": t, "logprob": -0.1, "top": {t: -0.1, "<x>": -0.1 - g}} for t, g in zip(tokens, gaps, strict=True)
        )
    return RequestRecord(0, 0, 0, 1, chunks=(ChunkEvent(1, text, None),), output_text=text, logprobs=lps)


def test_divergence_by_tokens_near_tie_and_confident():
    base = _rec("a b c d", ["a", " b", " c", " d"], gaps=[3, 3, 0.01, 3])
    cand = _rec("a b X d", ["a", " b", " X", " d"])
    d = divergence(0, "p0", base, cand, 0.1)
    assert (d.position, d.unit, d.kind) == (2, "token", "near-tie")
    assert d.logprob_gap == pytest.approx(0.01)
    assert d.context == "a b" and d.baseline_text.startswith(" c") and d.candidate_text.startswith(" X")
    base2 = _rec("a b c d", ["a", " b", " c", " d"], gaps=[3, 3, 2.0, 3])
    assert divergence(0, "", base2, cand, 0.1).kind == "confident"


def test_divergence_by_characters_without_logprobs():
    d = divergence(0, "", _rec("hello world"), _rec("hello there"), 0.1)
    assert (d.position, d.unit, d.kind) == (6, "char", "unclassified")
    assert d.baseline_token == "w" and d.candidate_token == "t"
    end = divergence(0, "", _rec("abc"), _rec("abcdef"), 0.1)
    assert end.position == 3 and end.baseline_token == "(end)"


def test_identical_outputs_at_temperature_zero():
    r = compare_correctness(make_inputs(n_prompts=20, repeats=1), "ngram-k4", OPTS)
    assert r.n_compared == 20 and r.identical == 20 and r.n_divergent == 0
    assert _said(r) == "identical outputs for all 20 prompts"  # #36: identical is said as "identical"
    assert r.baseline_checks is not None and r.baseline_checks.checked == 10  # even items carry a check
    assert r.mcnemar_p == 1.0
    assert r.baseline_self_identical_rate == 1.0


def test_confident_divergence_is_suspicious_and_near_tie_is_not():
    base = ArmEffect(logprobs=True, tie_at={3: (10, 0.02), 7: (20, 2.5)})
    cand = ArmEffect(acceptance_length=2.0, logprobs=True, diverge={3: (10, 0.02), 7: (20, 2.5)})
    r = compare_correctness(make_inputs(n_prompts=20, repeats=1, baseline=base, candidates={"ngram-k4": cand}),
                            "ngram-k4", OPTS)  # fmt: skip
    assert r.n_divergent == 2 and r.n_confident == 1 and r.n_near_tie == 1
    assert r.divergences[0].kind == "confident" and r.divergences[0].index == 7  # confident ones first
    assert r.divergences[0].position == 20 and "DIFFERENT" in r.divergences[0].candidate_text
    assert r.verdict.kind is WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES
    assert _said(r).startswith("SUSPICIOUS: 1 confident")


def test_only_near_ties_is_no_difference():
    base = ArmEffect(logprobs=True, tie_at={3: (5, 0.01)})
    cand = ArmEffect(acceptance_length=2.0, logprobs=True, diverge={3: (5, 0.01)})
    r = compare_correctness(make_inputs(n_prompts=12, repeats=1, baseline=base, candidates={"ngram-k4": cand}),
                            "ngram-k4", OPTS)  # fmt: skip
    assert _said(r) == "no difference (1 of 12 outputs differ, all at near-ties)"


def test_unclassified_divergences_warn_to_request_logprobs():
    cand = ArmEffect(acceptance_length=2.0, diverge={2: (4, 0.0)})
    r = compare_correctness(make_inputs(n_prompts=12, repeats=1, candidates={"ngram-k4": cand}), "ngram-k4", OPTS)
    assert r.n_unclassified == 1 and "unclassified" in _said(r)
    assert any("logprobs: 2" in w and "classify" in w for w in warning_lines(r.warnings))


def test_failing_checks_give_lower_pass_rate_with_mcnemar():
    inputs = make_inputs(n_prompts=60, repeats=1)
    runs = []
    for run in inputs.runs:
        if run.arm == "ngram-k4":  # the candidate drops the word every check looks for
            recs = tuple(replace(r, output_text=r.output_text.replace(" the", " a")) for r in run.records)
            run = replace(run, records=recs)
        runs.append(run)
    r = compare_correctness(inputs.with_runs(runs), "ngram-k4", OPTS)
    assert r.candidate_checks.passed < r.baseline_checks.passed
    assert r.mcnemar_b > 0 and r.mcnemar_c == 0 and r.mcnemar_p < 0.05
    lower = {WarningKind.CORRECTNESS_CHECKS_LOWER, WarningKind.CORRECTNESS_WORSE}  # by McNemar, or beyond the margin
    assert r.verdict.kind in lower and _said(r).startswith("pass rate lower")
    first = r.candidate_checks.failures[0]
    assert first.kind is WarningKind.CHECK_FAILED and first.fields["check"] == "contains"
    assert "check 'contains' failed" in failure_lines(r.candidate_checks.failures, 1)[0]


def test_temperature_above_zero_never_fails_on_differing_strings():
    cand = ArmEffect(acceptance_length=2.0, diverge={i: (3, 3.0) for i in range(10)})
    r = compare_correctness(
        make_inputs(n_prompts=20, repeats=1, temperature=0.8, candidates={"ngram-k4": cand}), "ngram-k4", OPTS
    )
    assert r.n_divergent == 10 and r.divergences == ()  # counted, not listed as suspicious
    assert r.verdict.kind is WarningKind.CORRECTNESS_NO_DIFFERENCE and _said(r) == "no difference"
    same = make_inputs(n_prompts=20, repeats=1, temperature=0.8)  # one seed per repeat: the same strings
    assert _said(compare_correctness(same, "ngram-k4", OPTS)) == "identical outputs for all 20 prompts"
    assert r.length_unit == "tokens" and r.length_wilcoxon_p == 1.0


def test_python_checks_run_only_with_the_opt_in(tmp_path, monkeypatch):
    """A results directory names code in its items' checks: re-rendering it runs none unless this command opts in."""
    import sys

    (tmp_path / "judge_mod.py").write_text("def judge(text, item):\n    return 'def ' in text\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    inputs = make_inputs(n_prompts=20, repeats=1)
    py = ({"type": "python", "function": "judge_mod:judge"},)
    items = tuple(replace(it, checks=py) for it in inputs.setup.items)
    inputs = replace(inputs, setup=replace(inputs.setup, items=items))
    off = compare_correctness(inputs, "ngram-k4", OPTS)
    assert off.baseline_checks is None and off.candidate_checks is None
    assert any(
        "20 python checks were not run" in w and "--allow-python-checks" in w for w in warning_lines(off.warnings)
    )
    assert "judge_mod" not in sys.modules
    on = compare_correctness(inputs, "ngram-k4", replace(OPTS, allow_python_checks=True))
    assert on.baseline_checks is not None and on.baseline_checks.checked == 20
    assert any("python checks ran" in w for w in warning_lines(on.warnings))
    sys.modules.pop("judge_mod", None)


def test_a_candidate_that_failed_most_prompts_is_not_judged_correct():
    """Issue 17: the candidate died mid-run, 1,583 requests failed, and the report still said "no difference"."""
    from speculab.harness.records import ErrorCategory, ErrorInfo

    inputs = make_inputs(n_prompts=20, repeats=1)
    dead = ErrorInfo(ErrorCategory.CONNECT, "cannot connect")
    runs = tuple(
        replace(r, records=tuple(x if x.index < 3 or x.warmup else replace(x, error=dead) for x in r.records))
        if r.arm == "ngram-k4"
        else r
        for r in inputs.runs
    )
    broken = inputs.with_runs(runs)
    judged = compare_correctness(broken, "ngram-k4", OPTS)  # no gate: the 3 answered prompts look fine
    assert _said(judged).startswith("identical outputs") and judged.n_compared == 3
    gated = compare_correctness(broken, "ngram-k4", OPTS, max_error_rate=0.02)
    assert gated.verdict.kind is WarningKind.CORRECTNESS_NOT_JUDGED
    assert _said(gated).startswith("not judged: 17 of 20 prompts have no successful output")


def test_no_output_text_in_either_arm_is_not_compared():
    # an AIPerf export keeps no output text: two empty strings per prompt would read as "identical outputs"
    inputs = make_inputs(n_prompts=8, repeats=1)
    blank = [replace(run, records=tuple(replace(r, output_text="") for r in run.records)) for run in inputs.runs]
    assert compare_correctness(inputs.with_runs(blank), "ngram-k4", CorrectnessOptions()) is None
    # one arm's text is enough to compare (a difference is evidence)
    half = [run if run.arm == "baseline" else b for run, b in zip(inputs.runs, blank, strict=True)]
    assert compare_correctness(inputs.with_runs(half), "ngram-k4", CorrectnessOptions()) is not None


@pytest.mark.parametrize("temperature", [0.8, None])
def test_outputs_not_compared_never_read_no_difference(temperature):
    """Issue 37: two files of two models (0 of 30 outputs identical, unknown temperature, no checks) read "correctness:
    no difference". Above temperature 0 or where it is unknown, without checks, the outputs were not compared."""
    cand = ArmEffect(acceptance_length=2.0, diverge={i: (3, 3.0) for i in range(20)})
    inputs = make_inputs(n_prompts=20, repeats=1, temperature=temperature, candidates={"ngram-k4": cand})
    no_checks = tuple(replace(it, checks=()) for it in inputs.setup.items)
    inputs = replace(inputs, setup=replace(inputs.setup, items=no_checks))
    r = compare_correctness(inputs, "ngram-k4", OPTS)
    assert r.identical == 0 and r.baseline_checks is None
    assert _said(r).startswith("not compared") and "no difference" not in _said(r)
    assert "p = 1" in _said(r)  # what was compared (the lengths) is still said


def _both_fail(n_prompts: int, fails: int):
    from tests.fakes.ab_inputs import with_check_failures

    inputs = make_inputs(n_prompts=n_prompts, repeats=1)
    return with_check_failures(with_check_failures(inputs, "baseline", fails), "ngram-k4", fails)


def test_checks_failing_on_the_baseline_too_are_said_so_never_inconclusive():
    """#36: every arm, plain included, failed every check: the checks fail on the model, not on speculation."""
    r = compare_correctness(_both_fail(36, 18), "ngram-k4", OPTS)
    assert r.baseline_checks.passed == 0 and r.candidate_checks.passed == 0 and r.checks_fail_both == 18
    assert r.non_inferiority == "inconclusive"  # the test alone cannot rule out 5 points with 18 prompts...
    said = checks_phrase(r, {"baseline": "plain"})
    assert said == "18 of 18 checks fail on plain as well: the checks, not speculation"  # ...the report says why
    assert "inconclusive" not in said
    some = compare_correctness(_both_fail(36, 5), "ngram-k4", OPTS)
    assert some.checks_fail_both == 5 and some.mcnemar_b == some.mcnemar_c == 0
    assert checks_phrase(some, {"baseline": "plain"}) == (
        "checks: the same outcome in both arms on all 18 prompts; 5 of 18 checks fail on plain as well: the checks, "
        "not speculation"
    )


def test_checks_that_differ_keep_the_non_inferiority_answer_beside_the_shared_failures():
    from tests.fakes.ab_inputs import with_check_failures

    inputs = with_check_failures(_both_fail(200, 3), "ngram-k4", 6)  # 3 fail in both, 3 more in the candidate
    r = compare_correctness(inputs, "ngram-k4", OPTS)
    both = r.baseline_checks.checked - r.baseline_checks.passed  # the candidate fails every check plain fails
    assert both >= 3 and r.checks_fail_both == both and r.mcnemar_b == 3 and r.mcnemar_c == 0
    said = checks_phrase(r, {"baseline": "plain"})
    assert said.startswith("checks pass rate ")
    assert said.endswith(f"; {both} of 100 checks fail on plain as well: the checks, not speculation")


def test_a_truncated_failure_list_says_how_many_more():
    from tests.fakes.ab_inputs import with_check_failures

    r = compare_correctness(with_check_failures(make_inputs(n_prompts=40, repeats=1), "ngram-k4", 18), "ngram-k4",
                            OPTS)  # fmt: skip
    side = r.candidate_checks
    assert len(side.failures) == 10 and side.n_failures == 18
    shown = failure_lines(side.failures, side.n_failures)
    assert shown[:10] == [reason_text(f) for f in side.failures] and shown[10:] == ["and 8 more"]
    assert failure_lines(side.failures[:3], 3) == shown[:3]  # nothing more: nothing said


def _looping_candidate(inputs, after: int = 8, period: int = 8):
    """The candidate's outputs fall into a loop after `after` words: the `period` words after them, to the end."""
    runs = []
    for run in inputs.runs:
        if run.arm == "ngram-k4":
            recs = []
            for r in run.records:
                w = r.output_text.split()
                looped = w[:after] + [w[after + (i - after) % period] for i in range(after, len(w))]
                recs.append(replace(r, output_text=" ".join(looped)))
            run = replace(run, records=tuple(recs))
        runs.append(run)
    return inputs.with_runs(runs)


@pytest.mark.parametrize("temperature", [0.7, 0.0])
def test_a_candidate_that_loops_is_worse_at_any_temperature(temperature):
    """Issue 50: a speculative arm that falls into a period-8 loop; the candidate degenerates where the baseline does
    not, with an interval, and `worse` (what --fail-on worse reads) says so."""
    inputs = make_inputs(n_prompts=16, repeats=1, temperature=temperature)
    r = compare_correctness(_looping_candidate(inputs), "ngram-k4", OPTS)
    dg = r.degeneration
    assert dg is not None and dg.worse and dg.candidate_only == 16 and dg.baseline_only == 0
    assert dg.difference.low > 0.5 and dg.prompts[0].candidate.period == 8
    assert r.worse and r.verdict == dg.verdict and _said(r).startswith("DEGENERATES where the baseline does not")
    clean = compare_correctness(inputs, "ngram-k4", OPTS)  # A vs A
    assert not clean.degeneration.worse and clean.degeneration.n_prompts == 0 and not clean.worse


def test_lower_checks_stay_the_verdict_beside_degeneration():
    inputs = _looping_candidate(make_inputs(n_prompts=60, repeats=1), after=4, period=2)
    r = compare_correctness(inputs, "ngram-k4", OPTS)  # the loop also drops the word the checks look for
    assert r.degeneration.worse and r.worse
    assert r.verdict.kind in {WarningKind.CORRECTNESS_CHECKS_LOWER, WarningKind.CORRECTNESS_WORSE}


def test_a_looping_candidate_breaches_the_correctness_guardrail_whatever_its_checks():
    from speculab.harness.verdict.recommendation import correctness_guardrail

    inputs = make_inputs(n_prompts=16, repeats=1, temperature=0.7)
    looping = compare_correctness(_looping_candidate(inputs), "ngram-k4", OPTS)
    assert correctness_guardrail(looping).answer == "worse"  # its checks alone leave it inconclusive or not worse
    assert correctness_guardrail(replace(looping, degeneration=None)).answer != "worse"
