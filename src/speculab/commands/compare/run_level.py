"""`speculab compare A B` of summary-only results: the run is the unit. When either side keeps no request (a vLLM
file without `--save-detailed`, a `bench sweep serve` run, an SGLang line without `--output-details`, a GuideLLM
file whose request lists are empty), both sides are read as their tools' own aggregates and compared load by load
(`verdict.run_level`); the loads must be the same, as for any A/B. Written to DIR/summary.json (its own schema:
no report.html, no per-request views)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from speculab.commands.compare.arms import same_model
from speculab.errors import UserError
from speculab.harness.imports.registry import claimed, unclaimed
from speculab.harness.imports.summaries.read import read_side
from speculab.harness.imports.summaries.rows import A_ROW, B_ROW, RowSelector, pick_rows, shared_loads
from speculab.harness.imports.summaries.summary import RunSummary
from speculab.harness.results.ab_dir import INPUTS_FILE, check_ab_output_dir
from speculab.harness.results.summary_file import SUMMARY_FILE, write_summary_file
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind
from speculab.harness.stats.intervals import CONFIDENCE
from speculab.harness.verdict.run_level import (
    MIN_RUNS,
    READABLE_RUN_LEVEL_SCHEMAS,
    RunLevelReport,
    compare_load,
    run_level_from_json,
)


def _summary_only(runs: Sequence[RunSummary] | None) -> bool:
    return runs is not None and not all(r.per_request for r in runs)


def summaries_of(
    path_a: Path, path_b: Path, rows: tuple[RowSelector | None, RowSelector | None] = (None, None)
) -> tuple[tuple[RunSummary, ...], tuple[RunSummary, ...]] | None:
    """Both sides' runs as summaries when the comparison's unit must be the run (either side keeps no request), each
    side's the rows `rows` picks of it (--a-row, --b-row); None: compare them per request, as ever
    (`compare.pairing`)."""
    sa, sb = (read_side(p) for p in (path_a, path_b))
    if not (_summary_only(sa) or _summary_only(sb)):
        if rows != (None, None):
            raise UserError(
                f"{A_ROW} / {B_ROW} pick rows of a summary file of several configurations (draftbench, SpecForge, "
                f"an InferenceX collection); {path_a} and {path_b} keep per-request data: leave them out"
            )
        return None
    if sa is None or sb is None:
        given, other = (path_a, path_b) if sa is not None else (path_b, path_a)
        if other.is_file() and not claimed(other):  # no tool's file: which tool's it is closest to, and what it lacks
            raise unclaimed(other)
        raise UserError(
            f"{given} keeps no per-request data, so it is compared at the run level, with another summary of vLLM "
            f"bench serve, SGLang bench_serving or GuideLLM, or a suite's aggregate (InferenceX, draftbench, "
            f"SpecForge, trtllm-bench); {other} is not one: give such a file for both sides"
        )
    return pick_rows(sa, rows[0], path_a, A_ROW), pick_rows(sb, rows[1], path_b, B_ROW)


def rows_at_shared_loads(
    runs: tuple[tuple[RunSummary, ...], tuple[RunSummary, ...]],
) -> tuple[tuple[tuple[RunSummary, ...], tuple[RunSummary, ...]], tuple[ReportWarning, ...]]:
    """Arms picked by --a-row / --b-row kept to the loads both have, with a note for each arm that lost some (its
    rows at a load the other arm has none at, left out: not a comparison)."""
    a, b, lost_a, lost_b = shared_loads(*runs)
    notes = tuple(
        ReportWarning(Kind.RUN_LEVEL_ROWS_UNMATCHED, side, fields={"loads": list(lost)})
        for side, lost in (("A", lost_a), ("B", lost_b))
        if lost
    )
    return (a, b), notes


def _by_load(runs: Sequence[RunSummary]) -> dict[str, list[RunSummary]]:
    out: dict[str, list[RunSummary]] = {}
    for r in runs:
        out.setdefault(r.level.key, []).append(r)
    return out


def _loads(runs: Mapping[str, list[RunSummary]]) -> str:
    return ", ".join(v[0].level.label for v in runs.values())


def _stated(runs: Sequence[RunSummary]) -> list[dict[str, object]]:
    """The acceptance the side's files state, each with its run's load (the tool's own figure, unit and key)."""
    return [a.to_dict() | {"load": r.level.label} for r in runs for a in r.acceptance]


def _differing(runs: tuple[Sequence[RunSummary], Sequence[RunSummary]]) -> set[str]:
    """The configuration fields in which A's rows differ from B's (what tells the arms apart: `spec_decoding`,
    `draft`), where both are rows of files of several configurations."""
    if runs[0][0].row is None or runs[1][0].row is None:
        return set()
    a, b = (dict(side[0].row.configuration) for side in runs)
    return {k for k in a.keys() | b.keys() if a.get(k, "none") != b.get(k, "none")}  # a field one lacks: none


def _told_apart(r: RunSummary, differ: set[str]) -> list[list[str]] | None:
    """The row's fields in `differ`, its own in its file's order first, as [[field, value]]; None for no row."""
    if r.row is None:
        return None
    ordered = [k for k in r.row.config if k in differ] + sorted(differ - set(r.row.config))
    return [[k, r.row.fields.get(k, "none")] for k in ordered]


def _side_note(side: str, runs: Sequence[RunSummary], differ: set[str]) -> ReportWarning:
    """What one side is: its file, how many runs, which tool (and version) summarised them, its model, the rows of
    its file it is (with the fields in `differ`, those that tell it from the other side) and the acceptance the
    file states."""
    r = runs[0]
    fields = {
        "name": r.name,
        "runs": len(runs),
        "tool": r.tool,
        "version": r.version or None,
        "layout": r.info.get("layout") or None,
        "model": r.model or None,
        "per_request": all(x.per_request for x in runs),
        "rows": sorted({x.row.index for x in runs if x.row is not None}) or None,
        "configuration": _told_apart(r, differ),
        "acceptance": _stated(runs) or None,
        "measured_load": r.info.get("measured_load") or None,
    }
    return ReportWarning(Kind.RUN_LEVEL_SIDE, side, fields=fields)


def compare_summaries(
    path_a: Path,
    path_b: Path,
    runs: tuple[Sequence[RunSummary], Sequence[RunSummary]],
    margins: Mapping[str, float],
    *,
    names: tuple[str, str] | None = None,
    allow_different_models: bool = False,
    max_error_rate: float | None = None,
) -> RunLevelReport:
    """A's and B's runs compared load by load (the same loads on both sides, else refused; two target models
    refused unless `allow_different_models`); `names`: the arms' (default: each side's file or folder name);
    `max_error_rate`: the error gate the command applies to each run's counts, said in a note (None: none)."""
    models = ((r.model or "" for r in side) for side in runs)
    model_note = same_model(path_a, path_b, *models, allow_different_models)
    la, lb = (_by_load(r) for r in runs)
    if set(la) != set(lb):
        raise UserError(
            f"{path_a} and {path_b} ran at different loads ({_loads(la)} vs {_loads(lb)}): an A/B compares one load; "
            "run both at the same concurrency or request rate"
        )
    loads = tuple(compare_load(v[0].level, v, lb[k], margins) for k, v in la.items())
    notes = [
        ReportWarning(Kind.RUN_LEVEL_UNIT),
        ReportWarning(Kind.RUN_LEVEL_FIGURES),
        _side_note("A", runs[0], _differing(runs)),
        _side_note("B", runs[1], _differing(runs)),
    ]
    notes += [ReportWarning.from_text(model_note)] if model_note else []  # the model check's own words (arms.py)
    if max_error_rate is not None:
        every = [r for side in runs for r in side]
        counted = sum(1 for r in every if r.completed is not None and r.failed is not None)
        gate = {"max_error_rate": max_error_rate, "runs": len(every), "counted": counted}
        notes.append(ReportWarning(Kind.RUN_LEVEL_ERROR_GATE, fields=gate))
    notes += [
        ReportWarning(
            Kind.RUN_LEVEL_NO_INTERVAL, load=x.level.label, fields={"a": x.runs_a, "b": x.runs_b, "needed": MIN_RUNS}
        )
        for x in loads
        if not x.has_interval
    ]
    a, b = runs[0][0], runs[1][0]
    a_name, b_name = names or (a.name, b.name)
    return RunLevelReport(
        a_name=a_name,
        b_name=b_name,
        a_tool=a.tool,
        b_tool=b.tool,
        a_version=a.version,
        b_version=b.version,
        confidence=CONFIDENCE,
        loads=loads,
        notes=tuple(notes),
    )


def save(out: Path, report: RunLevelReport, *, again: bool = False) -> Path:
    """DIR/summary.json of a run-level comparison (DIR checked as any A/B's output directory; `again`: DIR is the
    comparison's own, re-decided by `speculab report --margin`, its figures unchanged)."""
    if not again:
        check_ab_output_dir(out)
    return write_summary_file(out, report.to_dict(), indent=1)


def saved_run_level(directory: Path) -> RunLevelReport | None:
    """The run-level comparison saved in DIR (`compare` of summary-only files writes only DIR/summary.json), for
    `speculab report DIR`; None where DIR is not one (an A/B run's directory: its inputs.json)."""
    path = directory / SUMMARY_FILE
    if not path.is_file() or (directory / INPUTS_FILE).exists():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(
            f"{path}: cannot read it ({e}); run `speculab compare A B --output {directory}` again"
        ) from None
    if not any(schema in text for schema in READABLE_RUN_LEVEL_SCHEMAS):
        return None  # another summary.json (e.g. a bench run's): the A/B reader says what DIR lacks
    try:
        return run_level_from_json(text)
    except ValueError as e:
        raise UserError(f"{path}: {e}; run `speculab compare A B --output {directory}` again") from None
