"""Which arm runs when: launch mode and two-URL mode, two strategies over one `Lifecycle` (`mode_for(plan)`).

**Launch mode**: speculab starts every server, one arm at a time, in ABBA order over repeats (with more than two arms,
the rows of a balanced Latin square: `plan.arm_order`). For each repeat, for each arm (in that repeat's order, so
drift favours no arm): launch the command in its own process group with logs in DIR/logs/, measure the cold start
(process start -> health 200 -> first token of a probe request), warm up, run every load level, then stop the server
(SIGTERM, then SIGKILL; always, also on Ctrl-C and errors). A server that exits mid-level stops the run at once
(`BlockRunner.server_died`).

**Two-URL mode**: both servers are already running; the arms take turns block by block. Each load level's prompts
are split into blocks, and the arms alternate (A B, then B A, ...), so slow drift hits both arms alike. The single
change cannot be verified; what each server says about itself (/version, /v1/models, detected engine) is recorded
with the arm. Each block's window is recorded, so each arm's load is measured over its own blocks; a server that goes
away stops the run (`servers.liveness`), keeping both arms' partial repeat.
"""

from __future__ import annotations

import signal
from dataclasses import replace
from typing import Protocol

from speculab.commands.run.blocks import Observed, send_unary
from speculab.commands.run.lifecycle import Lifecycle
from speculab.commands.run.plan import ArmPlan, RunPlan, arm_order
from speculab.commands.run.preflight import fit_after_launch
from speculab.commands.run.probing.rounds import SearchMode
from speculab.config import LoadLevel
from speculab.harness.design import LevelSpec
from speculab.harness.records import ColdStartTimes, RequestSpec
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.servers.process import Launched, ServerProcess, launch_server
from speculab.harness.servers.scrape import scrape_metrics
from speculab.harness.workload.conversation import conversations

LOGS_DIR = "logs"

# how a run resumed from inputs.json /1 said `one_url` (a note in words)
ONE_URL_V1 = "baseline and candidate are one URL (one server)"


class Mode(Protocol):
    async def run(self, life: Lifecycle) -> None:
        """Every arm at every level and repeat the record lacks, in the design's order; returns early when the run
        stops (Ctrl-C, adaptive repeats decided), raises when a server went away (what ran is saved first)."""


def mode_for(plan: RunPlan) -> Mode:
    """The plan's mode; with `loads: {search: ...}`, the search's rounds over it (`probing.rounds`)."""
    mode: Mode = LaunchMode() if plan.launch_mode else TwoUrlMode()
    return SearchMode(mode) if plan.setup.search is not None else mode


# --- launch mode -------------------------------------------------------------------------------------------------


class LaunchMode:
    async def run(self, life: Lifecycle) -> None:
        arms = list(life.plan.arms)
        for repeat in range(1, life.setup.repeats + 1):
            order = [arms[i] for i in arm_order(len(arms), repeat)]  # ABBA for two arms: A B | B A | A B ...
            for arm in order:
                if life.stop.is_set() or not await self.arm_repeat(life, arm, repeat):
                    return
            if life.enough(repeat):  # adaptive repeats: every verdict decided
                return

    async def arm_repeat(self, life: Lifecycle, arm: ArmPlan, repeat: int) -> bool:
        """Launch the arm's server, run its levels of this repeat, stop it; False when the run stops here."""
        levels = life.setup.levels
        todo = [li for li, lv in enumerate(levels) if not life.is_done(arm.info.name, lv.key, repeat)]
        if not todo:  # a resumed run: this arm's repeat finished before; no launch
            life.blocks.skip(len(levels))
            return True
        server: ServerProcess | None = None
        try:
            launched, arm = await launch(life, arm, repeat)  # `arm` at the port it listens on
            server = launched.server
            if launched.ready_s is None:
                return False  # stopped while waiting
            model = await self.cold_start(life, arm, repeat, launched)
            for li in range(len(levels)):
                if li not in todo:
                    life.blocks.skip()  # finished before the resume: it keeps its place in the order
                    continue
                warmup = life.plan.warmup_requests if li == todo[0] else 0  # once per launch
                run = await life.blocks.level(arm, model, li, repeat, warmup=warmup, server=server)
                if life.blocks.server_died is not None:
                    raise life.blocks.server_died
                if run.interrupted or life.stop.is_set():
                    life.interrupt()
                    return False
            await send_unary(life.blocks, arm, model)  # once per arm, after its measured load
        finally:
            if server is not None:
                life.reporter.phase(f"{arm.info.label}: stopping the server")
                code = server.stop(life.plan.stop_grace_s)
                if code not in (0, None, -signal.SIGTERM, -signal.SIGKILL, 143, 137) and not life.stop.is_set():
                    exited = {"arm": arm.info.name, "repeat": repeat, "code": code}
                    life.note(ReportWarning(WarningKind.SERVER_EXITED, fields=exited))
        return True

    async def cold_start(self, life: Lifecycle, arm: ArmPlan, repeat: int, launched: Launched) -> str:
        """The server is up: what it serves and says, the workload fitted (first server only), the first token;
        the served model."""
        server, ready_s = launched.server, launched.ready_s
        assert ready_s is not None
        model, info, names = await life.probe(arm)
        fit_after_launch(life, info.model_cards, model)  # the first server up says its context
        first = await first_token(life, arm, model, server)
        entry = {"arm": arm.info.name, "repeat": repeat, "ready_s": ready_s, "first_token_s": first}
        moved = {"port": server.cmd.port, "ports_taken": list(launched.ports_taken)} if launched.ports_taken else {}
        life.launched({**entry, **moved})
        life.note_server(arm, info, names, ColdStartTimes(ready_s, first))
        first_txt = f", first token {first:.1f} s" if first is not None else ""
        life.reporter.phase(f"{arm.info.label}: ready in {ready_s:.1f} s{first_txt}")
        return model


