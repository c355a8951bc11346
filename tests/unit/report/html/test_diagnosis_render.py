"""diagnosis.json -> the report slot's view, the standalone page and the terminal summary: formatting only, every
string escaped, the findings first."""

from __future__ import annotations

import io

from rich.console import Console

from speculab.commands.diagnose import analysis as dg
from speculab.commands.diagnose.causes import PHASE_BASELINE, PHASE_COLD, PHASE_PREFILL, PHASE_WARM, Inputs
from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, TokenCountSource
from speculab.report.console.diagnosis import print_diagnosis
from speculab.report.html.diagnosis import diagnosis_view, render_diagnosis_page


def rec(i: int, ttft: float, n: int = 20, prompt: int = 100, error: str | None = None) -> RequestRecord:
    if error is not None:
        return RequestRecord(i, 0.0, 0.0, 0.1, error=ErrorInfo(ErrorCategory.HTTP, error, 500))
    chunks = tuple(ChunkEvent(ttft + k * 0.01, "x ", 1) for k in range(n))
    return RequestRecord(i, 0.0, 0.0, chunks[-1].t_s, chunks=chunks, prompt_tokens=prompt, completion_tokens=n,
                         token_count_source=TokenCountSource.CONTINUOUS_USAGE)  # fmt: skip


def document() -> dict:
    phases = {
        PHASE_COLD: [rec(0, 2.0)],
        PHASE_WARM: [rec(1, 0.05), rec(2, 0.05)],
        PHASE_PREFILL: [rec(i, 0.02 + 1e-4 * n, 1, n) for i, n in enumerate([16, 64, 256, 1024])],
        PHASE_BASELINE: [rec(i, 0.05) for i in range(4)] + [rec(9, 0, error="<script>alert(1)</script>")],
    }
    doc = dg.analyze(Inputs(phases=phases)).to_dict()
    doc["run"] = {"model": "m<b>", "base_url": "http://x", "started_at": "a", "finished_at": "b"}
    return doc


def test_view_has_finding_cards_and_readable_rows() -> None:
    v = diagnosis_view(document())
    assert v["findings"][0]["finding"].startswith("#1 cold start")
    assert set(v["findings"][0]) == {"finding", "explains", "affects", "evidence", "next step"}
    assert "tok/s" in v["prefill"] and "first request" in v["cold start"]
    assert all(isinstance(x, str) for k, x in v.items() if k != "findings")


def test_page_is_self_contained_and_escapes_untrusted_text() -> None:
    page = render_diagnosis_page(document())
    assert "<script" not in page and "&lt;script&gt;" in page  # the server's error message, escaped
    assert "m&lt;b&gt;" in page and "<link" not in page and "src=" not in page  # nothing fetched from elsewhere
    assert page.index("Findings") < page.index("Measurements")


def test_console_prints_findings_first() -> None:
    buf = io.StringIO()
    print_diagnosis(Console(file=buf, width=120), document(), None)
    out = buf.getvalue()
    assert out.startswith("Diagnosis: cold start explains the most latency")
    assert out.index("1. cold start") < out.index("2. generation") < out.index("prefill ")
    assert "warning:" in out and "1 of 5 requests failed" in out


def test_the_ab_reports_diagnosis_slot_renders_the_view() -> None:
    from dataclasses import replace

    from tests.fakes.ab_inputs import make_inputs

    from speculab.harness.design import LevelSpec
    from speculab.harness.verdict.build import build_report
    from speculab.harness.verdict.model import ReportOptions
    from speculab.report.html.page import render_html

    inputs = make_inputs(n_prompts=6, repeats=1, levels=(LevelSpec("concurrency", 1, ("low",)),))
    report = build_report(inputs, ReportOptions(n_resamples=200))
    html = render_html(replace(report, diagnosis=diagnosis_view(document())))
    section = html[html.index('id="diagnosis"') :]
    assert "#1 cold start" in section and "next step" in section and "tok/s" in section
    assert "<script>alert" not in html


def test_piped_output_keeps_each_line_whole_and_a_slower_prefix_saves_nothing() -> None:
    """Issue 24: `diagnose` printed "saves -5.0 ms" and, piped, wrapped mid-phrase at 80 columns."""
    doc = document()
    doc["prefix_caching"] = {"enabled": False, "prefix_tokens": 256, "shared_ttft_s": 0.03, "control_ttft_s": 0.025,
                             "saving_s": -0.005, "expected_saving_s": 0.02}  # fmt: skip
    buf = io.StringIO()
    print_diagnosis(Console(file=buf, width=80), doc, None)  # a file: not a terminal
    out = buf.getvalue()
    assert "saves -" not in out and "(5.0 ms slower, no saving; a full hit would save 20.0 ms)" in out
    lines = out.splitlines()
    assert any(len(ln) > 80 for ln in lines)  # nothing cut at the console's width
    assert any(ln.startswith("prefix caching  off: 256-token shared prefix") for ln in lines)
    assert any("TPOT 10.0 ms over 20 output tokens" in ln for ln in lines)


def old_document() -> dict:
    """A diagnosis.json /1: findings, warnings, the queueing check and the disaggregation held their sentences."""
    finding = {"cause": "queueing", "title": "queueing at concurrency 4", "explained_s": 0.5, "share": 0.4,
               "affects": "requests <at> load", "evidence": "TTFT went up", "next_step": "add capacity",
               "rank": 1}  # fmt: skip
    return {
        "schema": "speculab.diagnosis/1",
        "findings": [finding],
        "checked": [{**finding, "title": "cold start", "rank": 0}],
        "queueing": {"measured": False, "note": "pass --concurrency N (your operating point) to measure queueing"},
        "disaggregation": "prefill and decode interfere under load: split them",
        "warnings": ["1 of 5 requests failed in phase prefill (first: <b>boom</b>)"],
    }


def test_an_old_diagnosis_renders_its_saved_sentences() -> None:
    doc = old_document()
    buf = io.StringIO()
    print_diagnosis(Console(file=buf, width=200), doc, None)
    out = buf.getvalue()
    assert out.startswith("Diagnosis: queueing at concurrency 4 explains the most latency")
    assert "affects requests <at> load" in out and "evidence: TTFT went up" in out and "next: add capacity" in out
    assert "checked, below the thresholds: cold start" in out
    assert "prefill/decode interference: prefill and decode interfere under load: split them" in out
    assert "queueing        pass --concurrency N" in out
    assert "warning: 1 of 5 requests failed in phase prefill (first: <b>boom</b>)" in out
    page = render_diagnosis_page(doc)
    assert "requests &lt;at&gt; load" in page and "&lt;b&gt;boom&lt;/b&gt;" in page and "<b>boom" not in page
    assert diagnosis_view(doc)["findings"][0]["evidence"] == "TTFT went up"


def test_findings_and_warnings_are_records_worded_by_the_report() -> None:
    doc = document()
    top = doc["findings"][0]
    assert set(top) == {"cause", "explained_s", "share", "fields", "rank"}  # no sentence stored
    assert top["cause"] == "cold_start" and top["fields"]["first_request_ttft_s"] == 2.0
    assert all(isinstance(w, dict) and w["kind"] for w in doc["warnings"])
    assert "note" not in doc["queueing"] and "note" not in doc["prefix_caching"]
    card = diagnosis_view(doc)["findings"][0]
    assert card["evidence"] == "warm TTFT 0.050 s; first request 2.000 s"
