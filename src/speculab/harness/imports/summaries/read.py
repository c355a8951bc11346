"""Which summary reader a path is for, and every run it holds: a file, a directory of several files of one tool
(each a run), or a vLLM sweep's directory of `run=N.json` files. The summary readers' registry: adding one is its
module plus one line in `READERS`."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from speculab.errors import UserError
from speculab.harness.imports.summaries import guidellm, sglang, vllm
from speculab.harness.imports.summaries.summary import RunSummary


class SummaryReader(Protocol):
    """One tool's summary reader (a module)."""

    TOOL: str

    def detect(self, path: Path) -> bool: ...

    def read(self, path: Path) -> tuple[RunSummary, ...]: ...


# the most specific first, as harness.imports.registry's files: a GuideLLM file also names a `backend`, as vLLM's
# does; an SGLang line opens with its `tag`
READERS: tuple[SummaryReader, ...] = (guidellm, sglang, vllm)
_RUN = re.compile(r"run=\d+\.json")


def _reader(path: Path) -> SummaryReader | None:
    return next((r for r in READERS if r.detect(path)), None)


def _files(path: Path) -> list[Path]:
    """A directory's result files: a sweep's run=N.json (in it or in its combinations' directories), else every file
    in it a summary reader knows."""
    runs = [f for f in (*path.glob("run=*.json"), *path.glob("*/run=*.json")) if _RUN.fullmatch(f.name)]
    if runs:
        return sorted(runs, key=lambda f: (f.parent.name, int(f.name[4:-5])))
    return sorted(f for f in path.iterdir() if f.is_file() and _reader(f) is not None)


def _numbered(runs: list[RunSummary], label: str) -> tuple[RunSummary, ...]:
    """Runs of several files: each load's runs numbered 1, 2, ... in file order, the side named by its directory."""
    out: list[RunSummary] = []
    for r in runs:
        n = 1 + sum(1 for x in out if x.level.key == r.level.key)
        out.append(replace(r, run=n, label=label))
    return tuple(out)


def _sweep_prefix(path: Path) -> list[Path]:
    """`EXP/SERVE--<setting>`, the prefix of a sweep's combinations (not a directory itself): their run files."""
    if path.exists() or not path.name.startswith("SERVE--") or not path.parent.is_dir():
        return []
    combos = [d for d in path.parent.iterdir() if d.name == path.name or d.name.startswith(path.name + "-BENCH--")]
    return [f for d in sorted(combos) if d.is_dir() for f in _files(d) if _RUN.fullmatch(f.name)]


def read_side(path: Path) -> tuple[RunSummary, ...] | None:
    """Every run `path` holds as its tool's summaries (whether or not it also keeps per-request data); None where no
    summary reader knows it."""
    if path.is_dir() or _sweep_prefix(path):
        files = _files(path) if path.is_dir() else _sweep_prefix(path)
        if not files:
            return None
        tools = sorted({r.TOOL for f in files if (r := _reader(f)) is not None})
        if len(tools) > 1:
            raise UserError(
                f"{path}: files of {len(tools)} tools ({', '.join(tools)}): a side's runs are one tool's; give one "
                "tool's files per side"
            )
        runs = [s for f in files for s in _reader(f).read(f)]  # type: ignore[union-attr]
        return _numbered(runs, path.name) if len(files) > 1 else tuple(replace(r, label=path.name) for r in runs)
    reader = _reader(path) if path.is_file() else None
    return reader.read(path) if reader is not None else None
