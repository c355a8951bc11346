"""The words the verdict's notes, the correctness verdict, the run-level comparison's notes, compare's reason for
not pairing and the gates' exit lines said when they were sentences made below the report (fixtures/verdict_words.json,
saved from the code before #48 item 3 converted them) are the words their records give now, made by the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from speculab.harness.analysis.comparison.paired import compare_paired
from speculab.harness.analysis.comparison.unpaired import compare_unpaired
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.report.phrases import reason_text

SAID_BEFORE = json.loads((Path(__file__).parent / "fixtures" / "verdict_words.json").read_text(encoding="utf-8"))


def _values(xs: list[float]) -> dict[int, float]:
    return dict(enumerate(xs))


def _borderline(seed: int) -> ReportWarning | None:
    """A paired comparison whose geometric-mean interval parts from the signed-rank one (the fixture's seed)."""
    g = np.random.default_rng(seed)
    base = g.lognormal(0, 0.3, 12)
    cand = base * np.exp(g.normal(-0.06, 0.12, 12))
    cand[0] *= 3.0 if seed % 2 else 0.3
    rng = np.random.default_rng(0)
    return compare_paired("tpot_s", _values(list(cand)), _values(list(base)), rng, n_resamples=400).note


def _few_groups() -> ReportWarning | None:
    g = np.random.default_rng(1)
    cand, base = _values(list(g.uniform(0.9, 1.1, 12))), _values(list(g.uniform(0.9, 1.1, 12)))
    groups = {i: i // 4 for i in range(12)}
    return compare_paired("tpot_s", cand, base, np.random.default_rng(0), groups=groups, group_size=4).note


def _unpaired(cand: list[float], base: list[float], group_size: int = 1) -> ReportWarning | None:
    rng = np.random.default_rng(0)
    return compare_unpaired("tpot_s", _values(cand), _values(base), rng, n_resamples=50, group_size=group_size).note


NOTES = {
    "paired_few": lambda: (
        compare_paired(
            "tpot_s", _values([1.0, 1.1, 0.9]), _values([1.2, 1.0, 1.1]), np.random.default_rng(0), n_resamples=50
        ).note
    ),
    "paired_few_groups": _few_groups,
    "borderline_includes": lambda: _borderline(SAID_BEFORE["note.borderline_seeds"]["includes"]),
    "borderline_excludes": lambda: _borderline(SAID_BEFORE["note.borderline_seeds"]["excludes"]),
    "unpaired_few": lambda: _unpaired([1.0, 1.1, 0.9], [1.2, 1.0, 1.1, 1.3]),
    "unpaired_few_groups": lambda: _unpaired([1.0, 1.1, 0.9] * 3, [1.2, 1.0, 1.1, 1.3] * 2, group_size=4),
}


@pytest.mark.parametrize("case", sorted(NOTES))
def test_a_metrics_note_says_what_it_said(case: str) -> None:
    note = NOTES[case]()
    assert note is not None and note.kind is not WarningKind.NOTE
    assert reason_text(ReportWarning.from_dict(json.loads(json.dumps(note.to_dict())))) == SAID_BEFORE[f"note.{case}"]