async def launch(life: Lifecycle, arm: ArmPlan, repeat: int) -> tuple[Launched, ArmPlan]:
    """Start the arm's server and wait until it is ready; the arm as launched: a port speculab chose that another
    process took moves it to another (`launch_server`), noted, and the arm's URL follows it."""
    assert arm.launch is not None
    log = life.out / LOGS_DIR / f"{arm.info.name}-r{repeat}.log"
    life.reporter.phase(f"{arm.info.label}: starting {' '.join(redact_command(arm.launch.command))}")
    signs = adapter_for(arm.info.engine).port_taken_signs if arm.info.engine else ()
    launched = await launch_server(
        arm.launch, log, life.session, life.stop, name=arm.info.name, clock=life.clock, signs=signs
    )
    cmd = launched.server.cmd
    if not launched.ports_taken:
        return launched, arm
    taken = {"arm": arm.info.name, "repeat": repeat, "ports_taken": list(launched.ports_taken), "port": cmd.port}
    life.note(ReportWarning(WarningKind.PORT_TAKEN, fields=taken))
    life.reporter.phase(f"{arm.info.label}: its port was taken; relaunched at {cmd.url}")
    return launched, replace(arm, info=replace(arm.info, url=cmd.url, command=redact_command(cmd.command)), launch=cmd)


async def first_token(life: Lifecycle, arm: ArmPlan, model: str, server: ServerProcess) -> float | None:
    """Process start -> first token of a short probe request (the cold start a user would see)."""
    # a few tokens, not one: a lone token can be an incomplete UTF-8 sequence that streams no text at all
    probe = replace(life.setup.items[0], index=0, max_tokens=8)
    rec = await life.blocks.request(arm, model)(life.session, probe, scheduled_s=life.clock())
    if rec.ok and not rec.chunks and rec.completion_tokens and server.started_s is not None:
        # The model ended at once (e.g. its first token was end-of-sequence): no text, but a token was made, and
        # the response that carried its finish_reason is when it reached us.
        return rec.end_s - server.started_s
    if not rec.ok or not rec.chunks or server.started_s is None:
        why = rec.error.message[:200] if rec.error is not None else "no text streamed"
        life.note(ReportWarning(WarningKind.COLD_START_NO_TOKEN, fields={"arm": arm.info.name, "why": why}))
        return None
    return rec.chunks[0].t_s - server.started_s


# --- two-URL mode ------------------------------------------------------------------------------------------------


