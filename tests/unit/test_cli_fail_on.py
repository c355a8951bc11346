"""`--fail-on ANSWERS` (issue 40): `speculab report DIR --fail-on slower` exits 5 for a slower candidate, after
summary.json and report.html are written, and 0 for an A-vs-A run; a misspelt answer is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.ab_inputs import ArmEffect, make_inputs
from tests.fakes.cli_runner import one_line_error, run_main

from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import save_inputs

ONE_LOAD = (LevelSpec("concurrency", 1, ("low", "sweep")),)


def _saved(tmp_path: Path, cand: ArmEffect) -> Path:
    save_inputs(tmp_path, make_inputs(n_prompts=30, repeats=1, levels=ONE_LOAD, candidates={"ngram-k4": cand}))
    return tmp_path


def test_report_fails_on_a_slower_candidate_after_writing_everything(tmp_path: Path, capsys):
    d = _saved(tmp_path, ArmEffect(tpot_factor={"c1": 1.6}, acceptance_length=1.5))
    code, out, err = run_main(capsys, "report", str(d), "--fail-on", "inconclusive,slower")
    assert code == 5, err
    line = one_line_error(err)
    assert "--fail-on inconclusive,slower: ngram k=4 at concurrency 1: slower" in line and str(d) in line
    assert (d / "summary.json").is_file() and (d / "report.html").is_file() and "TPOT" in out
    assert run_main(capsys, "report", str(d), "--fail-on", "worse,errors")[0] == 0  # only what was named fails


def test_report_passes_an_a_v_a_run(tmp_path: Path, capsys):
    d = _saved(tmp_path, ArmEffect(acceptance_length=2.0))
    code, _, err = run_main(capsys, "report", str(d), "--fail-on", "slower")
    assert code == 0, err


@pytest.mark.parametrize(("given", "said"), [("slowr", "did you mean `slower`?"), (",", "name one or more of")])
def test_a_misspelt_answer_is_one_line_before_anything_runs(tmp_path: Path, capsys, given: str, said: str):
    code, _, err = run_main(capsys, "report", str(tmp_path), "--fail-on", given)
    assert code == 2 and said in one_line_error(err)
    assert not (tmp_path / "summary.json").exists()
