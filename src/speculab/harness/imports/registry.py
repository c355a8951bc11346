"""The formats speculab reads, by `--format` name: which reader a path is for (detected, or named), and its runs.

Every reader is a module with the same face (`Reader`): its `--format` name, its tool, how compare names its files,
what compare says about reading them and how to pair two of them, `detect(path)` and `read_all(path)`, every run the
path holds. The readers of files that may hold several runs, one per load, can also read one (`Picks`: `--benchmark
N`). Adding a format is its reader module plus one line here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from speculab.errors import UserError
from speculab.harness.imports import (
    aiperf_profile,
    guidellm_benchmarks,
    llmperf_responses,
    sglang_bench,
    speculab_bench,
    vllm_bench,
    vllm_sweep,
)
from speculab.harness.imports.imported import ImportedRun


class Reader(Protocol):
    """One format's reader (a module)."""

    FORMAT: str  # the --format name: a promise to users, never renamed
    TOOL: str  # the tool that wrote the file, e.g. "vllm bench serve"
    NAME: str  # as compare names the files: "the vLLM files do not record sampling"
    NOTE: str  # what compare says once about every file of this format it read ("": nothing)
    HOW: str  # how to send the same prompts in the same order with this tool ("": compare's own checks say it)

    def detect(self, path: Path) -> bool: ...

    def read_all(self, path: Path) -> tuple[ImportedRun, ...]: ...


class Picks(Reader, Protocol):
    """A reader of files that may hold several runs, one per load, matched in order (`--benchmark N` picks one)."""

    SEVERAL: str  # what the file's runs are called: "GuideLLM benchmark(s)"

    def read(self, path: Path, benchmark: int | None = None) -> ImportedRun: ...


SPECULAB = speculab_bench.FORMAT
READERS: dict[str, Reader] = {
    m.FORMAT: m
    for m in (
        speculab_bench,
        vllm_bench,
        vllm_sweep,
        guidellm_benchmarks,
        aiperf_profile,
        sglang_bench,
        llmperf_responses,
    )
}
FORMATS = tuple(READERS)
# the readers of directories, asked first and in this order: a vLLM sweep's is a directory of run files (or of such
# directories), or a prefix of their names; any other directory is a speculab bench run's
_DIRECTORIES: tuple[Reader, ...] = (vllm_sweep, speculab_bench)
# the readers of files, the most specific first: a GuideLLM file also names a `backend` near its start, as vLLM's does;
# an SGLang line opens with its `tag` (before `backend`); an LLMPerf file is a list named *_individual_responses.json
_FILES: tuple[Reader, ...] = (guidellm_benchmarks, aiperf_profile, sglang_bench, llmperf_responses, vllm_bench)
_PICKS: tuple[Picks, ...] = (guidellm_benchmarks, sglang_bench)
# the readers whose runs are matched by load, a load's several runs being its repeats (a vLLM sweep's run=N.json)
_BY_LOAD = (vllm_sweep.FORMAT,)
_GIVE = (
    "give a `speculab bench` output directory, a vLLM `bench serve --save-result --save-detailed` file or `bench sweep "
    "serve` directory, a GuideLLM benchmarks.json, an AIPerf profile_export.jsonl, an SGLang bench_serving "
    "--output-details JSONL or an LLMPerf *_individual_responses.json"
)


def result_format(path: Path, fmt: str | None = None) -> str:
    """The format name of the reader for `path`: `fmt` when given (checked), else detected."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise UserError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
        if fmt not in (r.FORMAT for r in _DIRECTORIES) and path.is_dir():
            raise UserError(
                f"{path} is a directory: --format {fmt} reads a file; give the file in it (or --format vllm-sweep "
                "for a vLLM sweep's directory, --format speculab for a bench run's)"
            )
        return fmt
    if found := next((r.FORMAT for r in _DIRECTORIES if r.detect(path)), None):
        return found
    if not path.exists():
        raise UserError(f"{path}: no such file or directory; {_GIVE}")
    if found := next((r.FORMAT for r in _FILES if r.detect(path)), None):
        return found
    others = "|".join(f for f in FORMATS if f != SPECULAB)
    raise UserError(f"{path}: not a result speculab reads; {_GIVE} (--format {others} reads it as one)")


def read_runs(path: Path, fmt: str, benchmark: int | None = None) -> tuple[ImportedRun, ...]:
    """Every run `path` holds as format `fmt` (a sweep's, load by load; a file's several runs), or the one run
    `benchmark` picks where the format may hold several."""
    picks = next((r for r in _PICKS if fmt == r.FORMAT), None)
    if benchmark is not None and picks is not None:
        return (picks.read(path, benchmark),)
    return READERS[fmt].read_all(path)


def picks_one(fmts: tuple[str, ...]) -> bool:
    """Whether `--benchmark N` picks a run of one of these formats."""
    return any(r.FORMAT in fmts for r in _PICKS)


def runs_named(fmts: tuple[str, ...]) -> str:
    """What the runs of a file of several are called, for the first such format of these (in the registry's order)."""
    return next(r.SEVERAL for r in _PICKS if r.FORMAT in fmts)


def by_load(fmts: tuple[str, ...]) -> bool:
    """Whether runs of these formats are matched by load, a load's several runs its repeats (a vLLM sweep's)."""
    return any(f in _BY_LOAD for f in fmts)


def of_other_tools(fmts: tuple[str, ...]) -> tuple[Reader, ...]:
    """The readers of other tools' files among `fmts` (their NAME, NOTE and HOW are compare's words about them)."""
    return tuple(READERS[f] for f in fmts if f != SPECULAB)
