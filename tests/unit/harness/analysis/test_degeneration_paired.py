"""Baseline against candidate on degeneration, per prompt: flagged only when the candidate loops where the baseline does
not beyond noise, with each arm's rate, the paired difference's interval and McNemar's p; the prompts listed."""

from __future__ import annotations

from test_degeneration_loops import looping, prose

from speculab.harness.analysis.degeneration.paired import compare_degeneration, degeneration_pair
from speculab.harness.results.warnings import WarningKind
from speculab.report.phrases import reason_text


def pairs(n: int, candidate_loops: set[int], baseline_loops: frozenset[int] = frozenset(), length: int = 128):
    """n prompts' (baseline, candidate) measures; the named prompts' outputs loop after 32 words with period 8."""
    out = {}
    for i in range(n):
        clean = " ".join(prose(length, seed=i))
        loop = " ".join(looping(length, 32, 8, seed=i))
        base, cand = (loop if i in arm else clean for arm in (baseline_loops, candidate_loops))
        out[i] = degeneration_pair(base, None, cand, None)
    return out


def test_a_candidate_that_loops_where_the_baseline_does_not_is_flagged_with_an_interval():
    c = compare_degeneration(pairs(12, set(range(10))), {i: f"p{i}" for i in range(12)})
    assert c.worse and c.verdict.kind is WarningKind.DEGENERATION_WORSE
    assert (c.n_compared, c.candidate_only, c.baseline_only) == (12, 10, 0)
    assert c.candidate_rate.estimate == 10 / 12 and c.baseline_rate.estimate == 0.0
    d = c.difference
    assert d.estimate == 10 / 12 and 0 < d.low < d.estimate < d.high <= 1 and d.confidence == 0.95
    assert c.mcnemar_p < 0.01 and c.mcnemar_method == "exact-binomial"
    assert c.n_prompts == 10 and [p.index for p in c.prompts] == list(range(10))
    first = c.prompts[0]
    assert first.prompt_id == "p0" and first.candidate.period == 8 and not first.baseline.degenerate
    said = reason_text(c.verdict)
    assert said.startswith("DEGENERATES where the baseline does not: 10 of 12 outputs loop or repeat themselves")
    assert "against 0 of 12 (+83.3 points [" in said and "McNemar p = 0.002" in said


def test_a_vs_a_is_not_flagged():
    c = compare_degeneration(pairs(12, set()), {})
    assert not c.worse and c.verdict.kind is WarningKind.DEGENERATION_NOT_WORSE and c.prompts == ()
    assert reason_text(c.verdict) == "no output loops or repeats itself in either arm (12 prompts)"
    both = compare_degeneration(pairs(12, {1, 2}, frozenset({1, 2})), {})  # the same loops in both arms: concordant
    assert not both.worse and (both.candidate_only, both.baseline_only, both.n_prompts) == (0, 0, 2)
    assert reason_text(both.verdict).startswith("degenerates no more often than the baseline: 2 of 12")


def test_one_loop_is_listed_but_not_beyond_noise():
    c = compare_degeneration(pairs(40, {7}), {})
    assert not c.worse and c.candidate_only == 1 and c.mcnemar_p == 1.0
    assert c.difference.low < 0 < c.difference.high
    assert reason_text(c.verdict).startswith("degenerates more often, not beyond noise: 1 of 40")
    assert [p.index for p in c.prompts] == [7]


def test_the_candidates_own_loops_are_listed_first():
    c = compare_degeneration(pairs(12, {5, 9}, frozenset({2, 9})), {})
    assert [p.index for p in c.prompts] == [5, 9, 2]  # the candidate's alone, then both, then the baseline's alone
    assert not c.worse  # one each way


def test_outputs_too_short_carry_no_evidence():
    assert compare_degeneration(pairs(6, {1}, length=20), {}) is None
    mixed = pairs(6, set(), length=20)
    mixed[0] = pairs(1, {0})[0]  # one long pair among short ones
    c = compare_degeneration(mixed, {})
    assert c.n_compared == 1 and c.candidate_only == 1


def test_a_pair_is_measured_in_tokens_only_when_both_arms_have_them():
    toks = [f"t{i} " for i in range(64)]
    text = "".join(toks)
    both = degeneration_pair(text, toks, text, toks)
    assert {d.unit for d in both} == {"token"}
    one = degeneration_pair(text, toks, text, None)
    assert {d.unit for d in one} == {"approx"}
    c = compare_degeneration({0: both, 1: one}, {})
    assert c.unit == "mixed"
