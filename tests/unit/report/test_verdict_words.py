"""The words the verdict's notes, the correctness verdict, the run-level comparison's notes, compare's reason for
not pairing and the gates' exit lines said when they were sentences made below the report (fixtures/verdict_words.json,
saved from the code before #48 item 3 converted them) are the words their records give now, made by the report."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from fakes.ab_inputs import ArmEffect, make_inputs, with_check_failures
from speculab.commands.compare.pairing import _why_unpaired
from speculab.commands.compare.run_level import compare_summaries, save, saved_run_level
from speculab.errors import ErrorRateExceeded, UserError
from speculab.harness.analysis.comparison.paired import compare_paired
from speculab.harness.analysis.comparison.unpaired import compare_unpaired
from speculab.harness.analysis.metrics import error_gate
from speculab.harness.design import LevelSpec
from speculab.harness.gates.answers import headline_answers, report_error_gate
from speculab.harness.gates.check import check_error_gate, check_fail_on
from speculab.harness.imports.summaries.summary import Aggregates, RunSummary
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.verdict import correctness
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.correctness import CorrectnessOptions
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.harness.verdict.run_level import RunLevelReport, run_level_answers, run_level_from_json
from speculab.report.console.exit import error_line
from speculab.report.console.run_level import run_level_renderable
from speculab.report.phrases import reason_text, warning_lines, warning_text

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
    assert note is not None and note.kind.value.startswith("metric_")
    assert _said(note) == SAID_BEFORE[f"note.{case}"]


def _checks(rate: float) -> SimpleNamespace:
    return SimpleNamespace(pass_rate=SimpleNamespace(estimate=rate))


def _mcnemar(b: int, c: int, p: float) -> SimpleNamespace:
    return SimpleNamespace(b=b, c=c, p_value=p)


OPTS = CorrectnessOptions()
# `_verdict`'s arguments, one case per finding: temperature 0, confident, near-tie and unclassified divergences, of how
# many differing, of how many prompts, McNemar, the arms' checks, the length test's p, the lengths, options, self-rate
VERDICTS = {
    "lower": (True, 0, 0, 0, 0, 20, _mcnemar(5, 0, 0.0312), _checks(0.9), _checks(0.65), None, [1.0], [1.0]),
    "suspicious": (True, 2, 1, 0, 3, 20, None, None, None, None, [1.0], [1.0]),
    "longer": (False, 0, 0, 0, 0, 20, None, None, None, 0.0123, [1.0, 2.0], [3.0, 4.0]),
    "shorter": (False, 0, 0, 0, 0, 20, None, None, None, 0.0123, [3.0, 4.0], [1.0, 2.0]),
    "higher": (True, 0, 0, 0, 0, 20, _mcnemar(0, 6, 0.0156), _checks(0.6), _checks(0.9), None, [1.0], [1.0]),
    "identical_t0": (True, 0, 0, 0, 0, 20, None, None, None, None, [1.0], [1.0]),
    "unclassified": (True, 0, 1, 2, 3, 20, None, None, None, None, [1.0], [1.0]),
    "near_ties": (True, 0, 2, 0, 2, 20, None, None, None, None, [1.0], [1.0]),
    "identical_t": (False, 0, 0, 0, 0, 20, None, None, None, None, [1.0], [1.0]),
    "not_compared_p": (False, 0, 0, 0, 4, 20, None, None, None, 0.456, [1.0], [1.0]),
    "not_compared": (False, 0, 0, 0, 4, 20, None, None, None, None, [1.0], [1.0]),
    "no_difference": (False, 0, 0, 0, 4, 20, None, _checks(0.8), _checks(0.8), 0.456, [1.0], [1.0]),
}
C1 = (LevelSpec("concurrency", 1, ("low", "operating")),)


def _said(w: ReportWarning) -> str:
    """A record's words after a trip through summary.json's shape, as `speculab report` reads it back."""
    return reason_text(ReportWarning.from_dict(json.loads(json.dumps(w.to_dict()))))


@pytest.mark.parametrize("case", sorted(VERDICTS))
def test_the_correctness_verdict_says_what_it_said(case: str) -> None:
    verdict = correctness._verdict(*VERDICTS[case], OPTS, None)
    assert verdict.kind.value.startswith("correctness_") and _said(verdict) == SAID_BEFORE[f"correctness.{case}"]


def test_a_pass_rate_worse_beyond_the_margin_its_failed_checks_and_a_verdict_not_judged_say_what_they_said() -> None:
    inputs = with_check_failures(make_inputs(n_prompts=200, repeats=1, levels=C1), "ngram-k4", 30)
    worse = correctness.compare_correctness(inputs, "ngram-k4", OPTS)
    assert worse is not None and worse.verdict.kind is WarningKind.CORRECTNESS_WORSE
    assert _said(worse.verdict) == SAID_BEFORE["correctness.worse_margin"]
    assert worse.candidate_checks is not None
    failed = worse.candidate_checks.failures[:4]
    assert [_said(f) for f in failed] == SAID_BEFORE["correctness.failures"]
    assert failed[0].to_dict()["fields"] == {
        "item": 0,
        "prompt_id": "p0",
        "check": "contains",
        "reason": "missing ' the'",
    }
    other = correctness.compare_correctness(inputs, "ngram-k4", replace(OPTS, margin=0.025, alpha=0.1))
    assert other is not None and _said(other.verdict) == SAID_BEFORE["correctness.worse_margin_2"]
    flaky = ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5, error_rate=0.3)
    broken = make_inputs(n_prompts=30, repeats=1, levels=C1, candidates={"ngram-k4": flaky})
    gated = correctness.compare_correctness(broken, "ngram-k4", OPTS, max_error_rate=0.02)
    assert gated is not None and gated.verdict.kind is WarningKind.CORRECTNESS_NOT_JUDGED
    assert _said(gated.verdict) == SAID_BEFORE["correctness.not_judged"]


C4 = LevelSpec("concurrency", 4, ("low", "operating"))
R8 = LevelSpec("rate", 8.0, ("operating",))


def _summary(tpot_s: float, level: LevelSpec = C4, run: int = 1, failed: int = 0, **kw: Any) -> RunSummary:
    return RunSummary(
        path=Path(kw.pop("path", "a.json")),
        tool=kw.pop("tool", "vllm bench serve"),
        level=level,
        aggregates=Aggregates({"tpot_median_s": tpot_s, "output_tok_s": 100.0}),
        completed=20,
        failed=failed,
        run=run,
        **kw,
    )


def _run_level() -> RunLevelReport:
    """Three runs a side at concurrency 4 (one of B's lost 5 of 25 requests), one at 8 req/s; B's model unnamed."""
    a = [_summary(0.030, run=i, path="plain.json", version="0.6.3", model="m") for i in (1, 2, 3)]
    b = [_summary(0.020, run=i, path="spec.json", tool="sglang bench_serving", failed=5 * (i == 2)) for i in (1, 2, 3)]
    a.append(_summary(0.03, R8, path="plain.json", version="0.6.3", model="m"))
    b.append(_summary(0.02, R8, path="spec.json", tool="sglang bench_serving"))
    return compare_summaries(Path("A"), Path("B"), (a, b), {})


def _run_level_2() -> RunLevelReport:
    """One run a side: A a directory's layout keeping per-request data too, B another tool and model."""
    a = [_summary(0.03, path="x", info={"layout": "sweep"}, per_request=True, label="A side", model="m1")]
    b = [_summary(0.02, path="y", tool="guidellm", version="0.3.0", model="m2")]
    return compare_summaries(Path("A"), Path("B"), (a, b), {}, allow_different_models=True)


@pytest.mark.parametrize(("case", "report"), [("notes", _run_level), ("notes_2", _run_level_2)])
def test_run_level_notes_say_what_they_said(case: str, report: Callable[[], RunLevelReport], tmp_path: Path) -> None:
    saved = run_level_from_json(save(tmp_path, report()).read_text(encoding="utf-8"))  # as `speculab report` reads it
    assert {n.kind for n in saved.notes} >= {WarningKind.RUN_LEVEL_UNIT, WarningKind.RUN_LEVEL_SIDE}
    assert warning_lines(saved.notes) == SAID_BEFORE[f"run_level.{case}"]


def _console(report: RunLevelReport) -> str:
    console = Console(record=True, width=300)
    console.print(run_level_renderable(report))
    return console.export_text()


def test_a_run_level_summary_1_reads_back_and_prints_the_notes_it_saved(tmp_path: Path) -> None:
    """run-level summary.json /1 saved its notes as sentences: read back they are notes, printed as the records are;
    `speculab report` finds such a directory as it finds a /3 one. A /2 file (the `loads[]` layout, before the A/B
    grammar) reads back as the comparison it saved."""
    report = _run_level()
    written = save(tmp_path, report)
    new = json.loads(written.read_text(encoding="utf-8"))
    assert new["schema"] == "speculab.report.run-level/3"
    two = {"schema": "speculab.report.run-level/2", **json_safe(report)}  # what /2 wrote: the record's own fields
    assert run_level_from_json(json.dumps(two)) == report == run_level_from_json(json.dumps(new))
    old = two | {"schema": "speculab.report.run-level/1", "notes": SAID_BEFORE["run_level.notes"]}
    written.write_text(json.dumps(old), encoding="utf-8")
    back = saved_run_level(tmp_path)
    assert back is not None and {n.kind for n in back.notes} == {WarningKind.NOTE}
    assert _console(back) == _console(run_level_from_json(json.dumps(new)))


@pytest.mark.parametrize(
    ("case", "problem", "asked"),
    [
        ("problem", "concurrency 4, run 1: prompt 3: 120 vs 121 input tokens", False),
        ("problem_asked", "prompt 0: the prompts differ", True),
        ("asked", None, True),
    ],
)
def test_why_two_runs_are_compared_unpaired_says_what_it_said(case: str, problem: str | None, asked: bool) -> None:
    """compare's note says why the runs are unpaired in the words it said when the reason was a sentence, and a record
    that kept that sentence (`why`, before #48 item 3 made it a field) says the same."""
    why = _why_unpaired(problem, asked)
    assert why is not None and "why" not in why
    hows = ["vLLM: --disable-shuffle"]
    note = ReportWarning(WarningKind.COMPARE_UNPAIRED, fields={**why, "hows": hows})
    said = _said(note)
    assert said.startswith(f"unpaired: {SAID_BEFORE[f'pairing.{case}']}. Each metric compares"), said
    kept = ReportWarning(WarningKind.COMPARE_UNPAIRED, fields={"why": SAID_BEFORE[f"pairing.{case}"], "hows": hows})
    assert _said(kept) == said
    assert _why_unpaired(None, False) is None and SAID_BEFORE["pairing.paired"] is None  # paired: no note


def _gated_by_errors() -> Report:
    """One candidate at concurrency 1 that lost 30% of its requests: the error gate fails there."""
    flaky = ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5, error_rate=0.3)
    inputs = make_inputs(n_prompts=30, repeats=1, levels=C1, candidates={"ngram-k4": flaky})
    return build_report(inputs, ReportOptions(n_resamples=200))


