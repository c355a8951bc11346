"""`guardrail_floor:` in the experiment file (and `--guardrail-floor`): a time guardrail's absolute floor, a duration
for every time metric or per metric; a bare number is seconds below 1, a larger one needs its unit; one clear line
when wrong."""

from __future__ import annotations

import pytest

from speculab.config import parse_experiment
from speculab.config.experiment import guardrail_floors, parse_floor
from speculab.errors import UserError
from speculab.harness.gates.asked import parse_guardrail_floor

MINIMAL = """
workload: builtin:open
loads: {operating: {concurrency: 8}}
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}
speculation: {method: ngram, num_speculative_tokens: 3}
"""
TIME = ("tpot_s", "e2e_s", "ttft_s", "itl_s")


@pytest.mark.parametrize(
    ("text", "value"), [("20ms", 0.02), ("20 ms", 0.02), ("0.5s", 0.5), ("2s", 2.0), (0.02, 0.02), (0, 0.0)]
)
def test_parse_floor(text, value):
    assert parse_floor(text) == pytest.approx(value)


@pytest.mark.parametrize(("bad", "says"), [("20", "give a unit, e.g. 20ms or 20s"), ("abc", "give a duration"),
                                           ("-5ms", "give a duration"), ("2min", "give a duration"),
                                           ("90s", "give a duration")])  # fmt: skip
def test_parse_floor_refuses(bad, says):
    with pytest.raises(ValueError, match=says):
        parse_floor(bad)


def test_the_key_in_the_file_and_the_flag():
    assert parse_experiment(MINIMAL).guardrail_floor == {}
    assert parse_experiment(MINIMAL + "guardrail_floor: 10ms\n").guardrail_floor == dict.fromkeys(TIME, 0.01)
    e = parse_experiment(MINIMAL + "guardrail_floor: {ttft: 50ms, e2e: 0}\n")
    assert e.guardrail_floor == {"ttft_s": 0.05, "e2e_s": 0.0}
    assert guardrail_floors("ttft=20ms, e2e=0.1s") == {"ttft_s": 0.02, "e2e_s": 0.1}
    assert parse_guardrail_floor(None) is None and parse_guardrail_floor("0") == dict.fromkeys(TIME, 0.0)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("guardrail_floor: {ttft: 20}\n", "floor 20.0: give a unit, e.g. 20ms or 20s"),
        (
            "guardrail_floor: {tfft: 20ms}\n",
            "unknown metric 'tfft'; did you mean `ttft`? (floor keys: tpot, e2e, ttft, itl)",
        ),
        ("guardrail_floor: {correctness: 20ms}\n", "unknown metric 'correctness'"),
    ],
)
def test_mistakes_are_one_line(line, expected):
    with pytest.raises(UserError) as e:
        parse_experiment(MINIMAL + line, "experiment.yaml")
    assert "\n" not in str(e.value) and expected in str(e.value) and "guardrail_floor" in str(e.value), str(e.value)


def test_the_flags_mistake_names_the_flag():
    with pytest.raises(UserError, match=r"^--guardrail-floor: floor 'ttft,e2e=20ms': give metric=duration pairs"):
        parse_guardrail_floor("ttft,e2e=20ms")
