"""A vLLM `bench sweep serve` experiment directory: one `bench serve` result per server setting, load and run.

vLLM's sweep launches each server setting (`--serve-params`) once, runs `vllm bench serve` at each load
(`--bench-params`) `--num-runs` times, and writes each result to
`<experiment>/SERVE--<setting>-BENCH--<load>/run=N.json` (a `bench serve --save-result` file with the sweep's
parameters added), beside `summary.json` (those files again, as a
list) and `warmup.json`; a failed run leaves `run=N.failure.json`. Each run file is read by `vllm_bench` (so each must
have been written with `--save-detailed`); the runs of one load are that load's repeats.

A path names one server setting: a combination's directory (`.../SERVE--spec-BENCH--c4`: one load), an experiment
directory of one setting (every load), or `<experiment>/SERVE--<setting>`, which is not a directory itself but the
prefix of its combinations' names (every load of that setting in an experiment of several).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.imports import vllm_bench
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "vllm-sweep"
TOOL = "vllm bench sweep serve"
READ_AS = "a vLLM bench sweep serve directory"
NAME = vllm_bench.NAME
HOW = vllm_bench.HOW
NOTE = vllm_bench.NOTE
_RUN = re.compile(r"run=(\d+)\.json")
SUMMARY = "summary.json"  # a combination's runs again, as one list
_SERVE, _BENCH = "SERVE--", "-BENCH--"


def _runs(d: Path) -> list[tuple[int, Path]]:
    """A combination's measured run files, by run number (warmup.json, summary.json and failures are not runs)."""
    if not d.is_dir():
        return []
    found = ((_RUN.fullmatch(f.name), f) for f in d.iterdir())
    return sorted((int(m.group(1)), f) for m, f in found if m)


def _setting(combo: Path) -> str:
    """The server setting a combination's directory names ("" for the sweep's default, no --serve-params)."""
    name = combo.name
    return name[len(_SERVE) :].split(_BENCH, 1)[0] if name.startswith(_SERVE) else ""


def _combos(path: Path) -> list[tuple[Path, list[tuple[int, Path]]]]:
    """The combination directories `path` names (see the module docstring; a combination's own summary.json names
    it too), each with its run files; [] when it names none."""
    if runs := _runs(path):
        return [(path, runs)]
    if path.name == SUMMARY and (runs := _runs(path.parent)):
        return [(path.parent, runs)]
    if path.is_dir():
        dirs = list(path.iterdir())
    elif path.name.startswith(_SERVE) and path.parent.is_dir():
        prefix = path.name
        dirs = [d for d in path.parent.iterdir() if d.name == prefix or d.name.startswith(prefix + _BENCH)]
    else:
        return []
    return [(d, runs) for d in sorted(dirs) if (runs := _runs(d))]


def combination_summary(path: Path) -> bool:
    """Whether `path` is a combination's own summary.json: a JSON list of its runs' `bench serve` results (read
    where its run=N.json files are gone: users keep the one file)."""
    if path.name != SUMMARY or not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(8192).decode("utf-8", "replace").lstrip()
    except OSError:
        return False
    return head.startswith("[") and head[1:].lstrip().startswith("{") and vllm_bench.has_marks(head)


def run_number(path: Path) -> int | None:
    """N of a sweep's `run=N.json` (run N + 1 at its load); None for any other file."""
    m = _RUN.fullmatch(path.name)
    return int(m.group(1)) if m else None


def run_files(path: Path) -> list[Path]:
    """Every run file of the combinations `path` names, combination by combination, by N ([] where it names none):
    what a sweep's summary-only runs are read from."""
    return [f for _, runs in _combos(path) for _, f in runs]


def detect(path: Path) -> bool:
    """Whether `path` names the runs of a vLLM sweep: a directory of `run=N.json` files, or of such directories,
    or the `SERVE--<setting>` prefix of some."""
    return bool(_combos(path))


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """Every run of one server setting, load by load (a load's runs are its repeats, run=N being repeat N + 1)."""
    combos = _combos(path)
    if not combos:
        raise UserError(f"{path}: read as {READ_AS}: no run=N.json in it or in its SERVE--*-BENCH--* directories")
    settings = sorted({_setting(c) for c, _ in combos})
    if len(settings) > 1:
        names = ", ".join(f"{path / (_SERVE + s)}" for s in settings)
        raise UserError(
            f"{path}: a vLLM sweep of {len(settings)} server settings ({', '.join(settings)}): compare one with "
            f"another, naming each by its prefix: {names}"
        )
    # the report names the arm by its server setting (every run file is called run=N.json)
    label = _SERVE + settings[0] if settings[0] else path.name
    out = []
    for combo, runs in combos:
        failed = sorted(f.name for f in combo.glob("run=*.failure.json"))
        also = ReportWarning(Kind.FILE_RUNS_FAILED, fields={"file": combo.name, "tool": FORMAT, "failed": failed})
        for n, f in runs:
            run = vllm_bench.read(f, keep={"_benchmark_name": "sweep_name"})
            info = {**run.info, "tool": TOOL, "combination": combo.name, "run": n}
            # one note per side of what was read instead of each file's own (below); the level's own note (all sent
            # at once, say) stays
            kept = tuple(x for x in run.notes if not (isinstance(x, ReportWarning) and x.kind is Kind.FILE_READ))
            notes = (*kept, *((also,) if failed else ()))
            out.append(replace(run, tool=TOOL, label=label, repeat=n + 1, notes=notes, info=info))
    version = next((r.info.get("version") for r in out if r.info.get("version")), None)
    read = {"file": label, "tool": FORMAT, "what": READ_AS, "named": NAME, "version": version}
    read |= {"unstated": "vLLM version not stated", "runs": [[c.name, len(r)] for c, r in combos]}
    said = ReportWarning(Kind.FILE_READ, fields=read)
    return tuple(replace(r, notes=(said, *r.notes)) for r in out)
