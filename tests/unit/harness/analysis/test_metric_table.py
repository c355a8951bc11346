"""The figures table (`analysis.figures`): every entry complete, one headline, the experiment file's margin keys and
default deciding metric equal to the table's (config may not import the harness, so it keeps its own copy), the
verdict comparing every compared entry in the table's order, and the figures' names typed nowhere else: no second
table of them, and the headline's name only in the table (the readers of other tools' files and config's copy
aside)."""

from __future__ import annotations

import ast
import statistics
from pathlib import Path

import pytest

import speculab
from speculab.config import SloTargets
from speculab.config.experiment import DEFAULT_DECIDE_ON, MARGIN_KEYS, TIME_MARGINS, margins
from speculab.harness.analysis.figures import (
    COMPARED_METRICS,
    FIGURES,
    HEADLINE,
    RUN_FIGURES,
    TPOT,
    compared_metric,
    run_figure,
    run_figure_of,
)
from speculab.harness.analysis.metrics import REQUEST_VALUES, request_metrics, request_values
from speculab.harness.records import ChunkEvent, RequestRecord, TokenCountSource
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import METRIC_LABELS, RecommendationView
from speculab.harness.verdict.recommendation import Criteria

FIXTURE = Path(__file__).parents[2] / "report" / "fixtures" / "ab_run_v1"


def _record() -> RequestRecord:
    chunks = tuple(ChunkEvent(t, "xx", 2) for t in (10.1, 10.12, 10.15))
    return RequestRecord(
        index=0,
        scheduled_s=10.0,
        sent_s=10.0,
        end_s=10.151,
        chunks=chunks,
        completion_tokens=6,
        prompt_tokens=4,
        token_count_source=TokenCountSource.CONTINUOUS_USAGE,
    )


@pytest.mark.parametrize("c", COMPARED_METRICS, ids=lambda c: c.name)
def test_every_entry_is_complete(c):
    assert c.name and c.label and c.unit and c.margin_key
    assert c.name.endswith(f"_{c.unit}")  # units in names
    assert isinstance(c.lower_is_better, bool)
    assert 0 < c.default_margin < 1
    value = c.extract(request_metrics(_record()))
    assert isinstance(value, float) and value > 0
    assert compared_metric(c.name) is c


def test_names_labels_and_keys_are_unique():
    for field in ("name", "label", "margin_key"):
        values = [getattr(c, field) for c in COMPARED_METRICS]
        assert len(set(values)) == len(values), field
    with pytest.raises(KeyError):
        compared_metric("no_such_metric_s")


def test_extractors_read_the_request_metrics():
    m = request_metrics(_record())
    values = request_values(m)
    assert tuple(values) == REQUEST_VALUES
    assert values["tpot_s"] == m.tpot_s and values["e2e_s"] == m.e2e_s and values["ttft_s"] == m.ttft_s
    assert values["itl_s"] == statistics.fmean(m.itl_s)
    assert values["prompt_tokens"] == 4 and values["output_tokens"] == 6


def test_the_config_margin_keys_are_the_tables():
    table = {c.margin_key: c.name for c in COMPARED_METRICS}
    assert list(MARGIN_KEYS.items()) == [*table.items(), ("correctness", "correctness")]
    assert tuple(c.name for c in COMPARED_METRICS) == TIME_MARGINS
    assert margins(0.05) == {c.name: 0.05 for c in COMPARED_METRICS}


def test_the_verdict_and_its_labels_follow_the_table():
    report = build_report(load_inputs(FIXTURE))
    names = [c.name for c in COMPARED_METRICS]
    comparisons = [comp for lv in report.levels for comp in lv.comparisons if comp.metrics]
    assert comparisons
    assert all([m.metric for m in comp.metrics] == names for comp in comparisons)
    assert list(report.margin) == [*names, "correctness"]
    assert {c.name: c.label for c in COMPARED_METRICS} == METRIC_LABELS


def test_one_headline_first_among_the_compared_and_the_default_deciding_metric():
    """The verdict's answer is its first compared metric's (`comparison.level_comparison`: `ratios[0]`), and every
    default of `decide_on` is the headline's name: config's copy, the recommendation's criteria and its view."""
    assert [f for f in FIGURES if f.headline] == [HEADLINE] == [TPOT]
    assert COMPARED_METRICS[0] is HEADLINE
    assert DEFAULT_DECIDE_ON == Criteria().decide_on == HEADLINE.name
    assert RecommendationView.__dataclass_fields__["decide_on"].default == HEADLINE.name


