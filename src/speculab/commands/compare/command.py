"""The `speculab compare` command: its flags as one record; two results read and paired into an A/B run (its report
written and shown through the caller's `CompareScreen`, then the gates), or, where a side keeps no request, compared
run by run; and `speculab report`, which renders or decides a saved run or comparison again."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from speculab.commands.compare.arms import arm_names, output_dir, parse_names, row_arm_names
from speculab.commands.compare.pairing import inputs_from_results
from speculab.commands.compare.run_level import (
    compare_summaries,
    rows_at_shared_loads,
    save,
    saved_run_level,
    summaries_of,
)
from speculab.errors import UserError
from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE
from speculab.harness.gates.answers import headline_answers
from speculab.harness.gates.asked import parse_fail_on, parse_margin, report_options
from speculab.harness.gates.check import RunLevelGate, check_fail_on, check_report
from speculab.harness.imports.registry import result_path
from speculab.harness.imports.summaries.rows import A_ROW, B_ROW, parse_row
from speculab.harness.results.ab_dir import check_ab_output_dir, save_inputs
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.harness.verdict.run_level import RunLevelReport, redecide


class CompareScreen(Protocol):
    """Where a comparison's report is written and shown: the CLI implements it with the report package."""

    def report(self, out: Path, options: ReportOptions, *, output: Path | None = None) -> Report:
        """An A/B run's summary.json and report.html from what is saved in `out` (written to `output`, else to
        `out`), shown."""

    def run_level(self, report: RunLevelReport, out: Path) -> None:
        """A run-level comparison, shown (`out`: where its summary.json was written; None: not written again)."""


@dataclass(frozen=True, slots=True)
class CompareFlags:
    """`speculab compare`'s flags as the CLI parsed them (nothing checked yet)."""

    a: Path
    b: Path | None = None  # None: A again, where --a-row / --b-row split one file into both arms
    output: Path | None = None
    fmt: str | None = None
    benchmark: int | None = None
    unpaired: bool = False
    names: str | None = None
    allow_different_models: bool = False
    allow_python_checks: bool = False
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    margin: str | None = None
    decide_on: str | None = None
    guardrail_floor: str | None = None  # `--guardrail-floor`: a time guardrail's absolute floor
    fail_on: str | None = None
    a_row: str | None = None  # `--a-row`: A's rows of a file of several configurations (summaries.rows)
    b_row: str | None = None


def _both(flags: CompareFlags) -> Path:
    """B's path: as given, or A's where the rows flags split one file (`compare FILE --a-row X --b-row Y`)."""
    if flags.b is not None:
        return flags.b
    if flags.a_row is None or flags.b_row is None:
        raise UserError(
            f"give two results, A (baseline) then B (candidate), or one file of several configurations with both "
            f"{A_ROW} and {B_ROW} (e.g. {A_ROW} draft=none {B_ROW} 2)"
        )
    return flags.a


def compare_command(flags: CompareFlags, screen: CompareScreen) -> Path:
    """Pair two results (A = baseline, B = candidate) and write the A/B report, or compare summary-only files run by
    run; the gates last. Returns the report's directory."""
    asked = parse_fail_on(flags.fail_on)
    given = parse_names(flags.names) if flags.names is not None else None
    gate = RunLevelGate(asked, flags.decide_on, flags.max_error_rate)
    flags = replace(flags, b=_both(flags))
    # summary-only files (no request on a side): the run is the unit; asked before a tool's directory is narrowed to
    # its one result, since a directory of summaries is a side's several runs
    if flags.fmt is None and (out := _compare_run_level(flags, given, gate, screen)) is not None:
        return out
    if flags.a_row is not None or flags.b_row is not None:
        raise UserError(f"{A_ROW} / {B_ROW} pick rows of summary files read at the run level; leave out --format")
    assert flags.b is not None  # given, or A's (_both)
    a, b = result_path(flags.a, flags.fmt), result_path(flags.b, flags.fmt)  # a tool's directory: its one result
    arms = arm_names(a, b, given)
    inputs = inputs_from_results(
        a,
        b,
        flags.fmt,
        flags.benchmark,
        flags.unpaired,
        names=arms,
        allow_different_models=flags.allow_different_models,
    )
    out = flags.output or output_dir(arms)
    check_ab_output_dir(out)
    save_inputs(out, inputs)
    options = report_options(
        allow_python_checks=flags.allow_python_checks,
        max_error_rate=flags.max_error_rate,
        margin=flags.margin,
        decide_on=flags.decide_on,
        guardrail_floor=flags.guardrail_floor,
    )
    check_report(screen.report(out, options), options, out, asked)
    return out


