"""The rules of acceptance validity (harness.workload.validity), one at a time on crafted inputs: each gives its
record where acceptance cannot be the user's traffic's, and nothing where it can."""

from __future__ import annotations

from speculab.harness.results.warnings import ACCEPTANCE_VALIDITY, WarningKind
from speculab.harness.workload import validity
from speculab.harness.workload.sources import load_workload


def test_synthetic_prompts_are_counted_from_the_workload_or_an_older_runs_source_line() -> None:
    assert validity.synthesised_prompts("built-in set v1", 5, 40) == 5  # as recorded, whatever the source says
    assert validity.synthesised_prompts("synthetic:input=10,output=8 (seed 0)", None, 40) == 40  # a run before it
    assert validity.synthesised_prompts("built-in set v1", None, 40) == 0
    assert validity.synthesised_prompts("x", 50, 40) == 40  # never more than the run's prompts (some fitted out)
    w = validity.synthetic_prompts(40, 40, "synthetic")
    assert w is not None and w.kind is WarningKind.ACCEPTANCE_SYNTHETIC_PROMPTS
    assert w.fields == {"prompts": 40, "of": 40, "source": "synthetic"} and w.subject == ""
    assert validity.synthetic_prompts(0, 40) is None


def test_the_workload_records_which_prompts_speculab_synthesised(tmp_path) -> None:
    assert load_workload("synthetic:input=8,output=4", seed=0, num_prompts=6).synthesised == 6
    assert load_workload("builtin:grounded", seed=0, num_prompts=6).synthesised == 0
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 20, "output_length": 8}\n'
        '{"timestamp": 5, "prompt": "a question the user asked", "max_tokens": 8}\n'
        '{"timestamp": 9, "input_length": 30, "output_length": 8}\n',
        encoding="utf-8",
    )
    assert load_workload(f"trace:{trace}", seed=0).synthesised == 2  # two lines gave lengths, one gave its prompt


def test_ignore_eos_is_a_record_and_its_absence_is_none() -> None:
    w = validity.ignored_eos(True)
    assert w is not None and w.kind is WarningKind.ACCEPTANCE_IGNORE_EOS and w.fields == {"source": "run"}
    assert validity.ignored_eos(False) is None


def test_forced_acceptance_keeps_where_it_was_seen_in_the_engines_words() -> None:
    w = validity.forced(["SGLANG_SIMULATE_ACC_LEN=2.5"], [], subject="eagle k=3")
    assert w is not None and w.kind is WarningKind.ACCEPTANCE_FORCED and w.subject == "eagle k=3"
    assert w.fields == {"configured": ["SGLANG_SIMULATE_ACC_LEN=2.5"], "reported": []}
    assert validity.forced([], ["speculab:spec_decode_forced_acceptance = 1"]) is not None
    assert validity.forced([], []) is None


def test_short_outputs_need_the_median_under_four_steps_and_the_limit_to_have_stopped_them() -> None:
    # k = 4 at full acceptance (no acceptance length known): 4 steps x (4 + 1) tokens = 20; a median of 12, every
    # output cut by the limit
    w = validity.short_outputs(4, [(12, "length")] * 9)
    assert w is not None and w.kind is WarningKind.ACCEPTANCE_SHORT_OUTPUTS
    assert w.fields == {"k": 4, "tokens_per_step": 5.0, "measured": False, "median_output_tokens": 12,
                        "needed": 20, "capped": 1.0, "requests": 9}  # fmt: skip
    assert validity.short_outputs(4, [(20, "length")] * 9) is None  # four whole steps: enough
    assert validity.short_outputs(1, [(12, "length")] * 9) is None  # k = 1 needs 8
    # the steps the engine measured: 2.5 tokens each, so 12 tokens hold about 5 of them (needs 10): enough
    assert validity.short_outputs(4, [(12, "length")] * 9, 2.5) is None
    measured = validity.short_outputs(4, [(12, "length")] * 9, 3.5)  # 14 needed
    assert measured is not None and measured.fields["measured"] and measured.fields["needed"] == 14
    # a length no step can give (below 1, or above k + 1) is not taken: k + 1 then
    assert validity.short_outputs(4, [(12, "length")] * 9, 9.0).fields["needed"] == 20  # type: ignore[union-attr]
    # short because the answers end there on their own: that is the traffic's length, and its acceptance
    assert validity.short_outputs(4, [(12, "stop")] * 9) is None
    # no finish reason known (a file that keeps none): the lengths alone decide, and `capped` says it is unknown
    unknown = validity.short_outputs(4, [(12, None)] * 3)
    assert unknown is not None and unknown.fields["capped"] is None
    assert validity.short_outputs(None, [(12, "length")]) is None  # no k: no rule
    assert validity.short_outputs(4, [(None, "length")]) is None  # no length: no rule


def test_every_rule_gives_a_kind_the_headline_says_first() -> None:
    made = [
        validity.synthetic_prompts(1, 1),
        validity.ignored_eos(True),
        validity.forced(["x"], []),
        validity.short_outputs(2, [(3, "length")]),
    ]
    assert {w.kind for w in made if w is not None} == ACCEPTANCE_VALIDITY
