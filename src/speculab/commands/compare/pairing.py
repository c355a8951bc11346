"""`speculab compare A B`: two results -> the A/B report's inputs (A is the baseline).

Each of A and B is a `speculab bench` output directory or a result another tool wrote (`harness.imports`: vLLM
`bench serve --save-result --save-detailed` files and `bench sweep serve` directories, GuideLLM `benchmarks.json`,
AIPerf `profile_export.jsonl`, SGLang `bench_serving` JSONL, LLMPerf `*_individual_responses.json`), detected or
named by `--format`; the two may be of different kinds. Results of several loads (a sweep; an SGLang file of several
runs) are compared load by load, a load's several runs (a vLLM sweep's) as its repeats. The runs are paired per
prompt like an A/B run, but they were two separate runs: the single change cannot be verified and drift between them
is not cancelled by interleaving; the inputs say so. Two bench runs that differ in workload, sampling or offered load
are refused, naming the first difference. Runs whose prompts differ in number, lengths or texts (another tool's file,
or a bench run beside one) are compared unpaired, as two samples, and the report says so and why (`--unpaired` asks
for that whatever the prompts); runs at different loads are refused (docs/imports.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from speculab.commands.compare.arms import arm_names, same_model
from speculab.errors import UserError
from speculab.harness.design import BASELINE, UNKNOWN, ArmInfo, Setup
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.imports.registry import (
    SPECULAB,
    by_load,
    of_other_tools,
    picks_one,
    read_runs,
    result_format,
    result_path,
    runs_named,
)
from speculab.harness.records import RequestSpec
from speculab.harness.results.ab_run import SAID_NOTE, ABRun, ChangeCheck, RepeatRun, not_checked
from speculab.harness.results.warnings import ReportWarning, distinct
from speculab.harness.results.warnings import WarningKind as Kind
from speculab.harness.servers.adapters import said, said_change
from speculab.harness.workload.fit import fit_from_manifest, fit_warning

CANDIDATE = "candidate"


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], keys: tuple[str, ...], what: str) -> list[str]:
    return [f"{what}.{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _workload_differences(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> list[str]:
    """Whether two bench runs asked for one workload (its spec): two samples of two workloads compare nothing."""
    return _differences(ma.get("workload") or {}, mb.get("workload") or {}, ("spec",), "workload")


def _prompt_differences(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> list[str]:
    """How two bench runs of one workload differ in the prompts they drew: how many, which seed, which left out."""
    return [
        *_differences(ma.get("workload") or {}, mb.get("workload") or {}, ("source", "n_items"), "workload"),
        *_differences(ma.get("fit") or {}, mb.get("fit") or {}, ("left_out",), "fit"),
        *_differences(ma.get("sampling") or {}, mb.get("sampling") or {}, ("seed",), "sampling"),
    ]


def _condition_differences(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> list[str]:
    """How two bench manifests differ in what the runs asked for beyond their prompts: sampling, load, endpoint."""
    return [
        *_differences(
            ma.get("sampling") or {},
            mb.get("sampling") or {},
            ("max_tokens", "temperature", "top_p"),
            "sampling",
        ),
        *_differences(ma.get("load") or {}, mb.get("load") or {}, ("mode", "concurrency", "rate_rps"), "load"),
        *_differences(ma.get("endpoint") or {}, mb.get("endpoint") or {}, ("api", "stream"), "endpoint"),
    ]


def inputs_from_bench_dirs(
    dir_a: Path, dir_b: Path, *, names: tuple[str, str] | None = None, allow_different_models: bool = False
) -> ABRun:
    """Pair two bench runs (A = baseline, B = candidate) into report inputs; refuse runs that cannot be paired, or
    of two target models (unless `allow_different_models`). `names`: the arms' (default: from their paths)."""
    a, b = (_bench_run(d) for d in (dir_a, dir_b))
    model_note = same_model(dir_a, dir_b, (a.model,), (b.model,), allow_different_models)
    ma, mb = a.manifest or {}, b.manifest or {}
    workload, prompts, conditions = (
        f(ma, mb) for f in (_workload_differences, _prompt_differences, _condition_differences)
    )
    diffs, other = [*workload, *prompts, *conditions], [*workload, *conditions]
    if diffs:
        # only the prompts differ (two samples of one workload): they may still be compared, unpaired
        also = "" if other else " (or compare them as two samples with --unpaired)"
        raise UserError(
            f"{dir_a} and {dir_b} cannot be paired: {'; '.join(diffs)}; rerun one of them with the other's "
            f"settings{also}"
        )
    sampling = ma.get("sampling") or {}
    notes: list[str | ReportWarning] = [
        ReportWarning(Kind.COMPARE_BENCH_RUNS),
        *a.notes,
        *([model_note] if model_note else []),
    ]
    if fitted := fit_warning(fit_from_manifest(ma.get("fit") or {})):
        notes.append(fitted)
    return _ab_run(
        ((a, b),),
        names=arm_names(dir_a, dir_b, names),
        arm=_bench_arm,
        run_notes=lambda r: (r.unfinished,) if r.unfinished else (),
        notes=notes,
        change=_served_change(a, b),
        workload_name=(ma.get("workload") or {}).get("name") or "",
        workload_source=(ma.get("workload") or {}).get("source") or "",
        synthesised_prompts=(ma.get("workload") or {}).get("synthesised"),  # a manifest before it: None
        api=(ma.get("endpoint") or {}).get("api", "completions"),
        items=a.items,
        temperature=float(sampling.get("temperature") or 0.0),
        top_p=float(sampling.get("top_p") or 1.0),
        seed=int(sampling.get("seed") or 0),
        max_tokens=int(sampling.get("max_tokens") or 0),
        ignore_eos=bool(sampling.get("ignore_eos")),
        logprobs=(ma.get("endpoint") or {}).get("logprobs"),
        finished_utc=mb.get("finished_at") or "",
        versions=ma.get("versions") or {},
    )


