"""The one registry of the formats speculab reads: one entry per tool's format (`Format`), by `--format` name, from
which both kinds of reader are found: the per-request reader (which reader a path is for, detected or named, and its
runs) and, where the tool also writes files that keep no request, the summary reader of those (its own aggregates,
for a comparison whose unit is the run: `summaries.read`).

Every per-request reader is a module with the same face (`Reader`): its `--format` name, its tool, how compare names
its files, what compare says about reading them and how to pair two of them, `detect(path)` and `read_all(path)`,
every run the path holds. The readers of files that may hold several runs, one per load, can also read one (`Picks`:
`--benchmark N`). A summary reader (`SummaryReader`) has `TOOL`, `detect(path)` and `read(path)`. Each claims a path
by positive marks, what makes it that tool's. Adding a format is its reader module(s) plus its entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
from speculab.harness.imports.aggregates import draftbench, inferencex, specforge, trtllm_bench
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.imports.marks import OTHERS as OTHER_MARKS
from speculab.harness.imports.marks import Marks, closest
from speculab.harness.imports.per_request import genai_perf, inference_perf, inference_perf_stages
from speculab.harness.imports.summaries import guidellm, llmperf, sglang, vllm
from speculab.harness.imports.summaries.summary import RunSummary


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


class SummaryReader(Protocol):
    """One tool's reader of its summary-only files (a module under `summaries`): the tool's own aggregates."""

    TOOL: str

    def detect(self, path: Path) -> bool: ...

    def read(self, path: Path) -> tuple[RunSummary, ...]: ...


@dataclass(frozen=True, slots=True)
class Format:
    """One tool's format: its per-request reader, and the summary reader of the files it writes without requests."""

    reader: Reader
    # None: every file of this format keeps its requests (or speculab reads none that does not)
    summaries: SummaryReader | None = None
    # a directory format's run files (a vLLM sweep's run=N.json, its layout known by its reader alone), each read by
    # `summaries`; None for a format of files
    members: Callable[[Path], list[Path]] | None = None
    # its runs are matched by load, a load's several runs being its repeats (a vLLM sweep's run=N.json)
    by_load: bool = False

    @property
    def name(self) -> str:
        return self.reader.FORMAT


SPECULAB_BENCH = Format(speculab_bench)
VLLM = Format(vllm_bench, vllm)
VLLM_SWEEP = Format(vllm_sweep, vllm, vllm_sweep.run_files, by_load=True)
GUIDELLM = Format(guidellm_benchmarks, guidellm)
AIPERF = Format(aiperf_profile)
SGLANG = Format(sglang_bench, sglang)
LLMPERF = Format(llmperf_responses, llmperf)
# each stage a load, and stages at one load across two runs matched by it (a stage at a load twice: its repeats)
INFERENCE_PERF = Format(inference_perf, inference_perf_stages, by_load=True)
GENAI_PERF = Format(genai_perf, by_load=True)  # each experiment a load (perf_analyzer's --concurrency-range)
# in the order users were promised their --format names
TABLE: tuple[Format, ...] = (
    SPECULAB_BENCH,
    VLLM,
    VLLM_SWEEP,
    GUIDELLM,
    AIPERF,
    SGLANG,
    LLMPERF,
    INFERENCE_PERF,
    GENAI_PERF,
)

