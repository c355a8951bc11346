"""`decide_on:` and `guardrails:` in the experiment file (issue 36): the metric a candidate must be faster on and
those it must not be worse on; carried to the report through the plan's setup; one clear line when wrong."""

from __future__ import annotations

import pytest

from speculab.config import parse_experiment
from speculab.config.experiment import DEFAULT_GUARDRAILS
from speculab.errors import UserError

MINIMAL = """
workload: builtin:open
loads: {operating: {concurrency: 8}}
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}
speculation: {method: ngram, num_speculative_tokens: 3}
"""


def test_the_keys_in_the_file():
    e = parse_experiment(MINIMAL)
    assert e.decide_on == "tpot_s" and e.guardrails is None  # None: DEFAULT_GUARDRAILS
    assert DEFAULT_GUARDRAILS == ("ttft_s", "e2e_s", "error_rate", "correctness")
    e = parse_experiment(MINIMAL + "decide_on: e2e\nguardrails: [ttft, error_rate, ttft]\n")
    assert e.decide_on == "e2e_s" and e.guardrails == ("ttft_s", "error_rate")
    assert parse_experiment(MINIMAL + "guardrails: []\n").guardrails == ()


def test_the_plan_carries_them_to_the_report_and_resume_ignores_them():
    from dataclasses import replace

    from speculab.commands.run.plan import plan_experiment
    from speculab.commands.run.resume import plan_identity

    plan = plan_experiment(parse_experiment(MINIMAL + "decide_on: ttft\nguardrails: [e2e]\n"))
    assert (plan.setup.decide_on, plan.setup.guardrails) == ("ttft_s", ("e2e_s",))
    # what the report decides on shapes no measurement: a run resumed with another choice is the same plan
    other = replace(plan, setup=replace(plan.setup, decide_on="tpot_s", guardrails=None))
    assert plan_identity(plan) == plan_identity(other)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("decide_on: tpott", "decide_on: unknown metric 'tpott'; did you mean `tpot`? (one of: tpot, e2e, ttft, itl)"),
        ("decide_on: correctness", "decide_on: unknown metric 'correctness'"),
        ("guardrails: [errors]", "guardrails: unknown guardrail 'errors'; did you mean `error_rate`?"),
        ("guardrails: ttft", "guardrails: must be a list"),
    ],
)
def test_mistakes_are_one_line(line, expected):
    with pytest.raises(UserError) as e:
        parse_experiment(MINIMAL + line + "\n")
    assert expected in str(e.value) and "\n" not in str(e.value)
