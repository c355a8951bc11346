"""Correctness beyond equality, its pure parts (issue 50 item 3): where a stream differs from its unary answer and
what lies there, each arm's stream against unary paired (worse only where the candidate drops or repeats text the
baseline streams whole), and structured outputs' validity paired with McNemar."""

from __future__ import annotations

import pytest

from speculab.harness.analysis.paired_checks.stream import stream_difference, stream_results, stream_unary
from speculab.harness.analysis.paired_checks.structured import structured_outputs, structured_results
from speculab.harness.records import RequestSpec
from speculab.harness.results.warnings import WarningKind

ARMS = ("baseline", "ngram-k4")
WORDS = "alpha bravo charlie delta echo "


@pytest.mark.parametrize(
    ("streamed", "unary", "want"),
    [
        (WORDS, WORDS, None),
        ("alpha bravo charlie ", WORDS,
         {"position": 20, "kind": "dropped", "dropped_tokens": 2, "duplicated_tokens": 0}),
        ("alpha bravo bravo charlie delta echo ", WORDS,
         {"position": 12, "kind": "duplicated", "dropped_tokens": 0, "duplicated_tokens": 1}),
        ("alpha bravo zulu delta echo ", WORDS,
         {"position": 12, "kind": "replaced", "dropped_tokens": 1, "duplicated_tokens": 1}),
        ("", "x", {"position": 0, "kind": "dropped", "dropped_tokens": 1, "duplicated_tokens": 0}),
    ],
)  # fmt: skip
def test_a_stream_differs_from_its_unary_answer_by_what_it_lacks_repeats_or_replaces(streamed, unary, want):
    assert stream_difference(streamed, unary) == want


def _items(n: int) -> list[RequestSpec]:
    return [RequestSpec(i, prompt=f"p{i}", prompt_id=f"id{i}") for i in range(n)]


def test_the_candidate_that_drops_its_last_tokens_only_when_streaming_is_worse_and_named():
    items = _items(6)
    base = stream_results((it, WORDS, WORDS) for it in items)
    cand = stream_results((it, "alpha bravo charlie ", WORDS) for it in items)
    check = stream_unary(ARMS, [base, cand])
    assert check.worse and check.baseline.passed == 6 and check.candidate.passed == 0
    assert (check.mcnemar_b, check.mcnemar_c) == (6, 0)
    f = check.finding
    assert f.kind is WarningKind.STREAMING_DEFECT and (f.fields["side"], f.fields["count"], f.fields["of"]) == (
        "candidate", 6, 6)  # fmt: skip
    assert f.fields["first"]["item"] == 0 and f.fields["first"]["dropped_tokens"] == 2
    assert check.candidate.failures[0].fields["prompt_id"] == "id0"


def test_other_text_in_the_stream_is_named_but_a_defect_only_where_the_baseline_streams_whole():
    items = _items(4)
    alike = stream_results((it, WORDS, WORDS) for it in items)
    replaced = stream_results((it, "alpha bravo zulu delta echo " if it.index == 1 else WORDS, WORDS) for it in items)
    numerics = stream_unary(ARMS, [alike, replaced])
    assert not numerics.worse and numerics.finding.kind is WarningKind.STREAMING_DEFECT  # named, not held against it
    both = stream_results((it, "alpha " if it.index == 2 else WORDS, WORDS) for it in items)
    engine = stream_unary(ARMS, [both, both])  # the engine's streaming path, with or without speculation
    assert not engine.worse and engine.finding.fields["side"] == "candidate"
    clean = stream_unary(ARMS, [alike, alike])
    assert not clean.worse and clean.finding.kind is WarningKind.STREAM_UNARY_ALIKE and clean.finding.fields["of"] == 4


SCHEMA = {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object", "required": ["n"]}}}


def test_structured_outputs_paired_lower_when_the_format_is_ignored():
    items = [RequestSpec(i, prompt=f"p{i}", response_format=SCHEMA if i < 12 else None) for i in range(14)]
    base = structured_results((it, '{"n": 1}') for it in items)
    ignored = structured_results((it, "Sure, n is 1." if it.index < 10 else '{"n": 1}') for it in items)
    check = structured_outputs(ARMS, [base, ignored], alpha=0.05)
    assert check is not None and check.worse and check.baseline.checked == 12  # items without a format left out
    assert check.finding.kind is WarningKind.STRUCTURED_OUTPUT and check.finding.fields["lower"]
    assert check.finding.fields["candidate_rate"] == pytest.approx(2 / 12) and check.mcnemar_b == 10
    assert check.candidate.failures[0].kind is WarningKind.STRUCTURED_INVALID
    same = structured_outputs(ARMS, [base, base], alpha=0.05)
    assert same is not None and not same.worse and not same.finding.fields["lower"]
    none = [RequestSpec(0, prompt="p")]
    assert structured_outputs(ARMS, [structured_results((it, "x") for it in none)] * 2, alpha=0.05) is None
