"""A phased load in the report (issue 52): the recommendation names the window that keeps plain, and report.html
draws both arms' latency over the schedule's time with the load beneath, and a row per window."""

from __future__ import annotations

import re

from tests.fakes.phased_inputs import ADAPTIVE, phased

from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.html.page import render_html
from speculab.report.recommendation import recommendation_lines

FAST = ReportOptions(n_resamples=300)


def test_the_headline_names_the_transition_that_keeps_plain():
    report = build_report(phased(ADAPTIVE, stall_into_high_s=0.5), FAST)
    (headline, *_) = recommendation_lines(report)
    assert headline.startswith("recommendation: the choice depends on the phase: ngram k=4 pays at phase 1, ")
    assert "keep plain at into phase 2, concurrency 8 (80–100 s) (TPOT 1.99× faster, but TTFT" in headline


def test_report_html_draws_the_schedule_and_a_row_per_window():
    report = build_report(phased(), FAST)
    html = render_html(report)
    section = html[html.index('<section id="phases">') : html.index("</section>", html.index('<section id="phases">'))]
    assert section.count("<svg") == 1 and "seconds into the schedule (send time)" in section
    rows = re.findall(r"<tr><td>(.*?)</td>", section)
    assert rows == [
        "phase 1, concurrency 1 (0–80 s)",
        "into phase 2, concurrency 8 (80–100 s)",
        "phase 2, concurrency 8 (100–120 s)",
        "into phase 3, concurrency 1 (120–140 s)",
        "phase 3, concurrency 1 (140–200 s)",
    ]
    assert re.search(r"ngram k=4: TPOT slower 0\.6\d× \[0\.6\d–0\.6\d\]", section)  # the high phase, its interval
    assert "stalled 0 of" in section


def test_a_run_without_phases_has_no_phases_section():
    from tests.fakes.ab_inputs import make_inputs

    assert '<section id="phases">' not in render_html(build_report(make_inputs(repeats=1), FAST))
