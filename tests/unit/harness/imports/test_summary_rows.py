"""An arm's rows of a file of several configurations (harness.imports.summaries.rows): the two selector forms, and
the refusals that name what to give."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.design import LevelSpec
from speculab.harness.imports.summaries.rows import A_ROW, RowSelector, parse_row, pick_rows, shared_loads
from speculab.harness.imports.summaries.summary import Aggregates, Row, RunSummary

PATH = Path("results.json")


def _run(index: int, draft: str, target: str = "14B", conc: int = 1) -> RunSummary:
    fields = {"target": target, "draft": draft, "conc": str(conc)}
    return RunSummary(
        path=PATH,
        tool="t",
        level=LevelSpec("concurrency", conc),
        aggregates=Aggregates(),
        completed=None,
        failed=None,
        row=Row(index, fields, ("target", "draft")),
    )


RUNS = (_run(1, "none"), _run(2, "0.5B Q8_0"), _run(3, "none", "7B"), _run(4, "none", conc=4))


def test_a_number_or_fields_parse_and_anything_else_is_refused_naming_both_forms() -> None:
    assert parse_row("2", A_ROW) == RowSelector("2", index=2)
    assert parse_row("draft=0.5B Q8_0, target=14B", A_ROW).match == (("draft", "0.5B Q8_0"), ("target", "14B"))
    for bad in ("0", "draft", "=x", "draft=", ""):
        with pytest.raises(UserError, match=r"--a-row .*a row's number .* or FIELD=VALUE"):
            parse_row(bad, A_ROW)


def test_fields_pick_rows_case_aside_and_rows_at_several_loads_are_one_arm() -> None:
    picked = pick_rows(RUNS, parse_row("target=14b,draft=NONE", A_ROW), PATH, A_ROW)
    assert [r.row.index for r in picked if r.row] == [1, 4]  # one configuration at concurrency 1 and 4


def test_a_side_of_several_configurations_is_refused_naming_where_they_differ() -> None:
    said = r"of 2 configurations \(target: 14B, 7B\).*e\.g\. --a-row draft=none,target=14B"
    with pytest.raises(UserError, match=said):
        pick_rows(RUNS, parse_row("draft=none", A_ROW), PATH, A_ROW)
    with pytest.raises(UserError, match=r"results\.json's rows are of 3 configurations"):
        pick_rows(RUNS, None, PATH, A_ROW)


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        ("9", "has rows 1 to 4; give one of them"),
        ("drafts=none", "rows have no field 'drafts'; theirs: conc, draft, target"),
        ("draft=3B", "no row of results.json has draft=3B; its draft: none, 0.5B Q8_0"),
    ],
)
def test_what_picks_nothing_is_one_line_naming_what_there_is(selector: str, said: str) -> None:
    with pytest.raises(UserError, match=said):
        pick_rows(RUNS, parse_row(selector, A_ROW), PATH, A_ROW)


def test_a_file_of_one_configuration_has_no_rows_to_pick() -> None:
    one = RunSummary(PATH, "t", LevelSpec("concurrency", 1), Aggregates(), None, None)
    assert pick_rows((one,), None, PATH, A_ROW) == (one,)
    with pytest.raises(UserError, match=r"holds one configuration .*leave --a-row out"):
        pick_rows((one,), parse_row("1", A_ROW), PATH, A_ROW)


def test_two_arms_keep_the_loads_both_have_and_say_which_they_lost() -> None:
    a = (_run(1, "none", conc=1), _run(2, "none", conc=4))
    b = (_run(3, "3B", conc=4), _run(4, "3B", conc=8))
    kept_a, kept_b, lost_a, lost_b = shared_loads(a, b)
    assert [r.row.index for r in kept_a + kept_b if r.row] == [2, 3]
    assert (lost_a, lost_b) == (("concurrency 1",), ("concurrency 8",))
    apart = (_run(5, "3B", conc=2),)
    assert shared_loads(a, apart) == (a, apart, (), ())  # nothing shared: the same-load check refuses them