class TwoUrlMode:
    def __init__(self) -> None:
        self.models: dict[str, str] = {}  # each arm's served model, probed when first needed
        self.warmed: set[str] = set()  # arms that sent their warmup (once, before their first block)

    async def run(self, life: Lifecycle) -> None:
        arms = list(life.plan.arms)
        for repeat in range(1, life.setup.repeats + 1):
            for li, spec in enumerate(life.setup.levels):
                if all(life.is_done(a.info.name, spec.key, repeat) for a in arms):
                    life.blocks.skip(len(arms))  # a resumed run: this level's repeat finished before
                    continue
                if not self.models:  # probed when first needed: a resumed run with nothing left asks no server
                    self.models = await _probe_arms(life, arms)
                interrupted = await self.level(life, arms, li, spec, repeat)
                if life.blocks.server_died is not None:
                    raise life.blocks.server_died  # both arms' partial repeats are saved, like an interruption
                if interrupted or life.stop.is_set():
                    life.interrupt()
                    return
                for a in arms:  # once per arm, after the first load it measured (the sample's prompts streamed)
                    await send_unary(life.blocks, a, self.models[a.info.name])
            if life.enough(repeat):  # adaptive repeats: every verdict decided
                return

    async def level(self, life: Lifecycle, arms: list[ArmPlan], li: int, level: LevelSpec, repeat: int) -> bool:
        """Both arms at one level and repeat, block by block in ABBA order; each arm's run.json written; True when
        interrupted."""
        blocks = blocks_for(life, li)
        seen = {a.info.name: Observed.open(life.out, a.info.name, level.key, repeat) for a in arms}
        for a in arms:
            seen[a.info.name].before = await scrape_metrics(life.session, a.info.url, api_key=a.api_key)
        t0 = life.clock()
        interrupted = False
        # one progress bar for the level that both arms' blocks fill in turn (not one bar per block)
        total = len(arms) * sum(len(b) for b in blocks)
        done = 0
        try:
            for bi, block in enumerate(blocks):
                order = arms if (bi + repeat) % 2 == 1 else arms[::-1]  # ABBA over blocks and repeats
                for arm in order:
                    warm = life.plan.warmup_requests if arm.info.name not in self.warmed else 0
                    self.warmed.add(arm.info.name)
                    life.reporter.level_start(arm.info.label, level.label, repeat, total, done=done)
                    interrupted = await life.blocks.run_blocks(
                        arm,
                        self.models[arm.info.name],
                        li,
                        [block],
                        repeat,
                        warm,
                        None,
                        t0,
                        seen[arm.info.name],
                        scrape_before=bool(warm),  # warmup traffic must not count
                        first_block=bi,  # rate loads: each block its own part of the schedule
                    )
                    done += len(block)
                    if interrupted:
                        break
                if interrupted:
                    break
        finally:
            life.reporter.level_end()
            for a in arms:
                seen[a.info.name].sink.close()
        for a in arms:
            after = await scrape_metrics(life.session, a.info.url, api_key=a.api_key)
            life.blocks.repeat_run(a, level, repeat, seen[a.info.name], after, interrupted)
        return interrupted


def blocks_for(life: Lifecycle, level_i: int) -> list[tuple[RequestSpec, ...]]:
    lv = life.plan.loads[level_i]
    if lv.phases:  # a schedule is one block: each arm runs it whole, in turn (ABBA over repeats), as launch mode does
        return [life.setup.levels[level_i].items_of(life.setup.items)]
    width = lv.concurrency or lv.max_concurrency or max(1, round(lv.rate_rps or _trace_rate(life, lv)))
    # Small blocks keep each prompt's two measurements close in time, so a burst of contention hits both
    # arms of a pair; at higher load a block must be long enough for the load to reach steady state.
    size = life.plan.block_size or (2 if width == 1 else 4 * width)
    # whole conversations only: a block boundary inside one would send its later turns without their context
    blocks: list[tuple[RequestSpec, ...]] = []
    current: list[RequestSpec] = []
    for conv in conversations(life.setup.levels[level_i].items_of(life.setup.items)):
        if current and len(current) + len(conv) > size:
            blocks.append(tuple(current))
            current = []
        current += conv
    if current:
        blocks.append(tuple(current))
    return blocks


def _trace_rate(life: Lifecycle, lv: LoadLevel) -> float:
    """A trace level's mean request rate (its arrivals, scaled): a block holds about 4 seconds of it, as for a rate."""
    arrivals = [it.arrival_s for it in life.setup.items if it.arrival_s is not None]
    span = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
    return (len(arrivals) - 1) / span * (lv.trace_speed or 1.0) if span > 0 else 1.0


async def _probe_arms(life: Lifecycle, arms: list[ArmPlan]) -> dict[str, str]:
    """Each arm's served model, with what its server says about itself noted."""
    models: dict[str, str] = {}
    for arm in arms:
        model, info, names = await life.probe(arm)
        models[arm.info.name] = model
        life.note_server(arm, info, names, None)
    one_url = ReportWarning(WarningKind.ONE_URL)
    if len({a.info.url.rstrip("/") for a in arms}) < len(arms) and not any(
        n.kind == one_url.kind or (n.kind == WarningKind.NOTE and n.fields["text"].startswith(ONE_URL_V1))
        for n in life.record.notes
    ):
        life.note(one_url)
    return models
