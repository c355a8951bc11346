"""#36: the report says only what the evidence supports: correctness in true words, intervals that mean something
(withheld below the launches they need, advice a command can follow, one warning per kind), and a headline that
says what its number is."""

from __future__ import annotations

from tests.fakes.ab_inputs import ArmEffect, make_inputs, with_check_failures

from speculab.harness.design import LevelSpec
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.html.sections import correctness_rows
from speculab.report.phrases import verdict_line

FAST = ReportOptions(n_resamples=200)
C1 = (LevelSpec("concurrency", 1, ("low", "operating")),)
TWO = {
    "ngram-k4": ArmEffect(tpot_factor={"c1": 1 / 1.8}, tokens_per_chunk=3, acceptance_length=2.9),
    "draft_model-k4": ArmEffect(tpot_factor={"c1": 1 / 1.4}, tokens_per_chunk=2, acceptance_length=2.2),
}


def _all_checks_fail(n_prompts: int = 36):
    """Every arm, plain included, fails every check (the demo's model fails all 18 of its checks)."""
    inputs = make_inputs(n_prompts=n_prompts, repeats=1, levels=C1, candidates=TWO)
    for arm in ("baseline", *TWO):
        inputs = with_check_failures(inputs, arm, n_prompts)
    return inputs


def test_identical_outputs_failing_checks_on_every_arm_are_not_an_inconclusive_difference():
    report = build_report(_all_checks_fail(), FAST)
    for cand in report.candidates:
        line = verdict_line(report, cand)
        assert "correctness: identical outputs for all 36 prompts" in line
        assert "18 of 18 checks fail on plain as well: the checks, not speculation" in line
        assert "inconclusive against" not in line


def test_the_baseline_failure_list_once_and_truncated_lists_say_how_many_more():
    rows = correctness_rows(build_report(_all_checks_fail(), FAST))
    assert len(rows) == 2
    (base1, cand1), (base2, cand2) = (r["checks"] for r in rows)
    assert base1["arm"] == base2["arm"] == "plain"
    assert len(base1["failures"]) == 11 and base1["failures"][-1] == "and 8 more"  # 10 shown of 18
    assert base2["failures"] == []  # the same list is not repeated under the second candidate
    assert cand1["failures"][-1] == cand2["failures"][-1] == "and 8 more"  # each candidate's own list stays
