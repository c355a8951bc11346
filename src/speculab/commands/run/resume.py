"""`speculab run --resume DIR`: continue a run that was interrupted or killed, from what its directory holds.

The plan is made again from the experiment file and must be the one DIR ran (`plan_identity`, stored in inputs.json):
the same prompts, seeds, loads, repeats and arms, or the run is refused in one line. Every block (an arm at a level,
one repeat) that finished is kept as it is; one that stopped part way is set aside (renamed, never deleted:
`results.blocks`) and runs again from the start with the same seeds, in the design's order, as do the blocks never
started. In two-URL mode a level's arms are interleaved block by block, so a level runs again for both arms unless
both finished. Looks of adaptive repeats already taken are reused as recorded, so the alpha spent stays the design's.
A search (`loads: {search: ...}`) plans no levels from the file: its blocks are those of the levels DIR recorded it
placing (`probing.resumed`), and it goes on placing probes from there (`probing.rounds`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from speculab.commands.run.plan import RunPlan, arm_order
from speculab.commands.run.probing.resumed import complete, resume_line, searched_plan
from speculab.errors import UserError
from speculab.harness.design import ArmInfo, Setup
from speculab.harness.results.ab_dir import LAUNCHES_FILE, REQUESTS_FILE, read_setup
from speculab.harness.results.ab_run import ABRun, ChangeCheck
from speculab.harness.results.blocks import BlockState, block_state, set_aside
from speculab.harness.results.run_dir import utc_now, versions
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind

Block = tuple[str, str, int]  # (arm name, level key, repeat): one block's directory, runs/<arm>/<level>/r<n>
# how a run ended early: run.py's notes, and the search's (`probing.rounds`; its answer is no longer partial)
# (as inputs.json /1 wrote them; /2 has kinds)
STOP_NOTES = ("the run stopped", "the run was interrupted", "the search was interrupted")


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(json_safe(obj), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def plan_identity(plan: RunPlan, sentences: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What `--resume` checks: a SHA-256 of every part of the plan that shapes the measurement (the prompts as
    loaded, sampling, loads, repeats, the arms with their commands and environment, everything else in the setup),
    one per part so a refusal can say which changed. Times, versions and API keys are left out; secret flag
    values are hashed as the `***` inputs.json shows. `sentences`: each candidate's change note as a run recorded
    before #48 item 3 hashed it, in words ("" none), standing in for the record (`_sentences_saved`)."""
    blank = replace(plan.setup, started_utc="", finished_utc="", versions={})
    saved = ABRun(setup=blank, arms=tuple(a.info for a in plan.arms), changes=plan.changes).setup_dict()
    if sentences is not None:
        saved["changes"] = [{**c, "note": sentences.get(c["candidate"], "")} for c in saved["changes"]]
    sd = dict(saved["setup"])
    # what the report decides on shapes no measurement: a run saved before these keys, or resumed with another
    # `decide_on:`, measures the same
    sd.pop("decide_on", None)
    sd.pop("guardrails", None)
    sd.pop("guardrail_floor", None)
    sd.pop("predicted", None)  # what the run is held against, not what it measures
    sd.pop("synthesised_prompts", None)  # read from the workload, which its own part holds (a run before it resumes)
    # the stream against unary sample is sent beside the measured load, never inside it: a run saved before the key
    # still resumes, and a resumed run sends each arm's sample where DIR lacks it
    sd.pop("stream_unary", None)

    def take(*keys: str) -> dict[str, Any]:  # each key goes to exactly one part; what is left is the last part
        return {k: sd.pop(k) for k in keys}

    # a search's design places its loads; a plan without one keeps the key where runs before searches had it
    search = {"search": sd.pop("search")} if sd.get("search") is not None else {}
    parts = {
        "workload": take("workload_name", "workload_source", "api", "items"),
        "sampling": {
            **take("temperature", "top_p", "top_k", "seed", "max_tokens", "min_tokens", "ignore_eos", "logprobs"),
            "request": plan.sampling,
            "extra_body": plan.extra_body,
        },
        "loads": {
            **take("levels"),
            **search,
            "loads": plan.loads,
            "block_size": plan.block_size,
            "warmup": plan.warmup_requests,
            # `cache: {reset: never}` shapes each block; the default is left out so runs from before it still resume
            **({"cache_reset": plan.cache_reset} if plan.cache_reset != "between-blocks" else {}),
        },
        "repeats": take("repeats", "sequential"),
        "arms": {
            "arms": saved["arms"],
            "changes": saved["changes"],
            "env": [dict(a.launch.env) if a.launch is not None else None for a in plan.arms],
            "models": [a.model for a in plan.arms],
        },
        "the rest of the setup": sd,
    }
    hashes = {name: _sha(part) for name, part in parts.items()}
    return {"sha256": _sha(hashes), "parts": hashes, "experiment": plan.source}


