"""Two-URL mode: both servers are already running; the arms take turns block by block.

Each load level's prompts are split into blocks, and the arms alternate (A B, then B A, ...), so slow drift hits
both arms alike. The single change cannot be verified; what each server says about itself (/version, /v1/models,
detected engine) is recorded with the arm. Each block's window is recorded, so each arm's load is measured over its
own blocks; a server that goes away stops the run (`servers.liveness`), keeping both arms' partial repeat.
"""

from __future__ import annotations

from speculab.harness.experiment.lifecycle import Lifecycle, Observed
from speculab.harness.experiment.plan import ArmPlan
from speculab.harness.records import RequestSpec
from speculab.harness.servers.scrape import scrape_metrics
from speculab.harness.workload.conversation import conversations


def blocks_for(life: Lifecycle, level_i: int) -> list[tuple[RequestSpec, ...]]:
    lv = life.plan.loads[level_i]
    width = lv.concurrency or lv.max_concurrency or max(1, round(lv.rate_rps or _trace_rate(life, lv.trace_speed)))
    # Small blocks keep each prompt's two measurements close in time, so a burst of contention hits both
    # arms of a pair; at higher load a block must be long enough for the load to reach steady state.
    size = life.plan.block_size or (2 if width == 1 else 4 * width)
    # whole conversations only: a block boundary inside one would send its later turns without their context
    blocks: list[tuple[RequestSpec, ...]] = []
    current: list[RequestSpec] = []
    for conv in conversations(life.setup.items):
        if current and len(current) + len(conv) > size:
            blocks.append(tuple(current))
            current = []
        current += conv
    if current:
        blocks.append(tuple(current))
    return blocks


def _trace_rate(life: Lifecycle, speed: float | None) -> float:
    """A trace level's mean request rate (its arrivals, scaled): a block holds about 4 seconds of it, as for a rate."""
    arrivals = [it.arrival_s for it in life.setup.items if it.arrival_s is not None]
    span = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
    return (len(arrivals) - 1) / span * (speed or 1.0) if span > 0 else 1.0


async def _probe_arms(life: Lifecycle, arms: list[ArmPlan]) -> dict[str, str]:
    """Each arm's served model, with what its server says about itself noted."""
    models: dict[str, str] = {}
    for arm in arms:
        model, info, names = await life.probe(arm)
        models[arm.info.name] = model
        life.note_server(arm, info, names, None)
    one_url = "baseline and candidate are one URL (one server): its /metrics counters, and so acceptance, count both "
    if len({a.info.url.rstrip("/") for a in arms}) < len(arms) and not any(n.startswith(one_url) for n in life.notes):
        life.notes.append(one_url + "arms' requests")
    return models


async def run_two_url_mode(life: Lifecycle) -> None:
    arms = list(life.plan.arms)
    models: dict[str, str] = {}
    warmed: set[str] = set()
    for repeat in range(1, life.setup.repeats + 1):
        for li, spec in enumerate(life.setup.levels):
            if all(life.is_done(a.info.name, spec.key, repeat) for a in arms):
                life.order += len(arms)  # a resumed run: this level's repeat finished before
                continue
            if not models:  # probed when first needed: a resumed run with nothing left asks no server
                models = await _probe_arms(life, arms)
            blocks = blocks_for(life, li)
            seen = {a.info.name: Observed.open(life.out, a.info.name, spec.key, repeat) for a in arms}
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
                        warm = life.plan.warmup_requests if arm.info.name not in warmed else 0
                        warmed.add(arm.info.name)
                        life.reporter.level_start(arm.info.label, spec.label, repeat, total, done=done)
                        interrupted = await life.run_blocks(
                            arm,
                            models[arm.info.name],
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
                life.repeat_run(a, spec, repeat, seen[a.info.name], after, interrupted)
            if life.server_died is not None:
                raise life.server_died  # both arms' partial repeats are saved, like an interruption
            if interrupted or life.stop.is_set():
                life.interrupted = True
                return
        if life.enough(repeat):  # adaptive repeats: every verdict decided
            return
