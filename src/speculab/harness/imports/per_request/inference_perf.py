"""inference-perf's per-request lifecycle report (`per_request_lifecycle_metrics.json`, written with
`report.request_lifecycle.per_request: true`) -> `ImportedRun`s, one per load stage (docs/imports.md).

Per request inference-perf writes `start_time` and `end_time` (seconds, its client's perf_counter), `request` (the
body sent, JSON text: the prompt or messages and `max_tokens`), `response`, `info` and `error` (`error_type`,
`error_msg`). Of `info`: `input_tokens`; `response_metrics` (0.6 and later; `response_info` in 0.5): `chunk_times`
(one per chunk that carried text), `response_chunks` (those chunks, 1:1), `output_tokens` (its tokenizer's count)
and `server_usage` (the server's `usage`); the layouts before keep `output_tokens` and `output_token_times` (a time
per message received, not only those carrying text: read as the first and last token alone) in `info` itself. The
entries do not say their stage: the stages ran one after another, so the requests, in the order sent, are cut by
the counts of the stage reports beside the file (`stage_N_lifecycle_metrics.json`, which also give each stage's
load); a file without them is read as one stage where its `config.yaml` names one. The reader also claims the
report directory and a stage report with the per-request report beside it (that stage's requests).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from itertools import groupby
from pathlib import Path
from typing import Any

from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, error_category, obj
from speculab.harness.imports.imported import ImportedRun, file_record, validity_notes
from speculab.harness.imports.per_request import inference_perf_stages as stages
from speculab.harness.imports.per_request.request_body import chunk_text, request_spec, usage_tokens
from speculab.harness.imports.summaries.summary import count
from speculab.harness.records import ChunkEvent, ErrorInfo, RequestRecord
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "inference-perf"
TOOL = stages.TOOL
NAME = "inference-perf"
READ_AS = "an inference-perf per-request lifecycle report"
HOW = "inference-perf: the same data (a fixed dataset, or the same seed), with the same load stages"
NOTE = (
    "inference-perf files: each chunk that carried text is a chunk at its `chunk_times` time (the layouts before "
    "0.5 keep a time per message received: the first and last alone), with its text where `response_chunks` are "
    "kept; output tokens from the server's usage where kept, else inference-perf's tokenizer count; per-chunk token "
    "counts are unknown; each stage is a load, its requests cut from the file by the stage reports' counts; the "
    "sampling parameters are each request's body's, not compared; inference-perf's aggregates are not read"
)


def _head(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return f.read(512).decode("utf-8", "replace")
    except OSError:
        return ""


# the per-request report's own marks: a JSON list whose first entry opens with `start_time` then `end_time` (its
# `request`, the whole body sent, may push `info` far down the file)
_OPENING = re.compile(r'\[\s*\{\s*"start_time"\s*:\s*[-+\d.eE]+\s*,\s*"end_time"\s*:')


def _is_per_request(path: Path) -> bool:
    """inference-perf's per-request report, by its opening (`_OPENING`)."""
    return path.is_file() and _OPENING.match(_head(path).lstrip()) is not None


def _report_of(path: Path) -> Path | None:
    """The per-request report `path` names: itself, the one in a report directory, or the one beside a stage
    report; None where there is none."""
    if path.is_dir():
        f = path / stages.PER_REQUEST
        return f if _is_per_request(f) else None
    if stages.stage_of(path) is not None and (beside := path.with_name(stages.PER_REQUEST)).is_file():
        return beside if _is_per_request(beside) else None
    return path if _is_per_request(path) else None


def detect(path: Path) -> bool:
    """inference-perf's per-request report, its report directory, or a stage report beside it."""
    return _report_of(path) is not None


