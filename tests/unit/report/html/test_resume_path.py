"""report.html of a run that did not finish names the run's own directory in `speculab run --resume`, as the terminal
does, never the placeholder DIR; re-rendered elsewhere (`speculab report DIR --output X`), it still names DIR, the
run to resume (issue 36)."""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import save_inputs
from speculab.harness.verdict.model import ReportOptions
from speculab.report.render import render_run_dir

LOADS = (LevelSpec("concurrency", 1, ("low", "sweep")), LevelSpec("concurrency", 4, ("sweep",)))


def _interrupted_run(root: Path) -> Path:
    cand = ArmEffect(tpot_factor={"c1": 0.5, "c4": 0.5}, acceptance_length=2.5)
    inputs = make_inputs(
        n_prompts=12, repeats=1, levels=LOADS, candidates={"ngram-k4": cand}, skip=(("ngram-k4", "c4"),)
    )
    save_inputs(root, replace(inputs, interrupted=True))
    return root


def _finish_line(page: Path) -> str:
    text = html.unescape(page.read_text(encoding="utf-8"))
    return next(ln for ln in text.splitlines() if "speculab run --resume" in ln)


def test_the_page_names_the_run_directory_to_resume(tmp_path: Path):
    run = _interrupted_run(tmp_path / "run")
    render_run_dir(run, None, ReportOptions(n_resamples=200))
    line = _finish_line(run / "report.html")
    assert f"speculab run --resume {run}<" in line, line
    assert "--resume DIR" not in line


def test_rendered_elsewhere_it_still_names_the_run(tmp_path: Path):
    run, other = _interrupted_run(tmp_path / "run"), tmp_path / "elsewhere"
    render_run_dir(run, other, ReportOptions(n_resamples=200))
    assert f"speculab run --resume {run}<" in _finish_line(other / "report.html")
