"""An A/B run in progress: its plan, where it writes, the record of what was asked and what happened so far, and the
block runner that offers the load.

The record (`RunRecord`) is what inputs.json says of the run: immutable, replaced as the run goes and written each
time it changes. The block runner (`blocks.BlockRunner`) offers one level's load to one arm while sampling memory and
scraping /metrics around it; launch mode and two-URL mode (`modes`) decide which arm runs when. Results stream to DIR
in the A/B layout of `speculab.harness.results` (requests.jsonl appended as requests finish, run.json per finished
repeat, inputs.json rewritten as the run goes). Gates and verdicts are `speculab.harness.verdict`'s (asked after each
look of adaptive repeats); this records what was asked and what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp

from speculab.commands.run import looks as run_looks
from speculab.commands.run.blocks import BlockRunner, Reporter
from speculab.commands.run.plan import ArmPlan, RunPlan
from speculab.commands.run.resume import Block, Resumed, plan_identity
from speculab.harness.client.endpoint import Clock
from speculab.harness.client.probe import ServerInfo
from speculab.harness.design import ArmInfo, Setup
from speculab.harness.records import ColdStartTimes
from speculab.harness.results.ab_dir import LAUNCHES_FILE, write_setup
from speculab.harness.results.ab_run import SAID_NOTE, ABRun, ChangeCheck
from speculab.harness.results.run_dir import utc_now, versions
from speculab.harness.results.strict_json import write_json_atomic
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import detect_engine, forced_by_server, said_change
from speculab.harness.stats.sequential import look_alphas


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What the run has asked and observed so far, as inputs.json and launches.json hold it: each change is a new
    record (`Lifecycle.record`)."""

    setup: Setup  # the plan's, with the start time, versions, the fit and the looks of adaptive repeats so far
    arms: tuple[ArmInfo, ...]  # as observed (cold starts, what the servers said), in the plan's order
    notes: tuple[ReportWarning, ...] = ()
    launches: tuple[Mapping[str, Any], ...] = ()
    interrupted: bool = False
    done: frozenset[Block] = frozenset()  # (arm, level, repeat) finished before a resume: skipped

    @classmethod
    def start(cls, plan: RunPlan, resumed: Resumed | None) -> RunRecord:
        """A new run's record, or the resumed run's so far (its start, looks, notes, arms as observed, launches)."""
        if resumed is None:
            setup = replace(plan.setup, started_utc=utc_now(), versions=versions())
            return cls(setup, tuple(a.info for a in plan.arms))
        observed = {a.name: a for a in resumed.arms}
        arms = tuple(observed[a.info.name] for a in plan.arms)
        return cls(resumed.setup, arms, resumed.notes, resumed.launches, done=resumed.done)

    def arm(self, name: str) -> ArmInfo:
        return next(a for a in self.arms if a.name == name)

    def noted(self, note: ReportWarning) -> RunRecord:
        return replace(self, notes=(*self.notes, note))

    def with_server(
        self, arm: ArmPlan, info: ServerInfo, metric_names: set[str], cold: ColdStartTimes | None
    ) -> RunRecord:
        """What the arm's server says about itself (kept from its first launch), and the engine detected from it
        where the arm named none."""
        version = (
            info.version if isinstance(info.version, Mapping) else ({"raw": info.version} if info.version else None)
        )
        detected = detect_engine(version, {"data": list(info.model_cards)}, metric_names)
        server_info = {"version": info.version, "models": list(info.model_cards), "detected_engine": detected}
        cur = self.arm(arm.info.name)
        kept = cur.server_info or server_info
        now = replace(
            cur,
            server_info=kept,
            cold_start=cur.cold_start or cold,
            engine=cur.engine if cur.engine != "other" or arm.launch is not None else detected,
            # what the server says it runs may force acceptance where its command did not say so (a URL arm)
            forced_acceptance=tuple(dict.fromkeys((*cur.forced_acceptance, *forced_by_server(kept)))),
        )
        return replace(self, arms=tuple(now if a.name == cur.name else a for a in self.arms))

    def inputs(self, plan: RunPlan, plan_id: Mapping[str, Any], *, final: bool = False) -> ABRun:
        """inputs.json: the record with the plan's changes and identity (`final`: the finish time stamped)."""
        setup = replace(self.setup, finished_utc=utc_now()) if final else self.setup
        arms = tuple(self.arm(a.info.name) for a in plan.arms)
        changes = tuple(self.said_change(c, arms[0]) for c in plan.changes)
        return ABRun(setup, arms, changes, interrupted=self.interrupted, notes=self.notes, plan=plan_id)

    def said_change(self, change: ChangeCheck, baseline: ArmInfo) -> ChangeCheck:
        """A change its commands could not verify (two-URL mode), checked from what both servers said they run
        where both said it (speculab serve's /version); else as it was."""
        if change.verified is not None or not baseline.server_info:
            return change
        checked = said_change(baseline.server_info, self.arm(change.candidate).server_info)
        if checked is None:
            return change
        diff, single = checked
        return ChangeCheck(change.candidate, tuple(diff.lines()), single, SAID_NOTE)


