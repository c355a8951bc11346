"""The A/B report's warnings: records in the model (`harness.results.warnings`), one sentence per kind made in
`report.phrases`, written to summary.json as objects with their kind and sentence, each printed once."""

from __future__ import annotations

import json

from fakes.ab_inputs import make_inputs
from speculab.harness.results.warnings import FindingKind, ReportWarning, WarningKind, distinct
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.report.phrases import _WARNING_TEXT, warning_lines, warning_text
from speculab.report.summary import summary_dict
from speculab.report.words import FINDING_WORDS

FAST = ReportOptions(n_resamples=200)


def test_every_kind_has_its_sentence():
    assert set(_WARNING_TEXT) == set(WarningKind)


def test_every_kind_of_diagnose_finding_has_its_words():
    assert set(FINDING_WORDS) == set(FindingKind)


def test_a_sentence_names_its_subject_and_load():
    w = ReportWarning(
        WarningKind.REPEATS_WITHOUT_DRAFTS, "ngram k=4", "concurrency 8", {"inactive_repeats": 1, "repeats": 3}
    )
    assert warning_text(w) == "ngram k=4 at concurrency 8: 1 of 3 repeats made no drafts"
    assert warning_text(ReportWarning(WarningKind.ONE_REPEAT)).startswith("one repeat: throughput and cost")
    assert warning_text(ReportWarning.from_text("said in its own words")) == "said in its own words"
    unknown = ReportWarning(WarningKind.NO_ACCEPTANCE, "ngram k=4", "concurrency 1", {"tokens_per_chunk": None})
    assert warning_text(unknown) == (
        "ngram k=4 at concurrency 1: the engine reported no acceptance, so speculation could not be confirmed active"
    )
    like = ReportWarning(WarningKind.NO_ACCEPTANCE, "ngram k=4", "concurrency 1", {"tokens_per_chunk": 1.0})
    assert warning_text(like).endswith("streamed 1.00 tokens per chunk, like the baseline: it may not have speculated)")
    skipped = ReportWarning(WarningKind.WHAT_IF_SKIPPED, "ngram k=4", "concurrency 1", {"error": "alpha > 1"})
    assert warning_text(skipped) == "ngram k=4 what-if at concurrency 1 skipped: alpha > 1"


def test_repeats_collapse():
    w = ReportWarning(WarningKind.ONE_TOKEN_PER_CHUNK, "ngram k=4", "concurrency 1")
    other = ReportWarning(WarningKind.ONE_TOKEN_PER_CHUNK, "ngram k=4", "concurrency 2")
    assert distinct([w, other, w, ReportWarning(w.kind, w.subject, w.load)]) == [w, other]
    assert len(warning_lines([w, other, w, w])) == 2


def test_the_model_stores_records_and_summary_json_writes_kind_and_text():
    report = build_report(make_inputs(n_prompts=12, repeats=1), FAST)
    kinds = [w.kind for w in report.warnings]
    assert WarningKind.FEW_REPEATS in kinds and all(isinstance(k, WarningKind) for k in kinds)
    written = summary_dict(report)["warnings"]
    assert [w["kind"] for w in written] == [k.value for k in kinds]
    assert [w["text"] for w in written] == [warning_text(w) for w in report.warnings]
    back = Report.from_json(json.dumps(summary_dict(report)))
    assert back.warnings == report.warnings  # the extra `text` key is the writer's, not the model's
