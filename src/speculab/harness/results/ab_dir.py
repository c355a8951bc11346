"""The A/B result directory: `speculab run`, `demo` and `compare` write it; `speculab report DIR` reads it back.

On disk (docs/results.md):

    DIR/inputs.json                                  ABRun minus the per-repeat runs (schema INPUTS_SCHEMA)
    DIR/runs/<arm>/<level>/r<repeat>/requests.jsonl  RequestRecords, appended as each request finishes
    DIR/runs/<arm>/<level>/r<repeat>/run.json        RepeatRun minus records, written when the repeat ends
    DIR/runs/<arm>/unary.jsonl                       the stream against unary sample: the same prompts sent unary
                                                     after the arm's measured load (written whole, once per arm)

`<arm>` is ArmInfo.name, `<level>` LevelSpec.key ("c1", "c16", "r8", "r0.5"), `<repeat>` 1-based. A repeat
with requests.jsonl but no run.json is a run that was interrupted: its records count, its counters do not.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.records import RequestRecord
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.results.output_dir import check_output_dir
from speculab.harness.results.requests_file import read_records, write_records
from speculab.harness.results.strict_json import write_json_atomic
from speculab.harness.results.summary_file import SUMMARY_FILE

INPUTS_FILE = "inputs.json"
RUNS_DIR = "runs"
RUN_FILE = "run.json"
REQUESTS_FILE = "requests.jsonl"
UNARY_FILE = "unary.jsonl"  # an arm's stream against unary sample, never mixed with its measured records
LAUNCHES_FILE = "launches.json"  # launch mode: every launch's cold start, in order (ArmInfo keeps the first one)


def check_ab_output_dir(path: Path) -> None:
    """Before anything runs: refuse a directory that holds another A/B run, or cannot be written."""
    check_output_dir(path)


def repeat_dir(root: Path, arm: str, level: str, repeat: int) -> Path:
    """DIR/runs/<arm>/<level>/r<repeat>: where one repeat's requests.jsonl and run.json live."""
    return root / RUNS_DIR / arm / level / f"r{repeat}"


def unary_file(root: Path, arm: str) -> Path:
    """DIR/runs/<arm>/unary.jsonl: the arm's stream against unary sample (present once it was sent whole)."""
    return root / RUNS_DIR / arm / UNARY_FILE


def write_setup(root: Path, inputs: ABRun) -> None:
    """Write (or rewrite) DIR/inputs.json atomically. Call at the start and again at the end of a run."""
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(root / INPUTS_FILE, inputs.setup_dict())


def write_run_meta(root: Path, run: RepeatRun) -> None:
    """Write run.json for a finished repeat (its requests.jsonl is appended by the runner as requests finish)."""
    d = repeat_dir(root, run.arm, run.level, run.repeat)
    d.mkdir(parents=True, exist_ok=True)
    write_json_atomic(d / RUN_FILE, run.meta_dict())


def save_inputs(root: Path, inputs: ABRun) -> None:
    """The whole input set: inputs.json plus every repeat's run.json and requests.jsonl."""
    write_setup(root, inputs)
    for run in inputs.runs:
        write_records(repeat_dir(root, run.arm, run.level, run.repeat) / REQUESTS_FILE, run.records)
        if not run.interrupted:
            write_run_meta(root, run)
    for arm, records in inputs.unary.items():
        write_records(unary_file(root, arm), records)


def load_inputs(root: Path) -> ABRun:
    """Read DIR back: inputs.json, then every runs/<arm>/<level>/r<n>/ found (partial repeats included)."""
    inputs = read_setup(root)
    runs: list[RepeatRun] = []
    unary: dict[str, tuple[RequestRecord, ...]] = {}
    base = root / RUNS_DIR
    for arm in inputs.arms:
        for level_dir in sorted((base / arm.name).glob("*")) if (base / arm.name).is_dir() else ():
            if not level_dir.is_dir():
                continue  # the arm's unary.jsonl
            for rdir in sorted(level_dir.glob("r*")):
                if not rdir.is_dir() or not rdir.name[1:].isdigit():
                    continue  # r<n>.interrupted-<k>: a block set aside by a resumed run (results.blocks)
                runs.append(_read_repeat(rdir, arm.name, level_dir.name, int(rdir.name[1:])))
        if unary_file(root, arm.name).is_file():
            unary[arm.name] = tuple(read_records(unary_file(root, arm.name)))
    return replace(inputs.with_runs(runs), unary=unary)


def read_setup(root: Path) -> ABRun:
    """DIR/inputs.json alone (no records read): what the run asked, its arms and notes."""
    f = root / INPUTS_FILE
    if not f.is_file():
        if root.is_dir() and (root / SUMMARY_FILE).is_file() and (root / REQUESTS_FILE).is_file():
            raise UserError(f"{root} is a `speculab bench` result; compare two of them with `speculab compare A B`")
        raise UserError(f"{root}: no {INPUTS_FILE}; give the output directory of `speculab run` or `speculab demo`")
    try:
        setup = json.loads(f.read_text(encoding="utf-8"))
        inputs = ABRun.from_setup_dict(setup)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:200]
        raise UserError(f"{f}: unreadable ({why}); was it written by this version of speculab?") from None
    return inputs


def _read_repeat(rdir: Path, arm: str, level: str, repeat: int) -> RepeatRun:
    req = rdir / REQUESTS_FILE
    records = read_records(req) if req.is_file() else []
    meta = rdir / RUN_FILE
    if not meta.is_file():
        return RepeatRun(arm, level, repeat, tuple(records), interrupted=True, notes=("run.json missing: partial",))
    try:
        return RepeatRun.from_meta(json.loads(meta.read_text(encoding="utf-8")), records)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:200]
        raise UserError(f"{meta}: unreadable ({why}); was it written by this version of speculab?") from None