class Lifecycle:
    """One run in progress: the plan (fitted once the context is known), where it writes, its record so far, and the
    block runner the modes offer the load with."""

    def __init__(
        self,
        plan: RunPlan,
        out: Path,
        session: aiohttp.ClientSession,
        stop: asyncio.Event,
        reporter: Reporter,
        clock: Clock,
        resumed: Resumed | None = None,
    ):
        self.out, self.stop, self.reporter, self.clock = out, stop, reporter, clock
        self.record = RunRecord.start(plan, resumed)
        self.plan_id = plan_identity(plan)  # in inputs.json, for `--resume` to check against
        self.blocks = BlockRunner(
            plan, out, session, stop, reporter, clock, lambda name: self.record.arm(name).engine, self.note
        )

    # the plan and the setup are replaced once, when the workload is fitted to the context (`preflight`)
    @property
    def plan(self) -> RunPlan:
        return self.blocks.plan

    @plan.setter
    def plan(self, plan: RunPlan) -> None:
        self.blocks.plan = plan

    @property
    def setup(self) -> Setup:
        return self.record.setup

    @setup.setter
    def setup(self, setup: Setup) -> None:
        self.record = replace(self.record, setup=setup)

    @property
    def session(self) -> aiohttp.ClientSession:
        return self.blocks.session

    @property
    def interrupted(self) -> bool:
        return self.record.interrupted

    def note(self, note: ReportWarning) -> None:
        self.record = self.record.noted(note)

    def interrupt(self) -> None:
        """The run ends before its design does: the report covers the part that ran."""
        self.record = replace(self.record, interrupted=True)

    def is_done(self, arm: str, level: str, repeat: int) -> bool:
        """The block finished before this run was resumed: skipped (its place in the order counts all the same)."""
        return (arm, level, repeat) in self.record.done

    async def probe(self, arm: ArmPlan) -> tuple[str, ServerInfo, set[str]]:
        return await self.blocks.probe(arm)

    def launched(self, launch: Mapping[str, Any]) -> None:
        """A server's cold start, in launches.json at once (a kill mid-write leaves the old one)."""
        self.record = replace(self.record, launches=(*self.record.launches, launch))
        write_json_atomic(self.out / LAUNCHES_FILE, list(self.record.launches))

    def note_server(self, arm: ArmPlan, info: ServerInfo, metric_names: set[str], cold: ColdStartTimes | None) -> None:
        self.record = self.record.with_server(arm, info, metric_names, cold)
        self.write_inputs()

    def write_inputs(self, *, final: bool = False) -> None:
        write_setup(self.out, self.record.inputs(self.plan, self.plan_id, final=final))

    # --- adaptive repeats -----------------------------------------------------------------------------------
    def enough(self, repeat: int) -> bool:
        """After `repeat` finished: look at the data (adaptive repeats only) and say whether to stop. Each look gets
        its own alpha from the spending function, so the design's false-positive rate stays at 5 % however many
        looks it takes (stats.sequential); the look's result is recorded in inputs.json."""
        seq = self.setup.sequential
        if seq is None:
            return False
        alphas = look_alphas(seq["min"], seq["max"], seq["alpha"], seq["spending"], seq.get("round", 1))
        if repeat not in alphas:
            return False
        alpha = alphas[repeat]
        taken = next((lk for lk in seq.get("looks", ()) if lk.get("repeat") == repeat), None)
        if taken is not None:  # a resumed run: this look was taken before, on the same data; it stands as recorded
            return bool(taken.get("decided")) and repeat < seq["max"]
        self.write_inputs()
        done, undecided = run_looks.take_look(self.out, alpha)  # the verdict's comparisons, this alpha
        # `undecided`: the open comparisons as records (an older inputs.json kept their sentences)
        still = [u.to_dict() for u in undecided]
        looks = [*seq.get("looks", ()), {"repeat": repeat, "alpha": alpha, "decided": done, "undecided": still}]
        stop = done and repeat < seq["max"]
        self.setup = replace(
            self.setup, sequential={**seq, "looks": looks}, repeats=repeat if stop else self.setup.repeats
        )
        if stop:
            self.note(
                ReportWarning(WarningKind.ADAPTIVE_STOP, fields={"repeat": repeat, "max": seq["max"], "alpha": alpha})
            )
            self.reporter.phase(f"every verdict decided after repeat {repeat}: stopping (at most {seq['max']})")
        elif repeat < seq["max"]:
            self.reporter.phase(
                ReportWarning(WarningKind.LOOK_STILL_OPEN, fields={"repeat": repeat, "open": still[:3]})
            )
        self.write_inputs()
        return stop