def _response(info: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """What the entry keeps of its response, and its path: `info.response_metrics` (0.6 and later),
    `info.response_info` (0.5); ({}, "info") in the layouts before, which keep it in `info` itself."""
    for key in ("response_metrics", "response_info"):
        if isinstance(info.get(key), dict):
            return info[key], f"info.{key}"
    return {}, "info"


def _times(ff: FileFields, e: Mapping[str, Any], at: str) -> tuple[list[float], list[str], bool]:
    """The times of the chunks that carried text, their texts where kept (else []), and whether those are every
    chunk (False: the layouts before 0.5 kept a time per SSE message received, [DONE] and role chunks among them,
    and up to 0.2 per line, blank ones too: only the first and the last are read)."""
    info = obj(e.get("info"))
    rm, where = _response(info)
    key = "chunk_times" if "chunk_times" in rm else "output_token_times"
    raw = (rm if rm else info).get(key) or []
    if not isinstance(raw, list):
        ff.fail(f"`{at}.{where}.{key}` is not a list")
    times = [ff.number(t, f"{at}.{where}.{key}[{j}]") for j, t in enumerate(raw)]
    if not rm:
        return times[:1] + times[1:][-1:], [], False
    chunks = rm.get("response_chunks")
    if isinstance(chunks, list) and len(chunks) == len(times) and key == "chunk_times":
        texts = []
        for c in chunks:
            try:
                texts.append(chunk_text(json.loads(c)) if isinstance(c, str) else chunk_text(c))
            except ValueError:
                texts.append("")
        return times, texts, True
    # output_token_times of a tokenizer-corrected run repeat a chunk's time once per token: one chunk each
    return [t for t, _ in groupby(times)], [], True


def _error(err: Mapping[str, Any]) -> ErrorInfo:
    """inference-perf's `error`: `HTTP Error <code>` where the server answered, else the client's exception."""
    kind, msg = str(err.get("error_type") or ""), str(err.get("error_msg") or "")
    answered = kind.startswith("HTTP Error")
    code = kind.rsplit(" ", 1)[-1] if answered else ""
    status = int(code) if code.isdigit() else None
    return ErrorInfo(error_category(f"{kind} {msg}", answered), f"inference-perf: {kind}: {msg}"[:300], status)


def _record(ff: FileFields, e: Mapping[str, Any], index: int) -> RequestRecord:
    """One request: sent at `start_time`, a chunk at each time kept, done at `end_time`."""
    at = e["_at"]
    sent = ff.number(e.get("start_time"), f"{at}.start_time")
    end = ff.number(e.get("end_time"), f"{at}.end_time")
    info = obj(e.get("info"))
    rm, where = _response(info)
    usage = rm.get("server_usage")
    stated_in = info.get("input_tokens", obj(obj(info.get("request_metrics")).get("text")).get("input_tokens"))
    prompt_tokens = usage_tokens(usage, "prompt_tokens")
    prompt_tokens = prompt_tokens if prompt_tokens is not None else ff.count(stated_in, f"{at}.info.input_tokens")
    if isinstance(e.get("error"), dict):
        return file_record(index, sent, prompt_tokens, end, error=_error(e["error"]))
    times, texts, every = _times(ff, e, at)
    out = usage_tokens(usage, "completion_tokens")
    stated_out = (rm if rm else info).get("output_tokens")
    out = out if out is not None else ff.count(stated_out, f"{at}.{where}.output_tokens")
    text = "".join(texts) or (e["response"] if isinstance(e.get("response"), str) else "")
    record = file_record(
        index, sent, prompt_tokens, end, chunk_times=times, output_text=text, completion_tokens=out, all_chunks=every
    )
    if texts:  # each chunk's own text (file_record keeps times only); its tokens unknown
        record = replace(record, chunks=tuple(ChunkEvent(t, x, None) for t, x in zip(times, texts, strict=True)))
    return record


def _entries(ff: FileFields) -> list[dict[str, Any]]:
    """The file's requests in the order sent."""
    listed = ff.json(ff.text())
    if not isinstance(listed, list):
        ff.fail("it is not a list of requests")
    if not listed:
        ff.fail("it holds no requests")
    out = [ff.mapping(e, f"[{i}]") | {"_at": f"[{i}]"} for i, e in enumerate(listed)]
    for e in out:
        ff.number(e.get("start_time"), f"{e['_at']}.start_time")
    return sorted(out, key=lambda e: e["start_time"])


def _stages(ff: FileFields, n: int) -> list[tuple[int, LevelSpec, int]]:
    """Each stage's number, load and count of requests: from the stage reports beside the file, else the
    config's one stage; their counts must add up to the file's requests."""
    cfg = stages.config(ff.path.parent)
    found = []
    for f in stages.stage_files(ff.path.parent):
        sf = FileFields(f, stages.READ_AS)
        d = sf.mapping(sf.json(sf.text()), "")
        load = sf.mapping(d.get("load_summary"), "load_summary")
        stage = stages.stage_of(f) or 0
        size = count(load.get("count"))
        if size is None:
            sf.fail("no `load_summary.count` (the stage's requests)")
        found.append((stage, stages.stage_level(sf, load, cfg, stage), size))
    if not found:
        listed = obj(cfg.get("load")).get("stages")
        if not isinstance(listed, list) or len(listed) != 1:
            ff.fail(
                "no stage_N_lifecycle_metrics.json beside it (nor a config.yaml of one stage): the requests do not "
                "say their stage; keep the stage reports inference-perf wrote beside it"
            )
        return [(0, stages.stage_level(ff, {}, cfg, 0), n)]
    if (total := sum(c for _, _, c in found)) != n:
        ff.fail(f"it holds {n} requests, its stage reports count {total}: not the same run's reports")
    return found


def _run(ff: FileFields, entries: list[dict[str, Any]], stage: int, level: LevelSpec) -> ImportedRun:
    path = ff.path
    records = tuple(_record(ff, e, k) for k, e in enumerate(entries))
    specs = [request_spec(k, e.get("request")) for k, e in enumerate(entries)]
    cfg = stages.config(path.parent)
    model = obj(cfg.get("server")).get("model_name")
    model = model if isinstance(model, str) else ""
    if not model:
        model = next((str(obj(json.loads(e["request"])).get("model") or "") for e in entries[:1] if _json(e)), "")
    label = path.parent.name or path.name
    info = {"tool": TOOL, "file": str(path), "stage": stage}
    read = {"file": label, "tool": FORMAT, "what": "an inference-perf per-request report", "named": NAME}
    read |= {"version": None, "unstated": "inference-perf states no version", "at": ["stage", stage]}
    read |= {"said": [["", level.label]]}
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=level,
        records=records,
        items=tuple(s for s in specs if s is not None) if all(s is not None for s in specs) else (),
        info=info,
        notes=(ReportWarning(Kind.FILE_READ, fields=read), *_validity(cfg, entries)),
        label=label,
        model=model,
    )


