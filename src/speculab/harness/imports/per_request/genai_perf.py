"""GenAI-Perf's `profile_export.json` (perf_analyzer's `--profile-export-file`, which GenAI-Perf runs and reads) ->
`ImportedRun`s, one per experiment (docs/imports.md).

perf_analyzer writes `experiments` (each `experiment: {mode, value}`, the load: `concurrency` or `request_rate`, and
its `requests`), `version` (perf_analyzer's), `service_kind` and `endpoint`. Per request: `timestamp` (the send, ns),
`request_inputs` (`payload`: the request body as JSON text: the prompt or messages, `max_tokens`),
`response_timestamps` (ns, one per response received: for a stream, one per chunk) and `response_outputs` (each
response's raw text: an SSE event `data: {...}` for the OpenAI kind). Every chunk that carries generated text is a
chunk of the record at its own timestamp, so chunk gaps, stalls and TTFT come from the chunks; the output tokens are
the stream's `usage` where the server sent one (GenAI-Perf counts them with its tokenizer, which the file does not
keep). GenAI-Perf's own aggregates (`profile_export_genai_perf.json`) are not read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, error_category, obj
from speculab.harness.imports.imported import ImportedRun, file_record, validity_notes
from speculab.harness.imports.per_request.request_body import chunk_text, first_choice, request_spec, usage_tokens
from speculab.harness.records import ChunkEvent, ErrorInfo, RequestRecord
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "genai-perf"
TOOL = "genai-perf"
NAME = "GenAI-Perf"
READ_AS = "a GenAI-Perf / perf_analyzer profile export"
HOW = (
    "GenAI-Perf: the same --input-file (or --random-seed and synthetic lengths), at the same --concurrency or "
    "--request-rate"
)
NOTE = (
    "GenAI-Perf files: every response's own timestamp is a chunk (chunk gaps and stalls are the chunks'), text from "
    "each SSE event; output tokens from the stream's usage where the server sent it, else the payload's max_tokens "
    "where the stream ended for its length, else unknown (GenAI-Perf counts them with its tokenizer, not kept), and "
    "TPOT with them; per-chunk token counts are unknown; the "
    "sampling parameters are each request's payload's, not compared; GenAI-Perf's aggregates are not read"
)
_NS = 1e-9
_MODES = {"concurrency": "concurrency", "request_rate": "rate"}


def detect(path: Path) -> bool:
    """perf_analyzer's export: JSON whose start names `experiments`, an `experiment` and its requests'
    `request_inputs` or `response_timestamps` (perf_analyzer writes `experiments` first)."""
    try:
        with path.open("rb") as f:
            head = f.read(65536).decode("utf-8", "replace")
    except OSError:
        return False
    marks = ('"request_inputs"', '"response_timestamps"', '"response_outputs"')
    return head.lstrip().startswith("{") and '"experiments"' in head and any(m in head for m in marks)


def _events(text: str) -> tuple[list[Any], str]:
    """The JSON events of the raw SSE text received so far (`data: {...}` lines; `[DONE]` and other fields none),
    and the rest: an event cut short, whose end arrives with the next response (perf_analyzer keeps what each read
    returned, which may split an event)."""
    out = []
    lines = text.splitlines(keepends=True)
    for n, line in enumerate(lines):
        data = line.strip().removeprefix("data:").strip() if line.strip().startswith("data:") else ""
        if not data or data == "[DONE]":
            continue
        try:
            out.append(json.loads(data))
        except ValueError:
            if n == len(lines) - 1:
                return out, line  # the last line cut short: kept for the next response
    return out, ""


def _responses(ff: FileFields, r: Mapping[str, Any], at: str, openai: bool, base: int) -> list[tuple[float, str, Any]]:
    """Each response of a request: its time (s after `base`, ns), the text it carried, and the stream's usage it
    named (None), or {"error": ...} where the server sent an error event."""
    times = r.get("response_timestamps")
    outputs = r.get("response_outputs") or []
    for name, v in (("response_timestamps", times), ("response_outputs", outputs)):
        if not isinstance(v, list):
            ff.fail(f"no `{at}.{name}`" if v is None else f"`{at}.{name}` is not a list")
    out = []
    pending = ""  # a splintered SSE event: perf_analyzer received it in parts
    for j, t in enumerate(times):
        ts = (_ns(ff, t, f"{at}.response_timestamps[{j}]") - base) * _NS
        raw = obj(outputs[j]).get("response") if j < len(outputs) else None
        if not openai:  # Triton's kinds: each response is one output of named tensors
            text = obj(outputs[j]).get("text_output") if j < len(outputs) else None
            out.append((ts, text if isinstance(text, str) else "", None))
            continue
        events, pending = _events(pending + (raw if isinstance(raw, str) else ""))
        usage = next((e.get("usage") for e in reversed(events) if isinstance(obj(e).get("usage"), dict)), None)
        errors = [e["error"] for e in events if isinstance(obj(e).get("error"), (dict, str))]
        if errors:
            out.append((ts, "", {"error": errors[0]}))
        out.append((ts, "".join(chunk_text(e) for e in events), usage))
    return out


def _ns(ff: FileFields, v: Any, field: str) -> int:
    """A timestamp in integer nanoseconds since the epoch (kept whole: a float of seconds since 1970 loses the
    sub-microsecond part)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        ff.number(v, field)  # a float or a string: the one line naming the field
        ff.fail(f"`{field}` is {v!r}, not a timestamp in nanoseconds")
    return v