def _bench_run(d: Path) -> ImportedRun:
    """A `speculab bench` output directory's run (its manifest with it)."""
    return read_runs(d, SPECULAB)[0]


def _bench_arm(r: ImportedRun) -> dict[str, Any]:
    """A bench run's arm: the server its manifest recorded, the URL it measured, and the speculation the server said
    it runs where it said it (speculab serve's /version), so the arm is labelled by what ran, not left "none"."""
    info = {k: r.info.get(k) for k in ("version", "models", "detected_engine")}
    url = ((r.manifest or {}).get("endpoint") or {}).get("base_url", "")
    ran = said(info)
    spec = {"method": ran.method, "num_speculative_tokens": ran.k} if ran is not None and ran.method else {}
    return {"url": url, "engine": info["detected_engine"], "server_info": info, **spec}


def _served_change(a: ImportedRun, b: ImportedRun) -> ChangeCheck:
    """The single change, checked from what both servers said they run where both said it (speculab serve); else
    why it cannot be verified."""
    checked = said_change(a.info, b.info)
    if checked is None:
        return ChangeCheck(CANDIDATE, (), None, not_checked("separate_bench_runs"))
    diff, single = checked
    return ChangeCheck(CANDIDATE, tuple(diff.lines()), single, SAID_NOTE)


def _file_arm(r: ImportedRun) -> dict[str, Any]:
    """An arm read from any result: the server as the file states it (no URL: the file keeps none)."""
    return {"engine": str(r.info.get("detected_engine") or "other"), "server_info": dict(r.info)}


def _as_notes(notes: Iterable[str | ReportWarning]) -> list[ReportWarning]:
    """The A/B's notes as records: compare's own and the file readers' are (their kinds in harness.results.warnings);
    what each reader says of all its tool's files (its NOTE), a bench directory's reader and the model check
    (`arms.same_model`) say is still their words, carried as a `note`."""
    return [ReportWarning.from_text(n) if isinstance(n, str) else n for n in notes]