def test_the_run_level_figures_derive_from_the_rows():
    names = [r.name for r in RUN_FIGURES]
    assert len(set(names)) == len(names)
    orders = [f.summary_order for f in FIGURES if f.aggregates]
    assert len(set(orders)) == len(orders)  # the run-level order is not left to chance
    for r in RUN_FIGURES:
        assert r.figure in FIGURES and r.statistic in r.figure.aggregates and run_figure(r.name) is r
    assert run_figure_of("e2e_s", "p99") == run_figure("e2e_p99_s")
    assert run_figure("output_tok_s").margin_name is None and run_figure("itl_median_s").margin_name == "itl_s"
    assert run_figure("no_such_s") is None and run_figure_of("output_tok_s", "median") is None


def test_the_slo_limits_are_named_as_their_figures():
    """summary.json's and manifest.json's `slo` keys are SloTargets' fields: each must be a compared figure's name."""
    limits = SloTargets(tpot_s=0.05).limits
    assert set(limits) <= {c.name for c in COMPARED_METRICS} and len(limits) == 3
    assert limits[TPOT.name] == 0.05


SRC = Path(speculab.__file__).parent
# Where the figures' names may be typed: the table, and the readers of other tools' files (which pair their tools'
# keys with the table's rows). config/ keeps one copy of the compared metrics' names, MARGIN_KEYS: it may not
# import the harness, and it needs them to read `margin:` and `decide_on:` (the tests above hold it equal).
HOMES = ("harness/analysis/figures.py", "harness/imports/")
CONFIG_COPY = ("config/experiment.py", "MARGIN_KEYS")


def _modules() -> list[tuple[str, ast.Module]]:
    out = [(p.relative_to(SRC).as_posix(), ast.parse(p.read_text(encoding="utf-8"))) for p in SRC.rglob("*.py")]
    return [(rel, tree) for rel, tree in out if not rel.startswith(HOMES)]


def _config_copy(rel: str, tree: ast.Module) -> set[int]:
    """The ids of the nodes inside config's one copy (`MARGIN_KEYS = {...}`), which may name figures."""
    if rel != CONFIG_COPY[0]:
        return set()
    copies = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == CONFIG_COPY[1] for t in n.targets)
    ]
    return {id(x) for c in copies for x in ast.walk(c)}


def test_the_headline_is_typed_only_in_the_figures_table():
    """`"tpot_s"` as a string constant anywhere else is the table retyped: a view or a default that a new headline
    (or a renamed one) would have to find. Code that means the headline says `HEADLINE.name`, code that means TPOT
    itself (one-token answers, per-user tokens/s) `TPOT.name`, code that means the deciding metric `decide_on`."""
    found, copied = [], 0
    for rel, tree in _modules():
        allowed = _config_copy(rel, tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and n.value == TPOT.name:
                if id(n) in allowed:
                    copied += 1
                else:
                    found.append(f"{rel}:{n.lineno}")
    assert copied == 1  # the test reads the copy it allows
    assert not found, f"{TPOT.name!r} typed outside the figures table (name the row instead): {found}"


def test_no_second_table_of_figures():
    """A tuple, list, set or dict literal naming two or more figures (`RUN_METRICS = {"ttft_median_s": (...), ...}`,
    `(("TPOT", "tpot_s"), ("TTFT", "ttft_s"))`) is a second table of figures written apart from the first: derive it
    from the rows (`RUN_FIGURES`, `COMPARED_METRICS`, a tuple of rows) instead."""
    names = {f.name for f in FIGURES} | {r.name for r in RUN_FIGURES}
    tables, copies = [], 0
    for rel, tree in _modules():
        allowed = _config_copy(rel, tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.Dict):
                elts = [*n.keys, *n.values]
            elif isinstance(n, (ast.Tuple, ast.List, ast.Set)):
                elts = n.elts
            else:
                continue
            named = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]
            if len(named) >= 2:
                if id(n) in allowed:
                    copies += 1
                else:
                    tables.append(f"{rel}:{n.lineno} {named}")
    assert copies == 1  # config's MARGIN_KEYS: the test reads the copy it allows
    assert not tables, f"figures listed apart from the figures table: {tables}"