def _record(ff: FileFields, r: Mapping[str, Any], index: int, openai: bool, base: int) -> RequestRecord:
    """One request: sent at `timestamp`, a chunk at each response carrying text, done at the last response; times
    in seconds after `base` (the experiment's first send, ns)."""
    at = r["_at"]
    sent = (r["timestamp"] - base) * _NS
    responses = _responses(ff, r, at, openai, base)
    failed = next((u["error"] for _, _, u in responses if isinstance(u, dict) and "error" in u), None)
    usage = next((u for _, _, u in reversed(responses) if isinstance(u, dict) and "error" not in u), None)
    prompt_tokens = usage_tokens(usage, "prompt_tokens")
    if not responses or failed is not None:
        end = responses[-1][0] if responses else sent
        said = json.dumps(failed)[:300] if failed is not None else "no response recorded"
        return file_record(
            index, sent, prompt_tokens, end, error=ErrorInfo(error_category(said, None), f"GenAI-Perf: {said}")
        )
    chunks = [(t, text) for t, text, _ in responses if text]
    record = file_record(
        index,
        sent,
        prompt_tokens,
        responses[-1][0],
        chunk_times=[t for t, _ in chunks],
        output_text="".join(text for _, text in chunks),
        completion_tokens=_output_tokens(r, usage, openai),
    )
    # the chunks' own texts (file_record keeps times only): what each chunk carried, its tokens unknown
    return replace(record, chunks=tuple(ChunkEvent(t, text, None) for t, text in chunks))


def _output_tokens(r: Mapping[str, Any], usage: Any, openai: bool) -> int | None:
    """The request's output tokens: the stream's usage; else, where the stream ended for its length
    (`finish_reason: length`), the `max_tokens` its payload asked (an OpenAI server stops there, and only there, for
    that reason); else unknown (GenAI-Perf counts them with its tokenizer, which the file does not keep)."""
    if (stated := usage_tokens(usage, "completion_tokens")) is not None or not openai:
        return stated
    raw = "".join(str(obj(o).get("response") or "") for o in r.get("response_outputs") or [])
    ends = [obj(first_choice(e)).get("finish_reason") for e in _events(raw)[0]]
    if next((x for x in reversed(ends) if x), None) != "length":
        return None
    spec = request_spec(0, obj(r.get("request_inputs")).get("payload"))
    return spec.max_tokens if spec is not None else None


def _level(ff: FileFields, e: Mapping[str, Any], i: int) -> LevelSpec:
    """The experiment's load: `mode` concurrency (closed loop) or request_rate (its arrivals not stated)."""
    x = ff.mapping(e.get("experiment"), f"experiments[{i}].experiment")
    mode = x.get("mode")
    if mode not in _MODES:
        ff.fail(f"`experiments[{i}].experiment.mode` is {mode!r}, neither concurrency nor request_rate; not read")
    value = ff.positive(x.get("value"), f"experiments[{i}].experiment.value")
    if mode == "concurrency":
        return LevelSpec("concurrency", value, ("low", "operating"))
    return LevelSpec("rate", value, ("operating",))