def _ab_run(
    pairs: Sequence[tuple[ImportedRun, ImportedRun]],
    *,
    names: tuple[str, str],
    arm: Callable[[ImportedRun], dict[str, Any]],
    run_notes: Callable[[ImportedRun], tuple[str | ReportWarning, ...]],
    notes: Sequence[str | ReportWarning],
    change: ChangeCheck,
    **setup: Any,
) -> ABRun:
    """The saved A/B run of two separate runs: A's and B's runs in pairs, one pair per load and run (the run is the
    repeat), sent A, B, A, B, ... What the caller knows of them beyond the runs themselves: the arms'
    `names`, each arm's server (`arm`), each run's notes, the A/B's notes, the single-change check (`change`), and
    the setup's workload and sampling (`setup`: Setup's fields)."""
    a, b = pairs[0]
    runs = tuple(
        RepeatRun(
            arm=name,
            level=x.level.key,
            repeat=r.repeat,
            records=r.records,
            acceptance=r.acceptance,
            order=2 * j + i,
            interrupted=r.interrupted,
            notes=tuple(_as_notes(run_notes(r))),
            sends_rebuilt=r.sends_rebuilt,
            duration_s=r.duration_s,
        )
        for j, (x, y) in enumerate(pairs)
        for i, (name, r) in enumerate(((BASELINE, x), (CANDIDATE, y)))
    )
    return ABRun(
        setup=Setup(
            name=f"{names[0]} vs {names[1]}",
            levels=tuple({x.level.key: x.level for x, _ in pairs}.values()),
            repeats=max(x.repeat for x, _ in pairs),
            two_url_mode=True,
            separate_runs=True,
            started_utc=a.started_utc,
            **setup,
        ),
        arms=tuple(
            ArmInfo(name, f"{tag}: {label}", **arm(r))
            for name, tag, label, r in ((BASELINE, "A", names[0], a), (CANDIDATE, "B", names[1], b))
        ),
        changes=(change,),
        runs=runs,
        notes=tuple(distinct(_as_notes(notes))),
    )


# ---------------------------------------------------------------------------------------------------------------
# Results of other kinds (harness.imports), and a bench directory beside one: paired per prompt when verified.
# ---------------------------------------------------------------------------------------------------------------


def inputs_from_results(
    path_a: Path,
    path_b: Path,
    fmt: str | None = None,
    benchmark: int | None = None,
    unpaired: bool = False,
    *,
    names: tuple[str, str] | None = None,
    allow_different_models: bool = False,
) -> ABRun:
    """Pair two results of any kinds speculab reads (A = baseline, B = candidate) into report inputs, or compare
    them unpaired where their prompts differ (or `unpaired` asks for it), load by load where they hold several;
    `benchmark` picks one benchmark (0-based) of a GuideLLM file, or one run (line) of an SGLang file. A tool's
    output directory stands for the one result in it. Two target models are refused unless
    `allow_different_models`; `names`: the arms' (default: the distinguishing parts of the two paths)."""
    path_a, path_b = result_path(path_a, fmt), result_path(path_b, fmt)
    names = arm_names(path_a, path_b, names)
    kinds = (result_format(path_a, fmt), result_format(path_b, fmt))
    if benchmark is not None and not picks_one(kinds):
        raise UserError(
            "--benchmark picks one benchmark of a GuideLLM file or one run of an SGLang file; neither A nor B is one"
        )
    if kinds == (SPECULAB, SPECULAB):
        if not unpaired:
            return inputs_from_bench_dirs(path_a, path_b, names=names, allow_different_models=allow_different_models)
        _same_conditions(path_a, path_b)
    readers = of_other_tools(kinds)
    sa, sb = (read_runs(p, k, benchmark) for p, k in zip((path_a, path_b), kinds, strict=True))
    model_note = same_model(path_a, path_b, (r.model for r in sa), (r.model for r in sb), allow_different_models)
    if by_load(kinds):  # a sweep's loads and runs: one comparison per load, run j with run j
        pairs = _by_load(path_a, path_b, sa, sb)
    elif len(sa) > 1 or len(sb) > 1:  # a GuideLLM sweep or an SGLang file of several runs: benchmark i with i
        pairs = _sweep_pairs(path_a, path_b, sa, sb, kinds)
    else:
        _same_load(path_a, path_b, sa[0], sb[0])
        pairs = ((sa[0], sb[0]),)
    within = _repeats_problem(pairs)  # None: each side's runs at a load are one set of prompts, one value per index
    why = _why_unpaired(_pairs_problem(pairs) or within, unpaired)
    inputs = _imported_inputs(pairs, readers, names, why)
    same = within is None
    notes = [*inputs.notes, *((model_note,) if model_note else ())]
    if why and inputs.setup.repeats > 1:
        notes.append(ReportWarning(Kind.UNPAIRED_REPEATS, fields={"same_prompts": same}))
    return replace(inputs, setup=replace(inputs.setup, repeats_same_prompts=same), notes=tuple(_as_notes(notes)))


