"""The A/B verdict in an 80-column terminal: arm names on one line, no header cut, failed requests still shown."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.records import ErrorCategory, ErrorInfo
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.console.ab import ab_renderable


def _render(width: int, *, failing: bool) -> str:
    cands = {"ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}), "draft_model-k4": ArmEffect(tpot_factor={"c1": 0.8})}
    inputs = make_inputs(n_prompts=12, repeats=1, candidates=cands)
    if failing:
        dead = ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500)
        runs = tuple(
            replace(r, records=tuple(x if x.index % 3 else replace(x, error=dead) for x in r.records))
            if r.arm == "draft_model-k4"
            else r
            for r in inputs.runs
        )
        inputs = inputs.with_runs(runs)
    console = Console(width=width, record=True, force_terminal=False)
    console.print(ab_renderable(build_report(inputs, ReportOptions(n_resamples=200))))
    return console.export_text()


def test_the_tables_fit_80_columns_without_wrapping_or_cutting():
    """Issue 17: at 80 columns arm names wrapped ("ngram" / "k=4") and headers were cut ("acc.l…")."""
    for failing in (False, True):
        text = _render(80, failing=failing)
        rows = [ln for ln in text.splitlines() if ln.startswith(("arm ", "plain ", "ngram k=4 ", "draft_model k=4 "))]
        assert len(rows) == 3 * 4, text  # header + 3 arms, at each of the 3 loads: nothing wrapped
        assert all(len(ln) <= 80 for ln in text.splitlines())
        assert "…" not in "\n".join(rows) and all("acc.len" in ln for ln in rows if ln.startswith("arm "))
    assert "failed requests: draft_model k=4 4 of 12" in _render(80, failing=True)