# inference-perf's data generators that make prompts up (its `data.type`): acceptance on them is not the user's
SYNTHETIC_DATA = ("mock", "random", "synthetic", "shared_prefix")


def _validity(cfg: Mapping[str, Any], entries: list[dict[str, Any]]) -> tuple[ReportWarning, ...]:
    """What the config says that makes acceptance not the user's traffic's: made-up prompts, `ignore_eos` (the
    config's `server.ignore_eos`, else every request body's)."""
    ignore = obj(cfg.get("server")).get("ignore_eos")
    if ignore is None:
        bodies = [obj(json.loads(e["request"])) for e in entries if _json(e)]
        ignore = bool(bodies) and all(b.get("ignore_eos") is True for b in bodies)
    return validity_notes(obj(cfg.get("data")).get("type"), ignore, SYNTHETIC_DATA, len(entries))


def _json(e: Mapping[str, Any]) -> bool:
    try:
        return isinstance(e.get("request"), str) and isinstance(json.loads(e["request"]), dict)
    except ValueError:
        return False


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """Every stage's requests, one run at each stage's load (only the stage a stage report names, where `path` is
    one); a file it cannot read is one line naming it, the format and the field."""
    report = _report_of(path)
    ff = FileFields(report or path, READ_AS)
    if report is None:
        ff.fail(f"no {stages.PER_REQUEST} (written with report.request_lifecycle.per_request: true)")
    entries = _entries(ff)
    runs, at = [], 0
    for stage, level, size in _stages(ff, len(entries)):
        runs.append(_run(ff, entries[at : at + size], stage, level))
        at += size
    only = stages.stage_of(path)
    if only is not None:
        return tuple(r for r in runs if r.info.get("stage") == only)
    return tuple(runs)
