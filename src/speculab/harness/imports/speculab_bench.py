"""A `speculab bench` output directory -> an `ImportedRun`: speculab's own format, read like the other tools'.

The directory holds manifest.json (what the run asked: workload, sampling, load, endpoint, fit, server), requests.jsonl
(the records) and summary.json (written when the run finished: its acceptance). The workload is reloaded from the
manifest for the prompts and checks; where it cannot be, a note says so and the run holds none. The manifest is kept
on the run (`ImportedRun.manifest`) for compare, which pairs two bench runs only when they asked for the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.design import LevelSpec
from speculab.harness.imports.imported import ImportedRun
from speculab.harness.records import AcceptanceSummary, RequestSpec
from speculab.harness.results.ab_dir import INPUTS_FILE
from speculab.harness.results.requests_file import read_records
from speculab.harness.results.run_dir import MANIFEST, REQUESTS, SUMMARY
from speculab.harness.servers.adapters import detect_engine
from speculab.harness.workload.fit import pool_size, without

FORMAT = "speculab"
TOOL = "speculab bench"
# speculab's own runs need no words about how their fields were read, nor how to pair them (compare's own checks)
NAME = "speculab bench"
NOTE = ""
HOW = ""
# why a run without summary.json is partial (an A/B of two bench runs says it on the run)
UNFINISHED = "summary.json missing: the run did not finish"


def detect(path: Path) -> bool:
    """A directory holding a bench run's manifest.json or requests.jsonl (the registry asks the vLLM sweep's reader
    first; a directory of another tool's result is that result's)."""
    return path.is_dir() and any((path / name).is_file() for name in (MANIFEST, REQUESTS))


def is_ab_run(path: Path) -> bool:
    """Whether `path` is an A/B run's directory (`speculab run` or `compare` wrote it): read, it says so."""
    return (path / INPUTS_FILE).is_file()


def _read_json(path: Path) -> dict[str, Any]:
    """One of the directory's JSON files; one line naming it where it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path.parent}: no {path.name}; give the output directory of a `speculab bench` run") from None
    except ValueError as e:
        raise UserError(f"{path}: not JSON ({str(e)[:200]})") from None
    except RecursionError:
        raise UserError(f"{path}: not JSON this version of speculab wrote (nested too deeply)") from None


def _bench_files(d: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The directory's manifest and summary ({} where the run did not finish); one line where it is no bench run."""
    if not d.is_dir():
        raise UserError(f"{d}: no such directory; give the output directory of a `speculab bench` run")
    if is_ab_run(d):
        raise UserError(f"{d} is an A/B run already; re-render it with `speculab report {d}`")
    manifest = _read_json(d / MANIFEST)
    summary = _read_json(d / SUMMARY) if (d / SUMMARY).is_file() else {}
    if not (d / REQUESTS).is_file():
        raise UserError(f"{d}: no {REQUESTS}; give the output directory of a `speculab bench` run")
    return manifest, summary


def _level(load: Mapping[str, Any]) -> LevelSpec:
    """The manifest's `load` -> the offered load."""
    if load.get("mode") == "open":
        return LevelSpec("rate", float(load["rate_rps"]), ("operating",), load.get("arrival"), load.get("concurrency"))
    return LevelSpec("concurrency", float(load.get("concurrency") or 1), ("low", "operating"))


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


def _server_info(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The server the run measured, as its manifest recorded it, with the engine detected from that."""
    server = manifest.get("server") or {}
    version = server.get("version")
    cards = server.get("model_cards") or []
    engine = detect_engine(version if isinstance(version, Mapping) else None, {"data": cards}, ())
    return {"version": version, "models": cards, "detected_engine": engine}


def read(d: Path) -> ImportedRun:
    """A bench output directory as an imported run; one line naming what is missing where it is no bench run."""
    manifest, summary = _bench_files(d)
    records = tuple(read_records(d / REQUESTS))
    items, note = _items(manifest)
    measured = {r.index: r.prompt_tokens for r in records if not r.warmup}
    return ImportedRun(
        path=d,
        tool=TOOL,
        level=_level(manifest.get("load") or {}),
        records=records,
        input_lens=tuple(measured.get(i) for i in range(max(measured, default=-1) + 1)),
        items=items,
        acceptance=AcceptanceSummary.from_spec_decode_dict((summary.get("server") or {}).get("spec_decode")),
        info={"tool": TOOL, "versions": manifest.get("versions") or {}, **_server_info(manifest)},
        notes=(note,) if note else (),
        started_utc=manifest.get("started_at") or "",
        interrupted=bool(summary.get("interrupted")) or not summary,
        manifest=manifest,
        unfinished="" if summary else UNFINISHED,
        model=str((manifest.get("endpoint") or {}).get("model") or ""),
    )


def read_all(d: Path) -> tuple[ImportedRun, ...]:
    """The directory's one run."""
    return (read(d),)
