"""Every run a path holds as its tool's summaries: a file, a directory of several files of one tool (each a run), or
a vLLM sweep's run files. Which reader claims a file, and which files a sweep's path names, is the one format
registry's (`harness.imports.registry`): this module only gathers a side's runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.imports.registry import SummaryReader, summary_members, summary_reader
from speculab.harness.imports.summaries.summary import RunSummary


def _files(path: Path) -> list[tuple[Path, SummaryReader]]:
    """A side's result files, each with its reader: a directory format's run files (a sweep's run=N.json, in it or
    in its combinations' directories, or those a `SERVE--<setting>` prefix names), else every file in a directory a
    summary reader claims."""
    if (members := summary_members(path)) is not None:
        reader, files = members
        return [(f, reader) for f in files]
    if not path.is_dir():
        return []
    return [(f, r) for f in sorted(path.iterdir()) if f.is_file() and (r := summary_reader(f)) is not None]


def _numbered(runs: list[RunSummary], label: str) -> tuple[RunSummary, ...]:
    """Runs of several files: each load's runs numbered 1, 2, ... in file order, the side named by its directory."""
    out: list[RunSummary] = []
    for r in runs:
        n = 1 + sum(1 for x in out if x.level.key == r.level.key)
        out.append(replace(r, run=n, label=label))
    return tuple(out)


def read_side(path: Path) -> tuple[RunSummary, ...] | None:
    """Every run `path` holds as its tool's summaries (whether or not it also keeps per-request data); None where no
    summary reader knows it."""
    if path.is_file():
        reader = summary_reader(path)
        return reader.read(path) if reader is not None else None
    files = _files(path)
    if not files:
        return None
    tools = sorted({r.TOOL for _, r in files})
    if len(tools) > 1:
        raise UserError(
            f"{path}: files of {len(tools)} tools ({', '.join(tools)}): a side's runs are one tool's; give one "
            "tool's files per side"
        )
    runs = [s for f, r in files for s in r.read(f)]
    return _numbered(runs, path.name) if len(files) > 1 else tuple(replace(r, label=path.name) for r in runs)
