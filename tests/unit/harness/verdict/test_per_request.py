"""Per-request acceptance (token- and request-weighted, per category, against TPOT speedup) and the prefix-cache
hit-rate check, on synthetic inputs whose effects are known."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.analysis.acceptance import (
    LENGTH_PER_STEP,
    LENGTH_TOKENS_PER_STEP,
    request_acceptance,
    weighted_acceptance,
)
from speculab.harness.design import LevelSpec
from speculab.harness.records import RequestRecord
from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.report.console.ab import per_request_lines
from speculab.report.phrases import verdict_line, warning_lines, warning_text

FAST = ReportOptions(n_resamples=400)
LEVELS = (LevelSpec("concurrency", 1, ("low",)), LevelSpec("concurrency", 4, ("operating",)))


def rec(i: int, n: int, spec: dict | None) -> RequestRecord:
    return RequestRecord(i, 0.0, 0.0, 1.0, completion_tokens=n, speculation=spec)


def test_long_requests_weigh_more_in_the_token_weighted_figure():
    # one long request drafting well, three short ones drafting badly (vLLM-style fields)
    per = [
        request_acceptance(rec(0, 401, {"drafts": 100, "draft_tokens": 400, "accepted_tokens": 300})),
        *(request_acceptance(rec(i, 11, {"drafts": 8, "draft_tokens": 32, "accepted_tokens": 2})) for i in (1, 2, 3)),
    ]
    w = weighted_acceptance(per)
    assert w.length_kind == LENGTH_PER_STEP and w.requests == w.drafting_requests == 4
    assert w.rate_token_weighted == pytest.approx(306 / 496)
    assert w.rate_request_weighted.estimate == pytest.approx((0.75 + 3 * 2 / 32) / 4)
    assert w.length_token_weighted == pytest.approx(1 + 306 / 124)
    assert w.length_request_weighted.estimate == pytest.approx((4.0 + 3 * 1.25) / 4)
    # the token-weighted figures carry an interval over prompts too (a ratio of sums, clustered by prompt)
    assert w.rate_token_weighted_interval.estimate == pytest.approx(w.rate_token_weighted)
    assert w.length_token_weighted_interval.estimate == pytest.approx(w.length_token_weighted)
    assert w.rate_token_weighted_interval.n == 4 and w.rate_token_weighted_interval.low < w.rate_token_weighted


def test_llamacpp_tokens_per_step_and_nothing_invented():
    # llama.cpp reports drafted/accepted tokens but no steps: the length is output tokens per target step
    a = request_acceptance(rec(0, 33, {"drafts": None, "draft_tokens": 40, "accepted_tokens": 24, "source": "x"}))
    assert a.length_kind == LENGTH_TOKENS_PER_STEP and a.length == pytest.approx(32 / 8) and a.rate == 0.6
    assert request_acceptance(rec(1, 10, None)) is None  # nothing reported: no acceptance
    assert request_acceptance(rec(2, 10, {"drafts": 3, "draft_tokens": None, "accepted_tokens": None})) is None
    zero = request_acceptance(rec(3, 10, {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0}))
    assert zero.rate is None and zero.length is None  # reported, but drafted nothing: 0/0 is no number
    w = weighted_acceptance([a, zero])
    assert w.requests == 1  # one kind of length per summary: the llama.cpp-style request's
    assert w.length_token_weighted == pytest.approx(4.0)


@pytest.fixture(scope="module")
def report() -> Report:
    cand = ArmEffect(
        tpot_factor={"c1": 1 / 1.6, "c4": 1 / 1.3}, tokens_per_chunk=3, acceptance_length=2.6, per_request_spread=0.25,
        prefix_hit_rate=0.41,
    )  # fmt: skip
    base = ArmEffect(prefix_hit_rate=0.97)
    return build_report(make_inputs(n_prompts=36, repeats=2, levels=LEVELS, baseline=base,
                                    candidates={"ngram-k4": cand}), FAST)  # fmt: skip


def test_report_gives_both_weightings_per_category_and_the_relation_to_speedup(report: Report):
    lv = report.level("c1")
    ra = lv.arm("ngram-k4").request_acceptance
    assert ra is not None and ra.source == "vllm metrics.speculative_decoding" and ra.requests == 72
    assert ra.overall.drafting_requests == 72 and 2.0 < ra.overall.length_token_weighted < 3.3
    assert math.isfinite(ra.overall.length_request_weighted.low)
    assert set(ra.by_category) == {"code-edit", "rag-qa", "writing"}
    assert lv.arm("baseline").request_acceptance is None  # the plain arm reports none
    rel = lv.comparison("ngram-k4").acceptance_speedup
    # the fake makes each prompt's speedup proportional to its acceptance length: slope > 0, strong rank relation
    assert rel is not None and rel.n == 36 and rel.slope_low > 0 and rel.spearman_rho > 0.8
    assert all(p[3] > 0 for p in rel.points) and {p[1] for p in rel.points} == {"code-edit", "rag-qa", "writing"}


def test_prefix_cache_hit_rate_change_is_a_warning_and_in_the_verdict(report: Report):
    comp = report.level("c4").comparison("ngram-k4")
    assert report.level("c4").arm("baseline").prefix_cache.hit_rate == pytest.approx(0.97)
    assert comp.prefix_cache.beyond_noise and comp.prefix_cache.candidate_hit_rate == pytest.approx(0.41)
    text = "speculation changed the prefix-cache hit rate from 97% to 41%: TTFT differences may come from that"
    assert any(text in w for w in warning_lines(report.warnings))
    assert text in verdict_line(report, report.candidates[0])
    assert Report.from_json(report.to_json()) == report  # the new keys round-trip through summary.json


def test_a_small_hit_rate_difference_is_noise():
    arms = {"ngram-k4": ArmEffect(acceptance_length=2.0, tokens_per_chunk=2, prefix_hit_rate=0.78)}
    r = build_report(make_inputs(n_prompts=12, repeats=1, levels=LEVELS, baseline=ArmEffect(prefix_hit_rate=0.82),
                                 candidates=arms), FAST)  # fmt: skip
    comp = r.level("c1").comparison("ngram-k4")
    assert comp.prefix_cache is not None and not comp.prefix_cache.beyond_noise
    assert not any("prefix-cache" in w for w in warning_lines(r.warnings)) and "prefix-cache" not in verdict_line(
        r, r.candidates[0]
    )


def test_each_arm_and_candidate_carries_the_conditional_rates_per_position(report: Report):
    # the fake's responses carry no per-position counts, its counters do: the canon comes from the counters
    a = report.level("c1").arm("ngram-k4")
    pa = a.acceptance_positions
    assert pa is not None and pa.interval_over == "tokens" and pa.k_measured == 4
    uncond = [r.unconditional for r in pa.positions]
    assert uncond == pytest.approx(list(a.acceptance.per_position))
    for j in range(1, 4):  # conditional = unconditional_j / unconditional_(j-1)
        assert pa.positions[j].conditional.estimate == pytest.approx(uncond[j] / uncond[j - 1])
    assert pa.length_by_k[-1] == pytest.approx(a.acceptance.acceptance_length, rel=1e-6)
    assert report.level("c1").arm("baseline").acceptance_positions is None
    assert report.candidates[0].acceptance_positions == pa  # the candidate's, at its low load
    lines = "\n".join(per_request_lines(report, report.level("c1")))
    assert "conditional acceptance by position" in lines and "acceptance length at k=1..4" in lines


def test_candidates_of_different_k_compared_by_rate_get_a_warning_and_same_k_do_not():
    arms = {
        "ngram-k2": ArmEffect(acceptance_length=1.7, k=2, tokens_per_chunk=2),
        "ngram-k8": ArmEffect(acceptance_length=3.1, k=8, tokens_per_chunk=3),
    }
    r = build_report(make_inputs(n_prompts=12, repeats=1, levels=LEVELS, candidates=arms), FAST)
    found = [w for w in r.warnings if w.kind == WarningKind.ACCEPTANCE_RATE_ACROSS_K]
    assert len(found) == 1
    assert [c["k"] for c in found[0].fields["candidates"]] == [2, 8]
    text = warning_text(found[0])
    assert "compare them by acceptance length" in text and "(k=2): rate" in text and "(k=8): rate" in text
    same = {"a": ArmEffect(acceptance_length=1.7, k=4, tokens_per_chunk=2),
            "b": ArmEffect(acceptance_length=2.1, k=4, tokens_per_chunk=2)}  # fmt: skip
    r2 = build_report(make_inputs(n_prompts=12, repeats=1, levels=LEVELS, candidates=same), FAST)
    assert not any(w.kind == WarningKind.ACCEPTANCE_RATE_ACROSS_K for w in r2.warnings)


def test_requests_accepting_nearly_nothing_or_nearly_everything_are_listed_with_their_checks_and_loops():
    from speculab.harness.verdict.per_request import acceptance_outliers

    cand = ArmEffect(acceptance_length=2.6, tokens_per_chunk=3, per_request_spread=0.1)
    inputs = make_inputs(n_prompts=12, repeats=1, levels=LEVELS, candidates={"ngram-k4": cand})
    (run,) = inputs.runs_for("ngram-k4", "c1")
    loop = "the same words again " * 40  # a looping output

    def spec(accepted: int, drafted: int) -> dict:
        return {"drafts": drafted // 4, "draft_tokens": drafted, "accepted_tokens": accepted, "source": "x"}

    measured = [r for r in run.records if not r.warmup]
    changed = {measured[0].index: replace(measured[0], speculation=spec(1, 60)),
               measured[1].index: replace(measured[1], speculation=spec(59, 60), output_text=loop),
               measured[2].index: replace(measured[2], speculation=spec(2, 4))}  # too few drafts to judge  # fmt: skip
    run = replace(run, records=tuple(changed.get(r.index, r) if not r.warmup else r for r in run.records))
    found = acceptance_outliers([run], inputs.setup.items, allow_python=False)
    assert [(o.index, o.side) for o in found] == [(measured[0].index, "low"), (measured[1].index, "high")]
    assert found[1].degenerate is True and found[0].rate == pytest.approx(1 / 60)
    assert all(o.checks in ("passed", "failed", "none") for o in found)
    # and the report lists them as a warning on the candidate, worded with what their checks said
    r = build_report(replace(inputs, runs=tuple(run if x is inputs.runs_for("ngram-k4", "c1")[0] else x
                                                for x in inputs.runs)), FAST)  # fmt: skip
    (w,) = [w for w in r.warnings if w.kind == WarningKind.ACCEPTANCE_OUTLIERS]
    text = warning_text(w)
    assert "1 request(s) accepted nearly no draft" in text and "loops" in text
