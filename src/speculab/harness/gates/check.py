"""The gates, checked after everything is written: `--fail-on`'s answers (exit 5, `AnswerMatched`) and the error
gate (exit 4, `ErrorRateExceeded`), for an A/B report and a run-level comparison alike."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from speculab.config.experiment import DEFAULT_DECIDE_ON
from speculab.errors import AnswerMatched, ErrorRateExceeded, UserError
from speculab.harness.gates.answers import headline_answers, report_error_gate
from speculab.harness.gates.asked import parse_decide_on
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.verdict.model import Answer, Report, ReportOptions
from speculab.harness.verdict.run_level import (
    RUN_LEVEL_UNANSWERABLE,
    RunLevelReport,
    run_level_answers,
    run_level_error_gate,
)


def check_error_gate(why: ReportWarning | None, where: Path | None) -> None:
    """Exit 4 when the error gate failed (results were written and printed before), carrying the gate's record: the
    CLI says it in one line, in the report's words."""
    if why is not None:
        raise ErrorRateExceeded(why, where)


def check_fail_on(answers: Iterable[Answer], asked: tuple[str, ...], out: Path) -> None:
    """Exit 5 when an answer `--fail-on` names was given, carrying every one that matched: the CLI says them in one
    line (at most three, then how many more), in the report's words."""
    if hits := [(answer, where) for answer, where in answers if answer in asked]:
        raise AnswerMatched(asked, hits, out)


def check_report(report: Report, options: ReportOptions, out: Path, fail_on: tuple[str, ...] = ()) -> None:
    """An A/B report's gates: `--fail-on` first (the user named the answers that fail their gate, errors too), then
    the error gate."""
    check_fail_on(headline_answers(report), fail_on, out)
    check_error_gate(report_error_gate(report, options.max_error_rate), out)


@dataclass(frozen=True, slots=True)
class RunLevelGate:
    """--fail-on / --decide-on / --max-error-rate for a run-level comparison (summary-only files): the deciding
    metric's median figure at each load and each run's lost requests are its answers; correctness ("worse") is not in
    such files, so asking for it is refused rather than passing a gate that could never fail."""

    asked: tuple[str, ...]
    decide_on: str | None
    max_error_rate: float
    # whether the error gate exits 4 (`compare`, as an A/B run's; `speculab report` of a saved comparison re-renders
    # it, and its --fail-on errors answers with the default rate, as for an A/B run)
    error_gate: bool = True

    def __post_init__(self) -> None:  # a misspelt --decide-on is one line before anything is written
        parse_decide_on(self.decide_on)

    def check(self, report: RunLevelReport, out: Path) -> None:
        """`--fail-on` first (exit 5), then the error gate on each run's own counts (exit 4), as `check_report`."""
        if self.asked:
            if cannot := [a for a in self.asked if a in RUN_LEVEL_UNANSWERABLE]:
                raise UserError(
                    f"--fail-on {','.join(cannot)}: summary-only files hold no outputs, so correctness cannot be "
                    "checked run by run; leave it out, or compare files with per-request outputs"
                )
            deciding = parse_decide_on(self.decide_on) or DEFAULT_DECIDE_ON
            check_fail_on(run_level_answers(report, deciding, self.max_error_rate), self.asked, out)
        if self.error_gate:
            check_error_gate(run_level_error_gate(report, self.max_error_rate), out)
