"""`speculab compare A B`: two results -> the A/B report's inputs (A is the baseline).

Each of A and B is a `speculab bench` output directory or a vLLM `bench serve --save-result --save-detailed` file
(`harness.imports`), detected or named by `--format`; the two may be of different kinds. The runs are paired per
prompt like an A/B run, but they were two separate runs: the single change cannot be verified and drift between
them is not cancelled by interleaving; the inputs say so. Runs that differ in workload, sampling or offered load,
or (for a vLLM file) in the number or lengths of their prompts, cannot be paired and are refused, naming the first
difference (docs/imports.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.design import BASELINE, ArmInfo, ChangeCheck, LevelSpec, Setup
from speculab.harness.imports import vllm_bench
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.records import RequestSpec
from speculab.harness.results.ab_run import RepeatRun, ReportInputs
from speculab.harness.results.requests_file import read_records
from speculab.harness.results.run_dir import MANIFEST, REQUESTS, SUMMARY
from speculab.harness.servers.acceptance import AcceptanceSummary
from speculab.harness.servers.adapters import detect_engine
from speculab.harness.workload.fit import fit_from_manifest, fit_note, pool_size, without

CANDIDATE = "candidate"
FORMATS = ("speculab", vllm_bench.FORMAT)
_GIVE = "give a `speculab bench` output directory or a vLLM `bench serve --save-result --save-detailed` file"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path.parent}: no {path.name}; give the output directory of a `speculab bench` run") from None
    except ValueError as e:
        raise UserError(f"{path}: not JSON ({str(e)[:200]})") from None
    except RecursionError:
        raise UserError(f"{path}: not JSON this version of speculab wrote (nested too deeply)") from None


def _bench_dir(d: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    if not d.is_dir():
        raise UserError(f"{d}: no such directory; give the output directory of a `speculab bench` run")
    if (d / "inputs.json").is_file():
        raise UserError(f"{d} is an A/B run already; re-render it with `speculab report {d}`")
    manifest = _read_json(d / MANIFEST)
    summary = _read_json(d / SUMMARY) if (d / SUMMARY).is_file() else {}
    if not (d / REQUESTS).is_file():
        raise UserError(f"{d}: no {REQUESTS}; give the output directory of a `speculab bench` run")
    return manifest, summary


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], keys: tuple[str, ...], what: str) -> list[str]:
    return [f"{what}.{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _level(load: Mapping[str, Any]) -> LevelSpec:
    if load.get("mode") == "open":
        return LevelSpec("rate", float(load["rate_rps"]), ("operating",), load.get("arrival"), load.get("concurrency"))
    return LevelSpec("concurrency", float(load.get("concurrency") or 1), ("low", "operating"))


def _acceptance(summary: Mapping[str, Any]) -> AcceptanceSummary | None:
    return AcceptanceSummary.from_spec_decode_dict((summary.get("server") or {}).get("spec_decode"))


def _items(manifest: Mapping[str, Any]) -> tuple[tuple[RequestSpec, ...], str | None]:
    """Reload the workload the bench run used (for prompts and checks); a note when it cannot be found."""
    from speculab.harness.workload.sources import load_workload

    w = manifest.get("workload") or {}
    spec = w.get("spec")
    if not spec:
        return (), "the bench manifest does not name its workload: prompts and checks are not shown"
    seed = int((manifest.get("sampling") or {}).get("seed") or 0)
    fit = manifest.get("fit") or {}
    try:
        wl = load_workload(
            spec,
            seed=seed,
            num_prompts=pool_size(spec, w.get("n_items")) if fit.get("left_out") else w.get("n_items"),
            api=(manifest.get("endpoint") or {}).get("api", "completions"),
        )
    except UserError as e:
        return (), f"workload {spec} could not be reloaded ({e}): prompts and checks are not shown"
    if w.get("source") and wl.source != w.get("source"):
        return (), f"workload {spec} changed since the runs ({wl.source} vs {w.get('source')}): prompts not shown"
    if fit.get("left_out"):  # the items the runs sent: the set without those left out to fit the context
        return without(wl.items, fit["left_out"], w.get("n_items"), seed), None
    return wl.items, None


def _arm(name: str, label: str, manifest: Mapping[str, Any]) -> ArmInfo:
    server = manifest.get("server") or {}
    version = server.get("version")
    cards = server.get("model_cards") or []
    engine = detect_engine(version if isinstance(version, Mapping) else None, {"data": cards}, ())
    return ArmInfo(
        name=name,
        label=label,
        url=(manifest.get("endpoint") or {}).get("base_url", ""),
        engine=engine,
        server_info={"version": version, "models": cards, "detected_engine": engine},
    )


def inputs_from_bench_dirs(dir_a: Path, dir_b: Path) -> ReportInputs:
    """Pair two bench runs (A = baseline, B = candidate) into report inputs; refuse runs that cannot be paired."""
    ma, sa = _bench_dir(dir_a)
    mb, sb = _bench_dir(dir_b)
    diffs = [
        *_differences(ma.get("workload") or {}, mb.get("workload") or {}, ("spec", "source", "n_items"), "workload"),
        *_differences(ma.get("fit") or {}, mb.get("fit") or {}, ("left_out",), "fit"),
        *_differences(
            ma.get("sampling") or {},
            mb.get("sampling") or {},
            ("max_tokens", "temperature", "top_p", "seed"),
            "sampling",
        ),
        *_differences(ma.get("load") or {}, mb.get("load") or {}, ("mode", "concurrency", "rate_rps"), "load"),
        *_differences(ma.get("endpoint") or {}, mb.get("endpoint") or {}, ("api", "stream"), "endpoint"),
    ]
    if diffs:
        raise UserError(
            f"{dir_a} and {dir_b} cannot be paired: {'; '.join(diffs)}; rerun one of them with the other's settings"
        )
    level = _level(ma.get("load") or {})
    items, note = _items(ma)
    sampling = ma.get("sampling") or {}
    setup = Setup(
        name=f"{dir_a.name} vs {dir_b.name}",
        workload_name=(ma.get("workload") or {}).get("name") or "",
        workload_source=(ma.get("workload") or {}).get("source") or "",
        api=(ma.get("endpoint") or {}).get("api", "completions"),
        items=items,
        temperature=float(sampling.get("temperature") or 0.0),
        top_p=float(sampling.get("top_p") or 1.0),
        seed=int(sampling.get("seed") or 0),
        max_tokens=int(sampling.get("max_tokens") or 0),
        ignore_eos=bool(sampling.get("ignore_eos")),
        levels=(level,),
        repeats=1,
        logprobs=(ma.get("endpoint") or {}).get("logprobs"),
        two_url_mode=True,
        started_utc=ma.get("started_at") or "",
        finished_utc=mb.get("finished_at") or "",
        versions=ma.get("versions") or {},
    )
    arms = (_arm(BASELINE, f"A: {dir_a.name}", ma), _arm(CANDIDATE, f"B: {dir_b.name}", mb))
    runs = tuple(
        RepeatRun(
            arm=arm,
            level=level.key,
            repeat=1,
            records=tuple(read_records(d / REQUESTS)),
            acceptance=_acceptance(s),
            order=i,
            interrupted=bool(s.get("interrupted")) or not s,
            notes=("summary.json missing: the run did not finish",) if not s else (),
        )
        for i, (arm, d, s) in enumerate(((BASELINE, dir_a, sa), (CANDIDATE, dir_b, sb)))
    )
    notes = [
        "compare: two separate `speculab bench` runs, A then B; they were not interleaved, so drift between them "
        "(thermal, other tenants) is not cancelled"
    ]
    if note:
        notes.append(note)
    if fitted := fit_note(fit_from_manifest(ma.get("fit") or {})):
        notes.append(fitted)
    change = ChangeCheck(
        CANDIDATE, (), None, "compare: two separate bench runs; speculab could not verify what differs between them"
    )
    return ReportInputs(setup=setup, arms=arms, changes=(change,), runs=runs, notes=tuple(notes))


# ---------------------------------------------------------------------------------------------------------------
# Results of other kinds (harness.imports), and a bench directory beside one: paired per prompt when verified.
# ---------------------------------------------------------------------------------------------------------------


def result_format(path: Path, fmt: str | None = None) -> str:
    """ "speculab" (a bench output directory) or "vllm" (a bench serve result file): `fmt` when given, else detected."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise UserError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
        return fmt
    if path.is_dir():
        return "speculab"
    if not path.exists():
        raise UserError(f"{path}: no such file or directory; {_GIVE}")
    if vllm_bench.detect(path):
        return vllm_bench.FORMAT
    raise UserError(f"{path}: not a result speculab reads; {_GIVE} (--format vllm reads it as the latter)")


