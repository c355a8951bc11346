"""Launch mode: speculab starts every server, one arm at a time, in ABBA order over repeats (with more than two
arms, the rows of a balanced Latin square: `plan.arm_order`).

For each repeat, for each arm (in that repeat's order, so drift favours no arm): launch the command in its own
process group with logs in DIR/logs/, measure the cold start (process start -> health 200 -> first token of a probe
request), warm up, run every load level, then stop the server (SIGTERM, then SIGKILL; always, also on Ctrl-C and
errors). A server that exits mid-level stops the run at once (`Lifecycle.server_died`).
"""

from __future__ import annotations

import signal
from dataclasses import replace

from speculab.harness.experiment.lifecycle import Lifecycle
from speculab.harness.experiment.plan import ArmPlan, arm_order
from speculab.harness.experiment.preflight import fit_after_launch
from speculab.harness.records import ColdStartTimes
from speculab.harness.results.ab_dir import LAUNCHES_FILE
from speculab.harness.results.strict_json import write_json_atomic
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.servers.process import ServerProcess

LOGS_DIR = "logs"


async def launch(life: Lifecycle, arm: ArmPlan, repeat: int) -> tuple[ServerProcess, float | None]:
    assert arm.launch is not None
    log = life.out / LOGS_DIR / f"{arm.info.name}-r{repeat}.log"
    server = ServerProcess(arm.launch, log, name=arm.info.name, clock=life.clock)
    life.reporter.phase(f"{arm.info.label}: starting {' '.join(redact_command(arm.launch.command))}")
    server.start()
    ready_s = await server.wait_ready(life.session, life.stop)
    return server, ready_s


async def first_token(life: Lifecycle, arm: ArmPlan, model: str, server: ServerProcess) -> float | None:
    """Process start -> first token of a short probe request (the cold start a user would see)."""
    # a few tokens, not one: a lone token can be an incomplete UTF-8 sequence that streams no text at all
    probe = replace(life.setup.items[0], index=0, max_tokens=8)
    rec = await life.request(arm, model)(life.session, probe, scheduled_s=life.clock())
    if rec.ok and not rec.chunks and rec.completion_tokens and server.started_s is not None:
        # The model ended at once (e.g. its first token was end-of-sequence): no text, but a token was made, and
        # the response that carried its finish_reason is when it reached us.
        return rec.end_s - server.started_s
    if not rec.ok or not rec.chunks or server.started_s is None:
        why = rec.error.message[:200] if rec.error is not None else "no text streamed"
        life.notes.append(f"{arm.info.name}: cold-start probe gave no first token ({why})")
        return None
    return rec.chunks[0].t_s - server.started_s


async def run_launch_mode(life: Lifecycle) -> None:
    arms = list(life.plan.arms)
    for repeat in range(1, life.setup.repeats + 1):
        order = [arms[i] for i in arm_order(len(arms), repeat)]  # ABBA for two arms: A B | B A | A B ...
        for arm in order:
            if life.stop.is_set():
                return
            levels = life.setup.levels
            todo = [li for li, lv in enumerate(levels) if not life.is_done(arm.info.name, lv.key, repeat)]
            if not todo:  # a resumed run: this arm's repeat finished before; no launch
                life.order += len(levels)
                continue
            server: ServerProcess | None = None
            try:
                server, ready_s = await launch(life, arm, repeat)
                if ready_s is None:
                    return  # stopped while waiting
                model, info, names = await life.probe(arm)
                fit_after_launch(life, info.model_cards, model)  # the first server up says its context
                first = await first_token(life, arm, model, server)
                cold = ColdStartTimes(ready_s, first)
                life.launches.append(
                    {"arm": arm.info.name, "repeat": repeat, "ready_s": ready_s, "first_token_s": first}
                )
                write_json_atomic(life.out / LAUNCHES_FILE, life.launches)  # a kill mid-write leaves the old one
                life.note_server(arm, info, names, cold)
                first_txt = f", first token {first:.1f} s" if first is not None else ""
                life.reporter.phase(f"{arm.info.label}: ready in {ready_s:.1f} s{first_txt}")
                for li in range(len(levels)):
                    if li not in todo:
                        life.order += 1  # finished before the resume: it keeps its place in the order
                        continue
                    warmup = life.plan.warmup_requests if li == todo[0] else 0  # once per launch
                    run = await life.level(arm, model, li, repeat, warmup=warmup, server=server)
                    if life.server_died is not None:
                        raise life.server_died
                    if run.interrupted or life.stop.is_set():
                        life.interrupted = True
                        return
            finally:
                if server is not None:
                    life.reporter.phase(f"{arm.info.label}: stopping the server")
                    code = server.stop(life.plan.stop_grace_s)
                    if code not in (0, None, -signal.SIGTERM, -signal.SIGKILL, 143, 137) and not life.stop.is_set():
                        life.notes.append(f"{arm.info.name} r{repeat}: server exited with code {code}")
        if life.enough(repeat):  # adaptive repeats: every verdict decided
            return