def _pairs_problem(pairs: Sequence[tuple[ImportedRun, ImportedRun]]) -> str | None:
    """The first reason A's and B's runs at a load cannot be paired per prompt (their runs of one side against each
    other are `_repeats_problem`'s); None: every pair verified."""
    several = len(pairs) > 1
    for x, y in pairs:
        where = f"{x.level.label}, run {x.repeat}: " if several else ""
        if problem := _unpaired(x, y):
            return where + problem
    return None


def _repeats_problem(pairs: Sequence[tuple[ImportedRun, ImportedRun]]) -> str | None:
    """The first reason one side's runs at a load are not the same prompts in the same order (None: they are)."""
    first: dict[tuple[str, str], ImportedRun] = {}
    for x, y in pairs:
        for side, r in (("A", x), ("B", y)):
            r0 = first.setdefault((side, r.level.key), r)
            if r0 is not r and (problem := _unpaired(r0, r)):
                return f"{side}'s runs at {r.level.label} differ (run {r0.repeat} vs {r.repeat}): {problem}"
    return None


def _by_load(
    path_a: Path, path_b: Path, sa: Sequence[ImportedRun], sb: Sequence[ImportedRun]
) -> tuple[tuple[ImportedRun, ImportedRun], ...]:
    """Runs at several loads (a vLLM sweep's), matched by load: both sides need the same loads; at each, A's run j
    with B's run j (the repeats; the extra runs of the side with more are left out, and a note says so)."""
    la: dict[str, list[ImportedRun]] = {}
    lb: dict[str, list[ImportedRun]] = {}
    for side, runs in ((la, sa), (lb, sb)):
        for r in runs:
            side.setdefault(r.level.key, []).append(r)
    if set(la) != set(lb):

        def loads(d: dict[str, list[ImportedRun]]) -> str:
            return ", ".join(v[0].level.label for v in d.values())

        raise UserError(
            f"{path_a} holds runs at {loads(la)}; {path_b} at {loads(lb)}: runs at several loads are compared load by "
            "load, so both need the same loads"
        )
    pairs = []
    for key, runs_a in la.items():
        runs_b, n = lb[key], min(len(runs_a), len(lb[key]))
        fields = {"at": runs_a[0].level.label, "a": len(runs_a), "b": len(runs_b), "compared": n}
        left = (ReportWarning(Kind.RUNS_LEFT_OUT, fields=fields),) if len(runs_a) != len(runs_b) else ()
        for j in range(n):
            x, y = runs_a[j], runs_b[j]
            pairs.append((replace(x, repeat=j + 1, notes=(*x.notes, *left)), replace(y, repeat=j + 1)))
    return _with_roles(pairs)


def _why_unpaired(problem: str | None, asked: bool) -> Mapping[str, str | None] | None:
    """Why the comparison is unpaired, as the fields of its note (`problem`: the first reason the runs cannot be
    paired per prompt, in `_pairs_problem`'s words; None where only --unpaired asked for it), or None: paired."""
    if problem:
        return {"problem": problem}
    return {"problem": None} if asked else None


def _same_load(path_a: Path, path_b: Path, a: ImportedRun, b: ImportedRun, where: str = "") -> None:
    """Two runs at different loads answer different questions: refused, paired or not; a load a file does not state
    is none of them (never assumed), so it pairs only with another unknown load."""
    if (a.level.kind == UNKNOWN) != (b.level.kind == UNKNOWN):
        (path, run), (other, known) = (
            ((path_a, a), (path_b, b)) if a.level.kind == UNKNOWN else ((path_b, b), (path_a, a))
        )
        raise UserError(
            f"{path} does not state its load and {other} ran at {known.level.label}: an A/B compares one load; "
            f"give it {run.load_from or 'the file that states its load'}, or compare it with a file that states no "
            "load either"
        )
    if a.level.key != b.level.key:
        raise UserError(
            f"{path_a} and {path_b} ran at different loads{where} ({a.level.label} vs {b.level.label}): an A/B "
            "compares one load; run both at the same concurrency or request rate"
        )


