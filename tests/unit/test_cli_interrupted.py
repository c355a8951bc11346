"""An interrupted `speculab run`/`demo` (exit 130) names `speculab run --resume DIR` once: the recommendation block
(stdout) says it, so the "interrupted" line on stderr names it only when there is no such block (issue 36)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.cli.ab import _Screen
from speculab.harness.design import LevelSpec
from speculab.harness.gates.asked import report_options
from speculab.harness.results.ab_dir import save_inputs
from speculab.harness.results.ab_run import ABRun

LOADS = (LevelSpec("concurrency", 1, ("low", "sweep")), LevelSpec("concurrency", 4, ("sweep",)))


def _said(capsys: pytest.CaptureFixture[str], out: Path, inputs: ABRun) -> tuple[str, str]:
    save_inputs(out, inputs)
    screen = _Screen()
    screen.console = Console(stderr=True, color_system=None, soft_wrap=True)
    screen.report(out, report_options(allow_python_checks=False), interrupted=True)  # as `speculab run` does
    said = capsys.readouterr()
    return said.out, said.err


def test_an_interrupted_run_names_resume_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cand = ArmEffect(tpot_factor={"c1": 0.5, "c4": 0.5}, acceptance_length=2.5)
    inputs = make_inputs(
        n_prompts=12, repeats=1, levels=LOADS, candidates={"ngram-k4": cand}, skip=(("ngram-k4", "c4"),)
    )
    out = tmp_path / "run"
    text, err = _said(capsys, out, replace(inputs, interrupted=True))
    assert "recommendation: none yet: the run did not finish" in text
    assert (text + err).count("--resume") == 1, text + err
    assert f"finish it: speculab run --resume {out}" in text
    assert err.strip() == "interrupted"  # still says why the exit is 130


def test_without_a_recommendation_block_the_terminal_still_says_how_to_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    inputs = make_inputs(n_prompts=12, repeats=1, levels=LOADS[:1], candidates={})  # nothing to recommend between
    out = tmp_path / "run"
    text, err = _said(capsys, out, replace(inputs, interrupted=True))
    assert "recommendation:" not in text
    assert (text + err).count("--resume") == 1, text + err
    assert f"interrupted: the report covers the part that ran; finish it with `speculab run --resume {out}`" in err