SPECULAB = SPECULAB_BENCH.name
READERS: dict[str, Reader] = {f.name: f.reader for f in TABLE}
FORMATS = tuple(READERS)
# the formats of directories, asked first and in this order: a vLLM sweep's is a directory of run files (or of such
# directories), or a prefix of their names; an inference-perf report directory holds its per-request report (whose
# reader also claims that file, and a stage report beside it: each names the same stages); any other directory is a
# speculab bench run's
_DIRECTORY_FORMATS = (VLLM_SWEEP, INFERENCE_PERF, SPECULAB_BENCH)
# the formats of files, the most specific first: a GuideLLM file also names a `backend` near its start, as vLLM's
# does; an SGLang line opens with its `tag` (before `backend`); an LLMPerf file is a list named
# *_individual_responses.json; a GenAI-Perf export opens with `experiments`. The summary readers are asked in the
# same order, for the same reasons (inference-perf's stage reports among them)
_FILE_FORMATS = (GUIDELLM, AIPERF, SGLANG, LLMPERF, GENAI_PERF, INFERENCE_PERF, VLLM)
_DIRECTORIES: tuple[Reader, ...] = tuple(f.reader for f in _DIRECTORY_FORMATS)
_FILES: tuple[Reader, ...] = tuple(f.reader for f in _FILE_FORMATS)
# the readers of suites' aggregate files, which keep no request (no per-request reader): asked before the tools'
# summary readers, since a draftbench file names a `backend` near its start as vLLM's does, and an InferenceX
# aggregate is made from a vLLM result
_AGGREGATES: tuple[SummaryReader, ...] = (inferencex, draftbench, specforge, trtllm_bench)
SUMMARY_READERS: tuple[SummaryReader, ...] = _AGGREGATES + tuple(
    f.summaries for f in _FILE_FORMATS if f.summaries is not None
)
_PICKS: tuple[Picks, ...] = (guidellm_benchmarks, sglang_bench)
# the marks a refusal names the closest tool by (`unclaimed`): the readers' that keep theirs beside `detect`, then the
# files recognised and not read (`marks.OTHERS`)
_MARKS: tuple[Marks, ...] = (vllm_bench.MARKS, llmperf_responses.SUMMARY_MARKS, *OTHER_MARKS)
_GIVE = (
    "give a `speculab bench` output directory, a vLLM `bench serve --save-result --save-detailed` file or `bench sweep "
    "serve` directory, a GuideLLM benchmarks.json, an AIPerf profile_export.jsonl, an SGLang bench_serving "
    "--output-details JSONL, an LLMPerf *_individual_responses.json, an inference-perf report directory (its "
    "per_request_lifecycle_metrics.json or stage_N_lifecycle_metrics.json) or a GenAI-Perf profile_export.json"
)


def summary_reader(path: Path) -> SummaryReader | None:
    """The summary reader that claims the file `path`; None where none does."""
    return next((r for r in SUMMARY_READERS if r.detect(path)), None)


def summary_members(path: Path) -> tuple[SummaryReader, list[Path]] | None:
    """The run files of a directory format that `path` names (a vLLM sweep's combination, experiment or
    `SERVE--<setting>` prefix), with the summary reader of each; None where `path` names none."""
    for f in _DIRECTORY_FORMATS:
        if f.members is not None and f.summaries is not None and (found := f.members(path)):
            return f.summaries, found
    return None


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
    if path.is_dir():  # no result in it that `result_path` found: a bench run's, whose reader says what it lacks
        return SPECULAB
    if not path.exists():
        raise UserError(f"{path}: no such file or directory; {_GIVE}")
    if found := next((r.FORMAT for r in _FILES if r.detect(path)), None):
        return found
    raise unclaimed(path)


def claimed(path: Path) -> bool:
    """Whether a reader claims `path` (a directory's or a file's, by its tool's marks)."""
    return any(r.detect(path) for r in (*_DIRECTORIES, *_FILES))


def unclaimed(path: Path) -> UserError:
    """The one line refusing a file no reader claims: the tool whose marks it has the most of (`imports.marks`) and
    what it lacks of them, or what to give instead where that tool's file is one speculab does not read."""
    others = "|".join(f for f in FORMATS if f != SPECULAB)
    give = f"{_GIVE} (--format {others} reads it as one)"
    near = closest(path, _MARKS)
    if near is None:
        return UserError(f"{path}: not a result speculab reads; {give}")
    m, have, lacks = near
    keys = ", ".join(f"`{k}`" for k in have)
    if m.instead:
        return UserError(f"{path}: {m.tool} ({keys}), which speculab does not read: give {m.instead}")
    if not lacks:  # every mark of a tool speculab does not read yet
        return UserError(f"{path}: a {m.tool} file ({keys}), which speculab does not read yet; {give}")
    missing = ", ".join(f"`{k}`" for k in lacks)
    return UserError(f"{path}: not a result speculab reads: closest is {m.tool} ({keys}), but no {missing}; {give}")


