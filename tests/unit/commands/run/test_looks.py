"""A look of adaptive repeats: the comparisons still open are records of their TPOT decision and interval (#48 item
3), kept in inputs.json's looks and said after the look in the words the look said when they were sentences."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.commands.run.looks import take_look
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import save_inputs
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.report.console.run_progress import RunProgress
from speculab.report.phrases import warning_text

# the sentence `take_look` returned for this run before the comparisons were records (commit 4de3490)
OPEN = "ngram-k4 at concurrency 1 (inconclusive: 1.03× [1.01–1.05] against the ±3% margin)"


def _near_the_margin(out: Path) -> Path:
    """A run of 12 prompts at concurrency 1 whose candidate is 5% faster: too close to the 3% margin to decide."""
    speed = {"ngram-k4": ArmEffect(tpot_factor={"c1": 1 / 1.05})}
    level = (LevelSpec("concurrency", 1, ("low", "operating")),)
    save_inputs(out, make_inputs(n_prompts=12, repeats=1, levels=level, candidates=speed))
    return out


def test_an_open_comparison_is_a_record_the_report_words_as_before(tmp_path: Path) -> None:
    done, still = take_look(_near_the_margin(tmp_path / "run"), 0.05)
    assert not done
    (look,) = still
    assert look.kind == WarningKind.LOOK_OPEN
    fields = look.fields
    assert (fields["candidate"], fields["at"], fields["decision"]) == ("ngram-k4", "concurrency 1", "inconclusive")
    assert fields["low"] < fields["speedup"] < fields["high"] and fields["margin"] == 0.03
    assert warning_text(look) == OPEN
    # as inputs.json keeps it, and as an older inputs.json kept it (the sentence): the same words
    assert warning_text(ReportWarning.from_dict(look.to_dict())) == OPEN


def test_the_line_after_a_look_names_what_is_still_open(tmp_path: Path) -> None:
    _, still = take_look(_near_the_margin(tmp_path / "run"), 0.05)
    line = ReportWarning(WarningKind.LOOK_STILL_OPEN, fields={"repeat": 2, "open": [u.to_dict() for u in still]})
    assert warning_text(line) == f"after repeat 2: still open: {OPEN}"
    older = ReportWarning(WarningKind.LOOK_STILL_OPEN, fields={"repeat": 2, "open": [OPEN, OPEN]})
    assert warning_text(older) == f"after repeat 2: still open: {OPEN}, {OPEN}"
    out = io.StringIO()
    RunProgress(Console(file=out, width=300)).phase(line)  # the terminal says it as a step of the run
    assert out.getvalue() == f"- after repeat 2: still open: {OPEN}\n"