def _sentences_saved(changes: Sequence[ChangeCheck]) -> dict[str, str] | None:
    """The change notes of a run recorded before #48 item 3, as its plan identity hashed them: their sentences, by
    candidate ("" none); None for a run that kept them as records. A note is derived from the arms' commands, which
    the identity hashes too, so the saved sentence standing in for today's record hides no change of plan."""
    if not changes or any(c.note is not None and c.note.kind != WarningKind.NOTE for c in changes):
        return None
    return {c.candidate: str(c.note.fields.get("text", "")) if c.note is not None else "" for c in changes}


def check_same_plan(
    root: Path, recorded: Mapping[str, Any] | None, plan: RunPlan, changes: Sequence[ChangeCheck] = ()
) -> None:
    """Refuse, in one line naming what changed, to resume DIR with another plan than the one it ran (`changes`: the
    single-change checks DIR recorded, for a run recorded when their notes were sentences)."""
    if not recorded or not recorded.get("sha256"):
        raise UserError(
            f"--resume {root}: its inputs.json records no plan to check against (written before `--resume` "
            "existed); start a new run with --output"
        )
    sentences = _sentences_saved(changes)
    identities = [plan_identity(plan), *([plan_identity(plan, sentences)] if sentences is not None else [])]
    if any(recorded["sha256"] == now["sha256"] for now in identities):
        return
    before = recorded.get("parts") or {}
    # the parts that differ, by the identity that differs least (a run of either form names only what changed)
    changed = min(([n for n, h in now["parts"].items() if before.get(n) != h] for now in identities), key=len)
    changed = changed or ["the plan"]
    ran = recorded.get("experiment") or "the file it ran"
    raise UserError(
        f"--resume {root}: the experiment is not the one this run started with ({', '.join(changed)} changed); "
        f"resume with {ran} as it was, or start a new run with --output"
    )


def resume_paths(resume: Path | None, experiment: Path | None, output: Path | None) -> tuple[Path, Path | None]:
    """`speculab run [EXPERIMENT] [--output OUT] [--resume DIR]` -> (the experiment file, the output directory).
    With --resume the file defaults to the one DIR recorded, and the output is DIR."""
    if resume is None:
        if experiment is None:
            raise UserError("give the experiment file (`speculab init --url URL` writes one), or --resume DIR")
        return experiment, output
    if output is not None and output.resolve() != resume.resolve():
        raise UserError(f"--resume {resume} writes to {resume}: drop --output {output}")
    if experiment is not None:
        return experiment, resume
    ran = (read_setup(resume).plan or {}).get("experiment")
    if not ran or not Path(ran).is_file():
        what = f"its experiment file {ran} is gone" if ran else "it records no experiment file"
        raise UserError(f"--resume {resume}: {what}; give it: speculab run EXPERIMENT --resume {resume}")
    return Path(ran), resume


def block_units(plan: RunPlan, repeats: int) -> list[tuple[Block, ...]]:
    """The blocks of the design in the order it runs them, grouped into what must finish together: each block
    alone in launch mode; a level's blocks of every arm in two-URL mode (they are interleaved)."""
    names = [a.info.name for a in plan.arms]
    levels = [lv.key for lv in plan.setup.levels]
    if plan.launch_mode:
        return [((names[i], lv, r),) for r in range(1, repeats + 1) for i in arm_order(len(names), r) for lv in levels]
    return [tuple((a, lv, r) for a in names) for r in range(1, repeats + 1) for lv in levels]


def blocks_to_run(
    units: Sequence[tuple[Block, ...]], states: Mapping[Block, BlockState]
) -> tuple[set[Block], list[Block]]:
    """(the blocks already done, the started ones to set aside before running them again): a unit is done when
    every block of it is complete; otherwise each of its blocks that started is set aside."""
    done: set[Block] = set()
    aside: list[Block] = []
    for unit in units:
        if all(states[b] is BlockState.COMPLETE for b in unit):
            done.update(unit)
        else:
            aside += [b for b in unit if states[b] is not BlockState.MISSING]
    return done, aside


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a resumed run starts from: the blocks to skip, and the run's record so far (kept, then extended)."""

    done: frozenset[Block]
    setup: Setup  # the plan's, with the first start time, versions and the looks of adaptive repeats so far
    arms: tuple[ArmInfo, ...]  # as observed (cold starts, what the servers said)
    notes: tuple[ReportWarning, ...]
    launches: tuple[Mapping[str, Any], ...]
    summary: str  # one line for the terminal: how much had finished and what runs again