def _compare_run_level(
    flags: CompareFlags, names: tuple[str, str] | None, gate: RunLevelGate, screen: CompareScreen
) -> Path | None:
    """`compare` of summary-only files (no per-request data on a side): compared at the run level and written to
    OUTPUT/summary.json (default: compare-A-vs-B, as the arms are named); None where both keep per-request data
    (the per-prompt A/B). --benchmark and --unpaired choose among requests: refused here."""
    assert flags.b is not None  # given, or A's (_both)
    rows = tuple(parse_row(t, f) if t is not None else None for t, f in ((flags.a_row, A_ROW), (flags.b_row, B_ROW)))
    runs = summaries_of(flags.a, flags.b, (rows[0], rows[1]))
    if runs is None:
        return None
    if flags.benchmark is not None or flags.unpaired:
        raise UserError(
            "--benchmark / --unpaired: summary-only files are compared run by run at every load, with no requests to "
            "pick or pair; leave them out"
        )
    arms = names or row_arm_names(flags.a, flags.b, flags.a_row, flags.b_row)
    unmatched: tuple[ReportWarning, ...] = ()
    if rows != (None, None):  # one file's rows: a load only one arm has is left out, and said
        runs, unmatched = rows_at_shared_loads(runs)
    report = compare_summaries(
        flags.a,
        flags.b,
        runs,
        parse_margin(flags.margin) or {},
        names=arms,
        allow_different_models=flags.allow_different_models,
        max_error_rate=flags.max_error_rate,
    )
    report = replace(report, notes=report.notes + unmatched)
    out = flags.output or output_dir(arms)
    save(out, report)
    screen.run_level(report, out)
    gate.check(report, out)
    return out


@dataclass(frozen=True, slots=True)
class ReportFlags:
    """`speculab report`'s flags: the saved run or comparison, where to write, and what to decide again."""

    directory: Path
    output: Path | None = None
    seed: int = 0
    allow_python_checks: bool = False
    margin: str | None = None
    decide_on: str | None = None
    guardrail_floor: str | None = None
    fail_on: str | None = None


def report_command(flags: ReportFlags, screen: CompareScreen) -> Path:
    """`speculab report DIR`: a saved A/B run (`run`, `demo`, `compare`) rendered again from its inputs, or a run-level
    comparison decided again against --margin and written back (or to --output); then the gates. Returns where the
    report is."""
    asked = parse_fail_on(flags.fail_on)
    gate = RunLevelGate(asked, flags.decide_on, DEFAULT_MAX_ERROR_RATE, error_gate=False)
    if (written := _report_run_level(flags, gate, screen)) is not None:
        return written
    options = report_options(
        allow_python_checks=flags.allow_python_checks,
        seed=flags.seed,
        margin=flags.margin,
        decide_on=flags.decide_on,
        guardrail_floor=flags.guardrail_floor,
    )
    out = flags.output or flags.directory
    report = screen.report(flags.directory, options, output=flags.output)
    check_fail_on(headline_answers(report), asked, out)
    return out


def _report_run_level(flags: ReportFlags, gate: RunLevelGate, screen: CompareScreen) -> Path | None:
    """A run-level comparison's directory (DIR/summary.json only): re-decided with --margin, written back (or to
    --output) and shown; None for an A/B run's directory."""
    report = saved_run_level(flags.directory)
    if report is None:
        return None
    if (margins := parse_margin(flags.margin)) is not None:
        report = redecide(report, margins)
    written = None
    if flags.output is not None or flags.margin is not None:
        written = save(flags.output or flags.directory, report, again=flags.output is None).parent
    screen.run_level(report, written)
    gate.check(report, written or flags.directory)
    return written or flags.directory
