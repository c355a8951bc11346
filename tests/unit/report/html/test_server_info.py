"""The Setup section shows what each server said about itself once: the first arm's JSON, each other arm's only where
it differs (issue 24: the report repeated each arm's whole /v1/models JSON, identical but for a launch time)."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.fakes.ab_inputs import make_inputs

from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.html.page import render_html
from speculab.report.html.sections import setup_rows


def _info(created: int, version: str = "0.1.0") -> str:
    d = {"models": [{"id": "demo", "created": created, "max_model_len": 512}], "version": {"version": version}}
    return json.dumps(d, indent=1, sort_keys=True)


def test_each_arm_after_the_first_shows_only_what_differs():
    inputs = make_inputs(n_prompts=8, repeats=1, levels=make_inputs().setup.levels[:1])
    report = build_report(inputs, ReportOptions(n_resamples=50))
    first, second = report.arms[0], report.arms[1]
    arms = (replace(first, server_info_json=_info(100)), replace(second, server_info_json=_info(200)))
    rows = setup_rows(replace(report, arms=arms))["arms"]
    assert '"max_model_len": 512' in rows[0]["server_info"]  # the first arm's whole answer
    assert rows[1]["server_info"] == f"models[0].created: 200 ({first.label}: 100)"
    assert rows[1]["server_info_title"] == f"as {first.label}'s, except 1 field: models[0].created"

    same = (arms[0], replace(second, server_info_json=_info(100)))
    rows = setup_rows(replace(report, arms=same))["arms"]
    assert rows[1] == {**rows[1], "server_info": "", "server_info_title": f"the same as {first.label}'s"}
    html = render_html(replace(report, arms=same))
    assert html.count("max_model_len") == 1 and f"the same as {first.label}&#39;s" in html
