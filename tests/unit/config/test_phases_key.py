"""`loads: {phases: [...]}` (issue 52): phases held for a time, the ramp, burst and zigzag shorthands, transition_s,
and one-line key-path errors."""

from __future__ import annotations

import pytest

from speculab.config import LoadPhase, parse_experiment
from speculab.errors import UserError

ARMS = """workload: "synthetic:input=10,output=17"
baseline: {url: "http://a"}
candidate: {url: "http://b"}
speculation: {method: ngram, num_speculative_tokens: 1}
"""


def _loads(loads: str):
    return parse_experiment(ARMS + "loads: " + loads).loads


def _shape(loads: str) -> list[tuple[float, float]]:
    return [(p.value, p.duration_s) for p in _loads(loads).operating.phases]


def test_phases_are_one_level_with_the_peak_as_its_load():
    loads = _loads("{transition_s: 2, phases: [{concurrency: 1, duration_s: 10}, {concurrency: 32, duration_s: 5}]}")
    (lv,) = loads.all_levels()
    assert lv.phases == (LoadPhase(1, None, 10.0), LoadPhase(32, None, 5.0))
    assert (lv.concurrency, lv.transition_s, lv.duration_s) == (32, 2.0, 15.0)
    assert lv.label == "2 phases, concurrency 1 → 32 (15 s)"
    rate = _loads("{phases: [{rate: 2, duration_s: 5}, {rate: 8.5, duration_s: 5}]}").operating
    assert (rate.rate_rps, rate.concurrency, rate.transition_s) == (8.5, None, 5.0)  # the documented default


def test_the_shorthands_stand_for_their_phases():
    assert _shape("{phases: [{ramp: {from: 1, to: 32, over: 40}}]}") == [(1, 10), (11, 10), (22, 10), (32, 10)]
    burst = _shape("{phases: [{burst: {base: 2, peak: 16, every: 10, for: 2, times: 2}}]}")
    assert burst == [(2, 8), (16, 2), (2, 8), (16, 2), (2, 8)]
    assert _shape("{phases: [{zigzag: {low: 1, high: 8, every: 5}}]}") == [(1, 5), (8, 5), (1, 5), (8, 5), (1, 5)]
    rate = _loads("{phases: [{ramp: {from: 1, to: 4, over: 2, steps: 2, axis: rate}}]}").operating.phases
    assert rate == (LoadPhase(None, 1.0, 1.0), LoadPhase(None, 4.0, 1.0))


@pytest.mark.parametrize(
    ("loads", "says"),
    [
        ("{phases: [{concurrency: 1}]}", "loads.phases[0]: a concurrency phase needs duration_s"),
        ("{phases: [{concurrency: 1, rate: 2, duration_s: 1}]}", "give exactly one of `concurrency` or `rate`"),
        ("{phases: [{ramp: {from: 1, to: 4, over: 2}, duration_s: 3}]}", "ramp sets its own durations"),
        ("{phases: [{burst: {base: 1, peak: 4, every: 2, for: 2}}]}", "for (2 s) must be < every (2 s)"),
        (
            "{phases: [{concurrency: 1, duration_s: 1}, {rate: 2, duration_s: 1}]}",
            "loads.phases: mixes concurrency and rate phases; use one axis",
        ),
        ("{phases: [{concurrency: 1, duration_s: 1}], operating: {concurrency: 2}}", "remove operating"),
        ("{phases: []}", "loads.phases"),
        ("{operating: {concurrency: 2}, transition_s: 1}", "transition_s applies to `phases` only"),
        ("{phases: [{concurency: 1, duration_s: 1}]}", "did you mean `concurrency`"),
        ("{phases: [{zigzag: {low: 1, high: 2, every: 1, times: 200}}]}", "loads.phases[0].zigzag.times"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(loads: str, says: str):
    with pytest.raises(UserError) as e:
        _loads(loads)
    assert says in str(e.value) and "\n" not in str(e.value)
