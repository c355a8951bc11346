"""`speculab run` and `speculab demo`: flags -> a plan run to the end (or to Ctrl-C), results streamed to the output
directory, the report written and shown (through the caller's `RunScreen`), then the gates.

Servers are always stopped; whatever finished is on disk in the A/B layout, so `speculab report DIR` renders a
partial run as well as a whole one.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Protocol

from speculab.commands.run.blocks import Reporter, Silent
from speculab.commands.run.demo import EMBEDDED, DemoConfig, demo_plan
from speculab.commands.run.lifecycle import Lifecycle
from speculab.commands.run.modes import mode_for
from speculab.commands.run.plan import RunPlan, describe_plan, plan_experiment
from speculab.commands.run.preflight import dry_run_interruptible, dry_run_lines, fit_when_known, size_lines
from speculab.commands.run.probing.predicted import with_prediction
from speculab.commands.run.recommended import shipped_config
from speculab.commands.run.resume import prepare_resume, resume_paths
from speculab.config import load_experiment
from speculab.errors import EndpointError
from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE
from speculab.harness.client.endpoint import Clock
from speculab.harness.client.request import make_session
from speculab.harness.gates.asked import parse_fail_on, report_options
from speculab.harness.gates.check import check_report
from speculab.harness.load.interrupt import run_interruptible
from speculab.harness.results.ab_dir import INPUTS_FILE, check_ab_output_dir, read_setup
from speculab.harness.results.ab_run import ChangeCheck
from speculab.harness.results.blocks import held_by_one_run
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.verdict.model import Report, ReportOptions


@dataclass(frozen=True, slots=True)
class RunOutcome:
    out_dir: Path
    interrupted: bool
    runs: int  # repeats finished (arm x level x repeat)


async def _run_to_end(life: Lifecycle) -> RunOutcome:
    """Both modes end here: inputs.json rewritten (final), interruptions noted, the GPU handle closed."""
    await fit_when_known(life)  # before anything is written or launched: a refusal leaves nothing behind
    life.write_inputs()
    try:
        await mode_for(life.plan).run(life)
    except BaseException as e:
        life.interrupt()
        why = textwrap.shorten(str(e).splitlines()[0], 300, placeholder=" ...") if str(e) else type(e).__name__
        life.note(ReportWarning(WarningKind.RUN_STOPPED_ON_ERROR, fields={"error": why}))
        raise
    finally:
        if life.stop.is_set() and not life.interrupted:
            life.interrupt()
        if life.interrupted and not any(n.kind == WarningKind.RUN_STOPPED_ON_ERROR for n in life.record.notes):
            life.note(ReportWarning(WarningKind.RUN_INTERRUPTED))
        with contextlib.suppress(Exception):
            life.write_inputs(final=True)
        if life.blocks.gpu is not None:
            life.blocks.gpu.close()
    return RunOutcome(life.out, life.interrupted, life.blocks.finished_runs)


async def run_plan(
    plan: RunPlan,
    out_dir: Path,
    *,
    stop: asyncio.Event | None = None,
    reporter: Reporter | None = None,
    clock: Clock = time.perf_counter,
    resume: bool = False,
) -> RunOutcome:
    """Run every arm at every level and repeat, streaming results to out_dir. Servers are always stopped.
    With adaptive repeats the verdict's own comparisons judge the results after each look (`run.looks`).
    `resume`: out_dir holds this plan's run, interrupted or killed; run what it lacks (`experiment.resume`)."""
    if resume and out_dir.is_dir() and not (out_dir / INPUTS_FILE).exists():
        resume = False  # killed before its first write: nothing to continue, so it starts here (if DIR holds nothing)
    if resume:
        read_setup(out_dir)  # a directory that holds no run is refused before anything is written to it
    else:
        check_ab_output_dir(out_dir)
    reporter = reporter or Silent()
    with held_by_one_run(out_dir):
        resumed = prepare_resume(plan, out_dir) if resume else None
        if resumed is not None:
            reporter.phase(resumed.summary)
        async with make_session(clock=clock) as session:
            life = Lifecycle(plan, out_dir, session, stop or asyncio.Event(), reporter, clock, resumed)
            return await _run_to_end(life)


def run_plan_interruptible(
    plan: RunPlan, out_dir: Path, *, reporter: Reporter | None = None, resume: bool = False
) -> RunOutcome:
    """`run_plan` on a fresh event loop where the first Ctrl-C stops cleanly (in-flight requests are recorded as
    cancelled, servers stopped, inputs.json marked interrupted) and a second one interrupts at once (servers are
    still stopped: every launch is inside try/finally)."""
    return run_interruptible(lambda stop: run_plan(plan, out_dir, stop=stop, reporter=reporter, resume=resume))


# --- the commands: `speculab run` and `speculab demo`, flags to gates ----------------------------------------------


