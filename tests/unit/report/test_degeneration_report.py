"""The degeneration check where correctness shows: the verdict line in the terminal, report.html's correctness card
(the prompts that loop, their text escaped), and summary.json (its keys, the verdict's text, read back)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from tests.fakes.ab_inputs import make_inputs

from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.report.html.page import render_html
from speculab.report.phrases import verdict_line
from speculab.report.summary import summary_dict

EVIL = "<b>loop</b>"


def _report(loop: bool) -> Report:
    """12 prompts at temperature 0.7; with `loop` the candidate's outputs fall into a loop of 8 words after 8 words,
    markup inside it (model output, escaped when shown): without logprobs its units are words and punctuation marks,
    and "<b>loop</b>" is 8 of them, so the loop's period is 15."""
    inputs = make_inputs(n_prompts=12, repeats=1, temperature=0.7)
    runs = []
    for run in inputs.runs:
        if loop and run.arm == "ngram-k4":
            recs = []
            for r in run.records:
                w = r.output_text.split()
                w[9] = EVIL
                recs.append(replace(r, output_text=" ".join(w[:8] + [w[8 + i % 8] for i in range(len(w) - 8)])))
            run = replace(run, records=tuple(recs))
        runs.append(run)
    return build_report(inputs.with_runs(runs), ReportOptions(n_resamples=200))


@pytest.fixture(scope="module")
def looping() -> Report:
    return _report(loop=True)


def test_the_verdict_line_says_the_candidate_degenerates(looping: Report):
    line = verdict_line(looping, looping.candidates[0])
    assert "correctness: DEGENERATES where the baseline does not: 12 of 12 outputs loop or repeat themselves" in line
    assert "McNemar p = 0.00049" in line
    clean = _report(loop=False)
    assert "degenerat" not in verdict_line(clean, clean.candidates[0]).lower()  # nothing looped: nothing said


def test_report_html_lists_the_looping_prompts_escaped(looping: Report):
    html = render_html(looping)
    assert "outputs that loop or repeat themselves" in html and "loop of period 15" in html
    assert "baseline 0.0% [" in html and "candidate 100.0% [" in html and "of 12 outputs degenerate" in html
    assert EVIL not in html and "&lt; b &gt; loop &lt; / b &gt;" in html  # its units, escaped


def test_summary_json_holds_the_comparison_and_its_words(looping: Report):
    d = summary_dict(looping)["candidates"][0]["correctness"]
    assert d["worse"] is True and d["verdict"]["kind"] == "degeneration_worse"
    dg = d["degeneration"]
    assert dg["worse"] is True and dg["candidate_only"] == 12 and dg["unit"] == "approx"
    assert dg["difference"]["low"] > 0.5 and dg["verdict"]["text"].startswith("DEGENERATES")
    first = dg["prompts"][0]
    assert first["candidate"]["period"] == 15 and first["baseline"]["degenerate"] is False
    assert dg["rules"]["ngram"] == 8
    back = Report.from_json(json.dumps(summary_dict(looping)))
    assert back.candidates[0].correctness.degeneration == looping.candidates[0].correctness.degeneration