def _experiments(ff: FileFields) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    d = ff.mapping(ff.json(ff.text()), "")
    listed = d.get("experiments")
    if not isinstance(listed, list) or not listed:
        ff.fail("no `experiments`" if listed is None else "`experiments` is not a list of experiments")
    return d, [ff.mapping(e, f"experiments[{i}]") for i, e in enumerate(listed)]


def _run(ff: FileFields, d: Mapping[str, Any], e: Mapping[str, Any], i: int) -> ImportedRun:
    path = ff.path
    listed = e.get("requests")
    if not isinstance(listed, list) or not listed:
        ff.fail(f"`experiments[{i}].requests` holds no requests")
    level = _level(ff, e, i)
    reqs = [
        ff.mapping(r, f"experiments[{i}].requests[{j}]") | {"_at": f"experiments[{i}].requests[{j}]"}
        for j, r in enumerate(listed)
    ]
    for r in reqs:
        _ns(ff, r.get("timestamp"), f"{r['_at']}.timestamp")
    reqs.sort(key=lambda r: r["timestamp"])  # in the order sent (perf_analyzer lists them as they completed)
    openai = d.get("service_kind") == "openai"
    base = reqs[0]["timestamp"]
    records = tuple(_record(ff, r, k, openai, base) for k, r in enumerate(reqs))
    specs = [request_spec(k, obj(r.get("request_inputs")).get("payload")) for k, r in enumerate(reqs)]
    version = d.get("version") if isinstance(d.get("version"), str) else None
    info = {"tool": TOOL, "file": str(path), "version": version, "experiment": i}
    said = [["service kind", d.get("service_kind")], ["endpoint", d.get("endpoint")]]
    said = [[k, v] for k, v in said if isinstance(v, str) and v]
    read = {"file": _label(path), "tool": FORMAT, "what": "a GenAI-Perf profile export", "named": "perf_analyzer"}
    read |= {"version": version, "unstated": "perf_analyzer version not stated", "at": ["experiment", i], "said": said}
    model = next((str(obj(json.loads(p)).get("model") or "") for p in _payloads(reqs[:1])), "")
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=level,
        records=records,
        items=tuple(s for s in specs if s is not None) if all(s is not None for s in specs) else (),
        info=info | {"endpoint": d.get("endpoint")},
        notes=(ReportWarning(Kind.FILE_READ, fields=read), *_validity(reqs)),
        started_utc=_date(base),
        label=_label(path),
        model=model,
    )


def _date(ns: int) -> str:
    """The first send's date (perf_analyzer's timestamps are the system clock's, since the epoch); "" where the
    number is no such date (a clock since boot)."""
    return datetime.fromtimestamp(ns * _NS, timezone.utc).isoformat(timespec="seconds") if ns > 10**18 else ""


def _validity(reqs: list[dict[str, Any]]) -> tuple[ReportWarning, ...]:
    """`ignore_eos` in every payload (`--extra-inputs ignore_eos:true`): acceptance not the user's traffic's. The
    export does not say whether the prompts were synthetic (GenAI-Perf's default), so that is not guessed."""
    bodies = [obj(json.loads(p)) for p in _payloads(reqs)]
    ignore = bool(bodies) and len(bodies) == len(reqs) and all(b.get("ignore_eos") is True for b in bodies)
    return validity_notes(None, ignore, (), len(reqs))


def _payloads(reqs: list[dict[str, Any]]) -> list[str]:
    """The requests' payloads that are JSON objects' text (the model is named there)."""
    out = []
    for r in reqs:
        p = obj(r.get("request_inputs")).get("payload")
        try:
            if isinstance(p, str) and isinstance(json.loads(p), dict):
                out.append(p)
        except ValueError:
            continue
    return out


def _label(path: Path) -> str:
    """GenAI-Perf names every run's file profile_export.json: its artifact directory names the run."""
    return path.parent.name if path.name == "profile_export.json" and path.parent.name else path.name


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """Every experiment of the file, one load each, in the file's order; a file it cannot read is one line naming
    it, the format and the field."""
    ff = FileFields(path, READ_AS)
    d, experiments = _experiments(ff)
    return tuple(_run(ff, d, e, i) for i, e in enumerate(experiments))
