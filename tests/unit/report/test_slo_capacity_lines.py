"""Each arm's highest load within its SLO in words (terminal lines, report.html rows): an estimate with its interval,
or the end of the loads measured it is censored at, never a number the data does not hold."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from speculab.harness.verdict.model import SloCapacity
from speculab.report.slo_capacity import capacity_text, slo_capacity_lines, slo_capacity_rows


def _cap(status: str, est: float | None = None, low: float | None = None, high: float | None = None) -> SloCapacity:
    return SloCapacity(status, est, low, high, 0.9, {"tpot_s": 0.03}, "concurrency", 1.0, 48.0, 0.95, "fit")


@pytest.mark.parametrize(
    ("cap", "text"),
    [
        (_cap("crosses", 11.2, 8.0, 16.0), "within it up to concurrency 11.2 [8–16] (95% interval)"),
        (_cap("crosses", 1.5, None, 2.0), "within it up to concurrency 1.5 [below–2] (95% interval)"),
        (_cap("meets throughout", None, 48.0), "meets it at every load measured (up to concurrency 48)"),
        (_cap("misses throughout", None, None, 1.0), "misses it already at the lowest load (concurrency 1)"),
        (_cap("undetermined"), "undetermined between concurrency 1 and 48: the loads measured do not place it"),
        (
            _cap("undetermined", None, 16.0),
            "undetermined: at least concurrency 16; beyond that the loads measured (up to 48) do not place it",
        ),
    ],
)
def test_each_status_says_only_what_the_loads_measured_hold(cap, text):
    assert capacity_text(cap) == text


def test_one_line_per_arm_under_the_slo_and_nothing_without_slos():
    arms = (SimpleNamespace(name="baseline", label="plain"), SimpleNamespace(name="eagle-k3", label="eagle k=3"))
    report = SimpleNamespace(arms=arms, slo_capacity={"baseline": _cap("misses throughout", None, None, 1.0),
                                                      "eagle-k3": _cap("crosses", 11.2, 8.0, 16.0)})  # fmt: skip
    lines = slo_capacity_lines(report)
    assert lines[0] == "highest load within the SLO (TPOT ≤ 30.0 ms for 90% of requests):"
    assert lines[1:] == [
        "  plain: misses it already at the lowest load (concurrency 1)",
        "  eagle k=3: within it up to concurrency 11.2 [8–16] (95% interval)",
    ]
    assert [r["arm"] for r in slo_capacity_rows(report)] == ["plain", "eagle k=3"]
    assert slo_capacity_lines(SimpleNamespace(arms=arms, slo_capacity=None)) == []