def inputs_from_results(path_a: Path, path_b: Path, fmt: str | None = None) -> ReportInputs:
    """Pair two results of any kinds speculab reads (A = baseline, B = candidate) into report inputs."""
    kinds = (result_format(path_a, fmt), result_format(path_b, fmt))
    if kinds == ("speculab", "speculab"):
        return inputs_from_bench_dirs(path_a, path_b)
    a, b = (
        _bench_run(p) if k == "speculab" else vllm_bench.read(p) for p, k in zip((path_a, path_b), kinds, strict=True)
    )
    if problem := _pairing_problem(a, b):
        raise UserError(
            f"{path_a} and {path_b} cannot be paired per prompt: {problem}; comparing unpaired runs is not done yet "
            "(a later release): run both with the same prompts in the same order (vLLM: a fixed --seed, or "
            "--disable-shuffle with a custom dataset) and the same load"
        )
    return _imported_inputs(a, b)


def _bench_run(d: Path) -> ImportedRun:
    """A bench output directory as an imported run, for pairing with another tool's file."""
    manifest, summary = _bench_dir(d)
    records = tuple(read_records(d / REQUESTS))
    items, note = _items(manifest)
    measured = {r.index: r.prompt_tokens for r in records if not r.warmup}
    arm = _arm(BASELINE, d.name, manifest)
    return ImportedRun(
        path=d,
        tool="speculab bench",
        level=_level(manifest.get("load") or {}),
        records=records,
        input_lens=tuple(measured.get(i) for i in range(max(measured, default=-1) + 1)),
        items=items,
        acceptance=_acceptance(summary),
        info={"tool": "speculab bench", "versions": manifest.get("versions") or {}, **arm.server_info},
        notes=(note,) if note else (),
        started_utc=manifest.get("started_at") or "",
        interrupted=bool(summary.get("interrupted")) or not summary,
    )