def _same_conditions(dir_a: Path, dir_b: Path) -> None:
    """Two bench runs compared unpaired may differ in the prompts they drew, not in workload, sampling, load or
    endpoint."""
    ma, mb = (_bench_run(d).manifest or {} for d in (dir_a, dir_b))
    if diffs := [*_workload_differences(ma, mb), *_condition_differences(ma, mb)]:
        raise UserError(
            f"{dir_a} and {dir_b} cannot be compared: {'; '.join(diffs)}; rerun one of them with the other's settings"
        )


def _sweep_pairs(
    path_a: Path, path_b: Path, sa: Sequence[ImportedRun], sb: Sequence[ImportedRun], kinds: tuple[str, str]
) -> tuple[tuple[ImportedRun, ImportedRun], ...]:
    """Benchmark (or SGLang line) i of A with i of B, each at the same load (their prompts are checked by the
    caller); the levels' roles are a sweep's (the lowest load "low", the highest "operating")."""
    what = runs_named(kinds)
    if len(sa) != len(sb):
        most = max(len(sa), len(sb))
        raise UserError(
            f"{path_a} holds {len(sa)} {what}, {path_b} {len(sb)}: runs at several loads are compared load by load, so "
            f"both need the same loads; or compare one load with --benchmark N (0-based, 0 to {most - 1})"
        )
    keys = [x.level.key for x in sa]
    if len(set(keys)) < len(keys):
        raise UserError(f"{path_a}: two {what} at one load ({', '.join(keys)}): compare one with --benchmark N")
    for i, (x, y) in enumerate(zip(sa, sb, strict=True)):
        if (x.level.kind, x.level.value) != (y.level.kind, y.level.value):
            raise UserError(
                f"{path_a} and {path_b}: benchmark {i} is at {x.level.label} in A and {y.level.label} in B: a sweep is "
                "compared load by load, so both need the same loads in the same order"
            )
    return _with_roles(list(zip(sa, sb, strict=True)))


def _with_roles(pairs: Sequence[tuple[ImportedRun, ImportedRun]]) -> tuple[tuple[ImportedRun, ImportedRun], ...]:
    """Several loads take a sweep's roles: the lowest load "low", the highest "operating", every one "sweep"; one
    load keeps its own roles (low and operating)."""
    values = sorted({x.level.value for x, _ in pairs})
    if len(values) < 2:
        return tuple(pairs)

    def at(r: ImportedRun) -> ImportedRun:
        v = r.level.value
        roles = ("low", "sweep") if v == values[0] else ("operating", "sweep") if v == values[-1] else ("sweep",)
        return replace(r, level=replace(r.level, roles=roles))

    return tuple((at(x), at(y)) for x, y in pairs)


def _unpaired(a: ImportedRun, b: ImportedRun) -> str | None:
    """The first reason two runs at one load are not the same prompts (None: they are, as far as known)."""
    if why := a.unpairable or b.unpairable:
        return why
    if len(a.input_lens) != len(b.input_lens):
        return f"{len(a.input_lens)} prompts vs {len(b.input_lens)}"
    if a.items and b.items:
        same = (x.context_sha256() == y.context_sha256() for x, y in zip(a.items, b.items, strict=False))
        if (i := next((i for i, ok in enumerate(same) if not ok), None)) is not None:
            return f"prompt {i}: the prompts differ"
        return None  # the same texts in the same order: their lengths may still differ where two tools count them
    if a.prompt_keys and b.prompt_keys and a.key_kind == b.key_kind:
        same = (x == y for x, y in zip(a.prompt_keys, b.prompt_keys, strict=False))
        if (i := next((i for i, ok in enumerate(same) if not ok), None)) is not None:
            return f"prompt {i}: {a.key_kind} {a.prompt_keys[i]} vs {b.prompt_keys[i]}"
    for i, (x, y) in enumerate(zip(a.input_lens, b.input_lens, strict=True)):
        if x is None or y is None:
            return f"prompt {i}: its length in tokens is unknown in {a.name if x is None else b.name}"
        if x != y:
            return f"prompt {i}: {x} vs {y} input tokens"
    return None


