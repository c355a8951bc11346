"""`checks:` (issue 50 item 3.2): true and false as before, or `{stream_unary: N}`, the prompts each arm also sends
unary for the stream against unary check."""

from __future__ import annotations

import pytest

from speculab.config import parse_experiment
from speculab.config.experiment import STREAM_UNARY_PROMPTS
from speculab.errors import UserError

FILE = """
workload: builtin:open
loads: {operating: {concurrency: 8}}
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}
speculation: {method: ngram, num_speculative_tokens: 3}
"""


@pytest.mark.parametrize(
    ("line", "checks", "stream_unary"),
    [
        ("", True, STREAM_UNARY_PROMPTS),
        ("checks: true", True, STREAM_UNARY_PROMPTS),
        ("checks: false", False, 0),
        ("checks: {stream_unary: 3}", True, 3),
        ("checks: {stream_unary: 0}", True, 0),
        ("checks: {}", True, STREAM_UNARY_PROMPTS),
    ],
)
def test_checks_keeps_its_meaning_and_says_how_many_prompts_go_unary(line: str, checks: bool, stream_unary: int):
    e = parse_experiment(FILE + line)
    assert (e.checks, e.stream_unary) == (checks, stream_unary)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("checks: {stream_unary: -1}", "checks.stream_unary: must be >= 0"),
        ("checks: {stream_unary: 1000}", "checks.stream_unary: must be <= 256"),
        ("checks: {stream_unray: 3}", "checks.stream_unray: unknown key; did you mean `stream_unary`?"),
        ("checks: 3", "checks: must be true or false; checks: must be a mapping of keys"),
    ],
)
def test_a_bad_checks_value_is_one_line_with_its_key(line: str, needle: str):
    with pytest.raises(UserError) as ei:
        parse_experiment(FILE + line, "experiment.yaml")
    assert needle in str(ei.value) and "\n" not in str(ei.value)