def _pairing_problem(a: ImportedRun, b: ImportedRun) -> str | None:
    """The first reason the two runs are not the same prompts at the same load (None: they are, as far as known)."""
    if a.level.key != b.level.key:
        return f"load: {a.level.label} vs {b.level.label}"
    if len(a.input_lens) != len(b.input_lens):
        return f"{len(a.input_lens)} prompts vs {len(b.input_lens)}"
    if a.items and b.items:
        same = (x.context_sha256() == y.context_sha256() for x, y in zip(a.items, b.items, strict=False))
        if (i := next((i for i, ok in enumerate(same) if not ok), None)) is not None:
            return f"prompt {i}: the prompts differ"
    for i, (x, y) in enumerate(zip(a.input_lens, b.input_lens, strict=True)):
        if x is None or y is None:
            return f"prompt {i}: its length in tokens is unknown in {a.path.name if x is None else b.path.name}"
        if x != y:
            return f"prompt {i}: {x} vs {y} input tokens"
    return None


def _imported_inputs(a: ImportedRun, b: ImportedRun) -> ReportInputs:
    """Report inputs from two paired runs of any kinds (sampling is what a bench run recorded, if either is one)."""
    sampling = _sampling(a, b)
    setup = Setup(
        name=f"{a.path.name} vs {b.path.name}",
        workload_name=next((f"{r.path.name}'s workload" for r in (a, b) if r.items), "not in the vLLM files"),
        workload_source=f"the prompts of {a.path.name} and {b.path.name}, paired by position and length",
        api="completions",
        items=a.items or b.items,
        temperature=float(sampling.get("temperature") or 0.0) if sampling else None,
        top_p=float(sampling.get("top_p") or 1.0),
        seed=int(sampling.get("seed") or 0),
        max_tokens=int(sampling.get("max_tokens") or 0),
        levels=(a.level,),
        repeats=1,
        two_url_mode=True,
        started_utc=a.started_utc,
        finished_utc=b.started_utc,
    )
    arms = tuple(
        ArmInfo(
            name,
            f"{tag}: {r.path.name}",
            engine=str(r.info.get("detected_engine") or "other"),
            server_info=dict(r.info),
        )
        for name, tag, r in ((BASELINE, "A", a), (CANDIDATE, "B", b))
    )
    runs = tuple(
        RepeatRun(
            arm=name,
            level=a.level.key,
            repeat=1,
            records=r.records,
            acceptance=r.acceptance,
            order=i,
            interrupted=r.interrupted,
            notes=r.notes,
        )
        for i, (name, r) in enumerate(((BASELINE, a), (CANDIDATE, b)))
    )
    notes = [
        f"compare: two separate runs, A ({a.tool}) then B ({b.tool}); they were not interleaved, so drift between "
        "them (thermal, other tenants) is not cancelled; paired per prompt by position, their prompt lengths equal",
        vllm_bench.ITL_NOTE,
        *a.notes,
        *b.notes,
    ]
    if not sampling:
        notes.append("the vLLM files do not record sampling (temperature, max_tokens): outputs are compared as at a "
                     "temperature above 0, not for equivalence")  # fmt: skip
    change = ChangeCheck(CANDIDATE, (), None, "compare: two separate runs; speculab could not verify what differs")
    return ReportInputs(setup=setup, arms=arms, changes=(change,), runs=runs, notes=tuple(dict.fromkeys(notes)))


def _sampling(a: ImportedRun, b: ImportedRun) -> Mapping[str, Any]:
    """The sampling a speculab bench run recorded (its manifest), where one of the two is one; {} otherwise."""
    for r in (a, b):
        if r.tool == "speculab bench":
            return (_read_json(r.path / MANIFEST).get("sampling")) or {}
    return {}