class RunScreen(Protocol):
    """What a run shows the person who started it, and the report it writes: the CLI implements it with the report
    package (a command never renders)."""

    def change(self, change: ChangeCheck) -> None:
        """One candidate's single-change check, before anything is launched."""

    def line(self, text: str | ReportWarning) -> None:
        """A line about the run (its plan, its size, where its results go, a dry run's estimate), or a warning record
        the screen words."""

    def progress(self) -> Reporter:
        """Where the blocks tell their progress."""

    def report(self, out: Path, options: ReportOptions, *, interrupted: bool, ship: Ship | None) -> Report:
        """summary.json and report.html from what is on disk (with the configuration to ship, from `ship`), shown."""


Ship = Callable[[Report], Report]


@dataclass(frozen=True, slots=True)
class RunFlags:
    """`speculab run`'s flags as the CLI parsed them (nothing checked yet)."""

    experiment: Path | None = None
    output: Path | None = None
    resume: Path | None = None
    allow_extra_diff: bool = False
    allow_python_checks: bool = False
    max_model_len: int | None = None
    dry_run: bool = False
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    fail_on: str | None = None
    prediction: Path | None = None  # `speculab predict`'s prediction.json to start from (run.probing.predicted)


@dataclass(frozen=True, slots=True)
class DemoFlags:
    """`speculab demo`'s flags ('none' for --draft or --eagle leaves that arm out)."""

    output: Path | None = None
    quick: bool = False
    model: str = "demo"
    draft: str = "demo-draft"
    eagle: str = "demo-eagle"
    engine: str = EMBEDDED


def default_run_dir(stem: str) -> Path:
    """speculab-runs/STEM-YYYYmmdd-HHMMSS: where a run goes when --output is not given."""
    return Path("speculab-runs") / f"{stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def run_command(flags: RunFlags, screen: RunScreen) -> RunOutcome | None:
    """`speculab run`: the experiment planned (its changes shown), run to the end, its report written and shown, then
    its gates; None for --dry-run, which sends only probe requests and writes nothing."""
    asked = parse_fail_on(flags.fail_on)
    experiment, output = resume_paths(flags.resume, flags.experiment, flags.output)  # --resume DIR: DIR, its file
    exp = load_experiment(experiment)
    source_text = experiment.read_text(encoding="utf-8")  # now: recommended.yaml is this file, whatever happens to it
    out = output or default_run_dir(experiment.stem)
    if flags.resume is None and not flags.dry_run:
        check_ab_output_dir(out)
    plan = plan_experiment(
        exp, allow_extra_diff=flags.allow_extra_diff, on_change=screen.change, max_model_len=flags.max_model_len
    )
    if flags.prediction is not None:
        plan = with_prediction(plan, flags.prediction)
    if flags.dry_run:  # only probe requests are sent (docs/experiment.md, "Before a run")
        for line in dry_run_lines(dry_run_interruptible(plan)):
            screen.line(line)
        return None
    options = report_options(
        allow_python_checks=flags.allow_python_checks or exp.python_checks, max_error_rate=flags.max_error_rate
    )

    def ship(report: Report) -> Report:  # the config to ship, written beside the report (docs/recommendation.md)
        return replace(report, shipped=shipped_config(report, exp, source_text))

    return run_and_report(plan, out, screen, options, resume=flags.resume is not None, ship=ship, fail_on=asked)


def demo_command(flags: DemoFlags, screen: RunScreen) -> RunOutcome:
    """`speculab demo`: the demo experiment on the shipped models, run and reported as `speculab run` does."""
    out = flags.output or default_run_dir("demo")
    check_ab_output_dir(out)
    none = {"none": None}
    cfg = DemoConfig(
        model=flags.model,
        draft=none.get(flags.draft, flags.draft),
        eagle=none.get(flags.eagle, flags.eagle),
        engine=flags.engine,
        quick=flags.quick,
    )
    plan = demo_plan(cfg)
    for change in plan.changes:
        screen.change(change)
    return run_and_report(plan, out, screen, report_options(allow_python_checks=False))


def run_and_report(
    plan: RunPlan,
    out: Path,
    screen: RunScreen,
    options: ReportOptions,
    *,
    resume: bool = False,
    ship: Ship | None = None,
    fail_on: tuple[str, ...] = (),
) -> RunOutcome:
    """Run the plan, then write and show its report once; `ship` adds the configuration to ship to a run that
    finished. The gates are checked last, on a run that was not interrupted."""
    for line in [*describe_plan(plan), *size_lines(plan)]:
        screen.line(line)
    screen.line(f"results: {out}")
    try:
        outcome = run_plan_interruptible(plan, out, reporter=screen.progress(), resume=resume)
    except EndpointError:
        # e.g. a launched server exited mid-run: report what finished before the one-line error (exit 3)
        if (out / INPUTS_FILE).is_file():
            with contextlib.suppress(Exception):
                screen.report(out, options, interrupted=True, ship=None)
        raise
    done = not outcome.interrupted
    report = screen.report(out, options, interrupted=outcome.interrupted, ship=ship if done else None)
    if done:
        check_report(report, options, out, fail_on)
    return outcome