def prepare_resume(plan: RunPlan, root: Path) -> Resumed:
    """Check DIR ran this plan, set its interrupted blocks aside, and say what is left (hold `blocks.held_by_one_run`
    first: nothing may be writing DIR)."""
    prior = read_setup(root)
    check_same_plan(root, prior.plan, plan, prior.changes)
    plan = searched_plan(plan, prior.setup)  # a search: the levels it had placed (`probing.resumed`)
    units = block_units(plan, prior.setup.repeats)  # adaptive repeats that stopped early: that look stands
    states = {b: block_state(root, *b) for unit in units for b in unit}
    done, aside = blocks_to_run(units, states)
    notes = [n for n in prior.notes if not _stopped(n)]
    stopped = [n for n in prior.notes if _stopped(n)]
    left = len(done) < len(states) or (plan.setup.search is not None and not complete(plan.setup.search))
    if left:  # a run with nothing left (killed while rendering its report) only re-renders
        resumed = {"at": utc_now(), "done": len(done), "total": len(states)}
        # the note that said how it stopped, said again inside this one (None: killed without a word)
        resumed["stopped"] = stopped[-1].to_dict() if stopped else None
        notes.append(ReportWarning(WarningKind.RESUMED, fields=resumed))
    kept = [(b, k) for b in aside if (k := set_aside(root, *b)) is not None]
    notes += [_aside_note(root, prior, b, k, states[b]) for b, k in kept]
    now = versions()
    if prior.setup.versions and dict(prior.setup.versions) != now:
        changed = sorted(k for k in now if prior.setup.versions.get(k) != now[k])
        notes.append(ReportWarning(WarningKind.RESUMED_OTHER_VERSIONS, fields={"changed": changed}))
    setup = replace(
        plan.setup,
        started_utc=prior.setup.started_utc,
        versions=prior.setup.versions or now,
        repeats=prior.setup.repeats,
        sequential=prior.setup.sequential,
    )
    summary = (
        resume_line(root, plan.setup.search, len(done), len(states))
        if plan.setup.search is not None
        else f"resuming {root}: {len(done)} of {len(states)} blocks had finished; {len(states) - len(done)} to run"
    )
    summary += f" ({len(kept)} started before, set aside: nothing is deleted)" if kept else ""
    return Resumed(frozenset(done), setup, prior.arms, tuple(notes), tuple(_launches(root)), summary)


def _stopped(n: ReportWarning) -> bool:
    """A note saying how the run ended early (inputs.json /1 said it in words)."""
    if n.kind in (WarningKind.RUN_STOPPED_ON_ERROR, WarningKind.RUN_INTERRUPTED, WarningKind.SEARCH_INTERRUPTED):
        return True
    return n.kind == WarningKind.NOTE and str(n.fields.get("text", "")).startswith(STOP_NOTES)


def _aside_note(root: Path, prior: ABRun, block: Block, kept: Path, state: BlockState) -> ReportWarning:
    """The report's line for a block set aside: it is reported as interrupted, and says where its records are."""
    arm, level, repeat = block
    fields = {
        "arm": next((a.label for a in prior.arms if a.name == arm), arm),
        "load": next((lv.label for lv in prior.setup.levels if lv.key == level), level),
        "repeat": repeat,
        # None: the block finished, but not its level's other arm
        "records": None if state is BlockState.COMPLETE else _lines(kept / REQUESTS_FILE),
        "kept_in": str(kept.relative_to(root)),
    }
    return ReportWarning(WarningKind.BLOCK_SET_ASIDE, fields=fields)


def _lines(path: Path) -> int:
    """Records in a requests.jsonl (its lines; a torn last one too), 0 when there is none."""
    if not path.is_file():
        return 0
    with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
        return sum(1 for line in f if line.strip())


def _launches(root: Path) -> list[Mapping[str, Any]]:
    """launches.json so far; one that cannot be read is set aside (renamed) rather than overwritten."""
    f = root / LAUNCHES_FILE
    if not f.is_file():
        return []
    try:
        got = json.loads(f.read_text(encoding="utf-8"))
        return [x for x in got if isinstance(x, Mapping)] if isinstance(got, list) else []
    except (OSError, ValueError):
        f.rename(f.with_name(f.name + ".unreadable"))
        return []
