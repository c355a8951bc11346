"""`speculab run`: a plan run to the end (or to Ctrl-C), results streamed to the output directory.

Servers are always stopped; whatever finished is on disk in the A/B layout, so `speculab report DIR` renders a
partial run as well as a whole one.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from speculab.commands.run.blocks import Reporter, Silent
from speculab.commands.run.lifecycle import Lifecycle
from speculab.commands.run.modes import mode_for
from speculab.commands.run.plan import RunPlan
from speculab.commands.run.preflight import fit_when_known
from speculab.commands.run.resume import prepare_resume
from speculab.harness.client.endpoint import Clock
from speculab.harness.client.request import make_session
from speculab.harness.load.interrupt import run_interruptible
from speculab.harness.results.ab_dir import INPUTS_FILE, check_ab_output_dir, read_setup
from speculab.harness.results.blocks import held_by_one_run
from speculab.harness.results.warnings import ReportWarning, WarningKind


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