def result_path(path: Path, fmt: str | None = None) -> Path:
    """`path`, or the one result in it where it is a tool's output directory (AIPerf's artifact directory, LLMPerf's
    results directory, GuideLLM's or vLLM's output directory): a file a reader detects (the reader of `fmt` where
    given), in it or one directory down, or a directory in it that is a bench run's or a vLLM sweep's. A `speculab
    bench` run's directory or a vLLM sweep's is itself; a directory of several results is one line listing them, one
    of none a line saying what to give."""
    if not path.is_dir() or any(r.detect(path) for r in _DIRECTORIES) or fmt in (r.FORMAT for r in _DIRECTORIES):
        return path
    found = _results_in(path, (READERS[fmt],) if fmt is not None else _FILES, () if fmt is not None else _DIRECTORIES)
    if len(found) == 1:
        return found[0][0]
    if found:
        listed = ", ".join(f"{f.relative_to(path)} ({kind})" for f, kind in found[:_LISTED])
        more = f" and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
        raise UserError(f"{path} holds {len(found)} results ({listed}{more}): give one of them")
    if fmt is not None or speculab_bench.is_ab_run(path):
        return path  # the reader's own words: --format's "a directory", an A/B run's "re-render it"
    if (known := _recognised_in(path)) is not None:  # a tool's file speculab does not read (its aggregates alone)
        raise unclaimed(known)
    raise UserError(
        f"{path}: no result speculab reads in it (no manifest.json of a `speculab bench` run, no result file of a "
        f"known tool in it or one directory down); {_GIVE}"
    )


# how many results of a directory its message lists
_LISTED = 8
# what a tool's result file is named: JSON, JSON lines or YAML (a README or a CSV beside it is none, whatever it says)
_RESULT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")


def _results_in(d: Path, files: tuple[Reader, ...], dirs: tuple[Reader, ...]) -> list[tuple[Path, str]]:
    """The results in `d`, with the format each is read as: the result files one of `files` detects, in it or one
    directory down (a tool's artifact directory holding one directory per run), and its directories one of `dirs`
    detects (a bench run's, a sweep's; the files in those are theirs, not results of their own)."""
    found: list[tuple[Path, str]] = []
    for sub in _listed(d):
        if sub.is_dir() and (kind := next((r.FORMAT for r in dirs if r.detect(sub)), None)):
            found.append((sub, kind))
        elif sub.is_dir():
            found += _result_files(_listed(sub), files)
        else:
            found += _result_files([sub], files)
    return sorted(found)


def _recognised_in(d: Path) -> Path | None:
    """The first result file in `d` (or one directory down) that no reader claims but whose tool's marks it has."""
    subs = _listed(d)
    files = [*subs, *(f for sub in subs if sub.is_dir() for f in _listed(sub))]
    named = (f for f in files if f.suffix in _RESULT_SUFFIXES and f.is_file())
    return next((f for f in named if closest(f, _MARKS) is not None), None)


def _listed(d: Path) -> list[Path]:
    """What `d` holds ([] where it may not be read: a folder of someone else's is no result, not a traceback)."""
    try:
        return sorted(d.iterdir())
    except OSError:
        return []


def _result_files(paths: list[Path], readers: tuple[Reader, ...]) -> list[tuple[Path, str]]:
    """The result files among `paths` one of `readers` detects, with the format each is read as."""
    named = (f for f in paths if f.suffix in _RESULT_SUFFIXES and f.is_file())
    return [(f, kind) for f in named if (kind := next((r.FORMAT for r in readers if r.detect(f)), None))]


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
    return any(f.by_load for f in TABLE if f.name in fmts)


def of_other_tools(fmts: tuple[str, ...]) -> tuple[Reader, ...]:
    """The readers of other tools' files among `fmts` (their NAME, NOTE and HOW are compare's words about them)."""
    return tuple(READERS[f] for f in fmts if f != SPECULAB)
