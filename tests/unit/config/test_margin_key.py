"""`margin:` in the experiment file (and `--margin`): a number, a percentage, or per metric; one clear line when
wrong."""

from __future__ import annotations

import pytest

from speculab.config import parse_experiment
from speculab.config.experiment import margins, parse_error_rate, parse_margin
from speculab.errors import UserError

MINIMAL = """
workload: builtin:open
loads: {operating: {concurrency: 8}}
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}
speculation: {method: ngram, num_speculative_tokens: 3}
"""
TIME = ("tpot_s", "e2e_s", "ttft_s", "itl_s")


@pytest.mark.parametrize(("text", "value"), [("3%", 0.03), ("0.05", 0.05), (0.1, 0.1), (0, 0.0), ("2.5%", 0.025)])
def test_parse_margin(text, value):
    assert parse_margin(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["3", "abc", "-1%", "100%", 1.5, "nan"])
def test_parse_margin_refuses(bad):
    with pytest.raises(ValueError, match=r"give a fraction below 1 or a percentage, e\.g\. 0\.03 or 3%"):
        parse_margin(bad)


@pytest.mark.parametrize(("text", "value"), [("50%", 0.5), ("0.5", 0.5), ("100%", 1.0), (1, 1.0), ("0", 0.0)])
def test_max_error_rate_takes_a_percent_as_margin_does_and_a_share_of_one(text, value):
    assert parse_error_rate(text) == pytest.approx(value)


@pytest.mark.parametrize(("bad", "hint"), [("50", " (did you mean 50%?)"), ("101%", ""), ("x", ""), (-0.1, "")])
def test_max_error_rate_refuses_what_is_no_share(bad, hint):
    with pytest.raises(ValueError) as e:
        parse_error_rate(bad)
    assert str(e.value) == f"max error rate {bad!r}: give a fraction at most 1 or a percentage, e.g. 0.03 or 3%{hint}"


def test_the_key_in_the_file():
    assert parse_experiment(MINIMAL).margin == {}
    assert parse_experiment(MINIMAL + "margin: 5%\n").margin == dict.fromkeys(TIME, 0.05)
    e = parse_experiment(MINIMAL + "margin: {tpot: 2%, ttft: 0.1, correctness: 3%}\n")
    assert e.margin == {"tpot_s": 0.02, "ttft_s": 0.1, "correctness": 0.03}
    assert margins({"e2e": "4%"}) == {"e2e_s": 0.04}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "margin: 3\n",
            "experiment.yaml: margin 3.0: give a fraction below 1 or a percentage, e.g. 0.03 or 3% (did you mean 3%?)",
        ),
        (
            "margin: {tpott: 3%}\n",
            "unknown metric 'tpott'; did you mean `tpot`? (margin keys: tpot, e2e, ttft, itl, correctness)",
        ),
    ],
)
def test_mistakes_are_one_line(line, expected):
    with pytest.raises(UserError) as e:
        parse_experiment(MINIMAL + line, "experiment.yaml")
    assert "\n" not in str(e.value) and expected in str(e.value), str(e.value)
