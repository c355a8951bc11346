"""`loads: {search: ...}` (issue 39): the search's range, tolerance and budget, and one-line key-path errors."""

from __future__ import annotations

import pytest

from speculab.config import SearchConfig, parse_experiment
from speculab.errors import UserError

ARMS = """workload: "synthetic:input=10,output=17"
baseline: {url: "http://a"}
candidate: {url: "http://b"}
speculation: {method: ngram, num_speculative_tokens: 1}
"""


def _loads(loads: str, extra: str = ""):
    return parse_experiment(ARMS + extra + "loads: " + loads)


def test_a_search_with_every_key():
    e = _loads(
        "{search: {kind: concurrency, low: 1, high: 48, tolerance: 12, max_probes: 10, groups: 6, max_groups: 20}}"
    )
    assert e.loads.search == SearchConfig("concurrency", 1, 48, 12, 10, 6, 20)
    assert e.loads.all_levels() == ()  # placed as the search goes
    assert e.loads.operating.concurrency == 1  # its low end, for diagnose


def test_defaults_a_quarter_of_the_range_ten_probes_eight_groups():
    s = _loads("{search: {kind: rate, low: 1, high: 9}}").loads.search
    assert s is not None and (s.tolerance, s.max_probes, s.groups, s.max_groups) == (2.0, 10, 8, None)
    assert _loads("{search: {kind: rate, low: 1, high: 9}}").loads.operating.rate_rps == 1


@pytest.mark.parametrize(
    ("loads", "says"),
    [
        ("{search: {kind: concurrency, low: 48, high: 1}}", "loads.search: low (48) must be < high (1)"),
        ("{search: {kind: concurency, low: 1, high: 4}}", "loads.search.kind: must be one of"),
        ("{search: {kind: concurrency, low: 1.5, high: 4}}", "loads.search: a concurrency search needs whole"),
        ("{search: {kind: concurrency, low: 1, high: 4, tolerance: 3}}", "tolerance (3) must be < high - low (3)"),
        ("{search: {kind: concurrency, low: 0, high: 4}}", "loads.search.low: must be > 0"),
        ("{search: {kind: concurrency, low: 1, high: 4, max_probes: 1}}", "loads.search.max_probes: must be >= 2"),
        ("{search: {kind: concurrency, low: 1, high: 4, groups: 5}}", "loads.search.groups: must be >= 6"),
        ("{search: {kind: concurrency, low: 1, high: 4, tolerence: 1}}", "did you mean `tolerance`"),
        (
            "{search: {kind: concurrency, low: 1, high: 4, groups: 8, max_groups: 7}}",
            "loads.search: max_groups (7) must be at least groups (8)",
        ),
        (
            "{search: {kind: concurrency, low: 1, high: 4}, sweep: []}",
            "loads: search places its own loads: remove sweep",
        ),
        ("{}", "loads: give `operating`"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(loads: str, says: str):
    with pytest.raises(UserError) as e:
        _loads(loads)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_adaptive_repeats_do_not_combine_with_a_search():
    with pytest.raises(UserError, match="repeats: adaptive repeats"):
        _loads("{search: {kind: concurrency, low: 1, high: 4}}", "repeats: {min: 2, max: 4}\n")