def _exit(gate: Callable[[], None]) -> str:
    """The line the CLI prints after "error:" for the error a gate raises."""
    with pytest.raises(UserError) as raised:
        gate()
    return error_line(raised.value)


def _where(where: str | ReportWarning) -> str:
    return warning_text(where) if isinstance(where, ReportWarning) else where


@pytest.mark.parametrize(
    ("case", "counts"),
    [
        ("cancelled", (6, 40, {"cancelled": 4, "http": 2}, 0.02)),
        ("mixed", (372, 400, {"connect": 300, "http": 72}, 0.05)),
    ],
)
def test_the_error_gate_says_what_it_said(case: str, counts: tuple[int, int, dict[str, int], float]) -> None:
    why = error_gate(*counts)
    assert why is not None and why.kind is WarningKind.ERROR_GATE
    assert (
        warning_text(ReportWarning.from_dict(json.loads(json.dumps(why.to_dict()))))
        == SAID_BEFORE[f"error_gate.{case}"]
    )


def test_the_gates_exit_lines_say_what_they_said() -> None:
    """The error gate's line (exit 4) and --fail-on's (exit 5), as the CLI prints them: the gate's record worded by the
    report where the line used to carry its sentence; the exception carries the records, its own message no words of
    them."""
    report = _gated_by_errors()
    gate = report_error_gate(report, 0.02)
    assert gate is not None and (gate.subject, gate.load) == ("ngram k=4", "concurrency 1")
    assert warning_text(gate) == SAID_BEFORE["error_gate.report"]
    answers = headline_answers(report)
    assert [[a, _where(w)] for a, w in answers] == SAID_BEFORE["answers.report"]
    out = Path("/tmp/out")
    assert _exit(lambda: check_error_gate(gate, out)) == SAID_BEFORE["exit.error_gate"]
    bench = error_gate(6, 40, {"http": 6}, 0.02)
    assert _exit(lambda: check_error_gate(bench, None)) == SAID_BEFORE["exit.error_gate_nowhere"]
    assert _exit(lambda: check_fail_on(answers, ("errors", "no-verdict"), out)) == SAID_BEFORE["exit.fail_on"]
    many = [("slower", f"c{i} at concurrency 1") for i in range(5)]
    assert _exit(lambda: check_fail_on(many, ("slower",), out)) == SAID_BEFORE["exit.fail_on_many"]
    with pytest.raises(ErrorRateExceeded) as raised:
        check_error_gate(gate, out)
    assert raised.value.why == gate and "8 of 30" not in str(raised.value)  # its numbers are the record's, worded above


def test_a_run_level_comparisons_answers_and_exit_line_say_what_they_said() -> None:
    answers = run_level_answers(_run_level(), "tpot_s", 0.05)
    assert [[a, _where(w)] for a, w in answers] == SAID_BEFORE["run_level.answers"]
    assert {w.kind for _, w in answers if isinstance(w, ReportWarning)} == {WarningKind.RUN_LOST_REQUESTS}
    got = _exit(lambda: check_fail_on(answers, ("errors",), Path("/tmp/rl")))
    assert got == SAID_BEFORE["exit.fail_on_run_level"]
    assert error_line(UserError("said as it is")) == "said as it is"  # any other error: its message
