"""The compared metrics' one table (`analysis.figures.COMPARED_METRICS`): every entry complete, the experiment file's
margin keys equal to the table's (config may not import the harness, so it keeps its own list), and the verdict
comparing every entry, in the table's order."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from speculab.config.experiment import MARGIN_KEYS, TIME_MARGINS, margins
from speculab.harness.analysis.figures import COMPARED_METRICS, compared_metric
from speculab.harness.analysis.metrics import REQUEST_VALUES, request_metrics, request_values
from speculab.harness.records import ChunkEvent, RequestRecord, TokenCountSource
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import METRIC_LABELS

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