def _imported_inputs(
    pairs: Sequence[tuple[ImportedRun, ImportedRun]],
    readers: tuple[Any, ...],
    arms: tuple[str, str],
    why_unpaired: Mapping[str, str | None] | None = None,
) -> ABRun:
    """Report inputs from runs of any kinds, one pair per load and run (the run is the repeat; sampling is what a
    bench run recorded, if either is one); `readers` are the modules that read the other tools' files among them
    (their notes are said once). The prompts are the first load's; where another load's differ, the report holds
    none (each load's were checked equal between A and B). `why_unpaired`: the runs are compared as two samples,
    for this reason."""
    a, b = pairs[0]
    sampling = _sampling(a, b)
    same_items = not why_unpaired and all(_same_prompts(a.items, x.items) for x, _ in pairs[1:])
    names = " and ".join(dict.fromkeys(m.NAME for m in readers))
    checked = "prompts" if a.items and b.items else "prompt lengths"
    how = f"paired by position, their {checked} equal"
    if why_unpaired:
        sent = ", ".join(dict.fromkeys(f"{_measured(x)} vs {_measured(y)}" for x, y in pairs))
        how = f"not paired: two samples ({sent} requests)"
    runs = {"tool_a": a.tool, "tool_b": b.tool, "paired": not why_unpaired, "checked": checked}
    notes: list[str | ReportWarning] = [
        ReportWarning(Kind.COMPARE_FILE_RUNS, fields=runs),
        *([_unpaired_note(why_unpaired, readers)] if why_unpaired else []),
        *(m.NOTE for m in readers),  # each reader's own words about its tool's files, carried as notes
        *(n for x, y in pairs for n in (*x.notes, *y.notes)),
    ]
    if not sampling:
        notes.append(ReportWarning(Kind.SAMPLING_NOT_RECORDED, fields={"tools": names}))
    return _ab_run(
        pairs,
        names=arms,
        arm=_file_arm,
        run_notes=lambda r: r.notes,
        notes=notes,
        change=ChangeCheck(CANDIDATE, (), None, not_checked("separate_runs")),
        workload_name=next((f"{r.name}'s workload" for r in (a, b) if r.items), f"not in the {names} files"),
        workload_source=f"the prompts of {arms[0]} and {arms[1]}, {how}",
        api="completions",
        items=(a.items or b.items) if same_items else (),
        paired=not why_unpaired,
        temperature=float(sampling.get("temperature") or 0.0) if sampling else None,
        top_p=float(sampling.get("top_p") or 1.0),
        seed=int(sampling.get("seed") or 0),
        max_tokens=int(sampling.get("max_tokens") or 0),
        finished_utc=b.started_utc,
    )


def _measured(r: ImportedRun) -> int:
    return len({x.index for x in r.records if not x.warmup})


def _unpaired_note(why: Mapping[str, str | None], readers: tuple[Any, ...]) -> ReportWarning:
    """Why the runs are compared unpaired (`_why_unpaired`), and each tool's way to pair its runs."""
    return ReportWarning(Kind.COMPARE_UNPAIRED, fields={**why, "hows": list(dict.fromkeys(m.HOW for m in readers))})


def _same_prompts(x: Sequence[RequestSpec], y: Sequence[RequestSpec]) -> bool:
    return len(x) == len(y) and all(p.context_sha256() == q.context_sha256() for p, q in zip(x, y, strict=True))


def _sampling(a: ImportedRun, b: ImportedRun) -> Mapping[str, Any]:
    """The sampling a speculab bench run recorded (its manifest), where one of the two is one; {} otherwise."""
    return next(((r.manifest.get("sampling") or {}) for r in (a, b) if r.manifest is not None), {})
