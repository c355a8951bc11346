"""The report's energy section (issue 40): present, with each arm's J per output token and tokens per joule, when
power samples exist (injected here, no GPU); one line, "not measured (no NVML device)", when none do."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.design import LevelSpec
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.report.console.ab import ab_renderable
from speculab.report.energy import NOT_MEASURED, energy_lines
from speculab.report.html.page import render_html

FAST = ReportOptions(n_resamples=300)


def _report(watts: dict[str, float] | None, usd_per_kwh: float | None = None) -> Report:
    cand = {"ngram-k4": ArmEffect(tpot_factor={"c1": 1 / 1.8}, acceptance_length=2.6)}
    levels = (LevelSpec("concurrency", 1, ("low", "sweep")),)
    inputs = make_inputs(n_prompts=16, repeats=3, levels=levels, candidates=cand)
    inputs = replace(inputs, setup=replace(inputs.setup, usd_per_kwh=usd_per_kwh))
    if watts is not None:
        inputs = inputs.with_runs(
            [replace(r, memory=_with_power(r.memory, watts[r.arm] + r.repeat)) for r in inputs.runs]
        )
    return build_report(inputs, FAST)


def _with_power(samples: tuple, watts: float) -> tuple:
    return tuple(replace(s, gpu_power_w=watts) for s in samples)


def _section(html: str) -> str:
    start = html.index('<section id="energy">')
    return html[start : html.index("</section>", start)]


def test_the_section_holds_each_arm_when_power_was_sampled():
    report = _report({"baseline": 300.0, "ngram-k4": 340.0}, usd_per_kwh=0.15)
    section = _section(render_html(report))
    assert NOT_MEASURED not in section and "J per output token" in section
    for arm in ("baseline", "ngram-k4"):
        e = report.levels[0].arm(arm).energy
        assert f"{e.j_per_output_token.estimate:,.3f} [" in section and f"{e.mean_power_w:,.0f} W" in section
    ratio = report.levels[0].comparison("ngram-k4").energy_ratio
    assert "J/token [" in section and ratio.estimate < 1 and "$" in section
    lines = energy_lines(report)
    assert len(lines) == 2 and lines[1].startswith("energy at concurrency 1: ngram k=4 ") and "vs baseline" in lines[1]
    console = Console(width=200, record=True)
    console.print(ab_renderable(report))
    assert "energy at concurrency 1: plain " in console.export_text()


def test_one_line_without_samples():
    report = _report(None)
    section = _section(render_html(report))
    assert "Energy: not measured (no NVML device)." in section and "<table" not in section
    assert energy_lines(report) == ["energy: not measured (no NVML device)"]
    console = Console(width=200, record=True)
    console.print(ab_renderable(report))
    assert "energy" not in console.export_text()


def test_comparisons_csv_holds_the_paired_energy_ratio(tmp_path):
    import csv

    from speculab.report.comparisons import ENERGY, write_comparisons

    report = _report({"baseline": 300.0, "ngram-k4": 340.0})
    with write_comparisons(tmp_path, report).open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] == ENERGY]
    ratio = report.levels[0].comparison("ngram-k4").energy_ratio
    assert len(rows) == 1 and float(rows[0]["estimate"]) == ratio.estimate and float(rows[0]["high"]) == ratio.high
    assert rows[0]["answer"] == "" and rows[0]["n"] == "3" and rows[0]["counted"] == "repeat"
    assert not [r for r in _csv_rows(tmp_path, _report(None)) if r["metric"] == ENERGY]


def _csv_rows(tmp_path, report):
    import csv

    from speculab.report.comparisons import write_comparisons

    with write_comparisons(tmp_path, report).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))
