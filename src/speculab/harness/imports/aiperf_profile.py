"""AIPerf `profile_export.jsonl` (one JSON record per request) -> an `ImportedRun` (docs/imports.md).

Per record AIPerf writes `metadata` (`x_request_id`, `conversation_id`, `turn_index`, `benchmark_phase`,
`request_start_ns`, `request_end_ns`, ...), `metrics` (each `{value, unit}`: `time_to_first_token`,
`inter_chunk_latency` (a list: the gaps between streamed chunks), `request_latency`, `input_sequence_length`,
`output_sequence_length`, ...) and `error` where the request failed. Warmup-phase records are left out. Each value is
converted by its own `unit`; AIPerf's aggregates are not read. The sibling `profile_export_aiperf.json`, where it is
beside the file, gives the version and the load. Where the server reported per-request speculation (vLLM's
`metrics.speculative_decoding`, `--per-request-spec-decode-metrics`), AIPerf's per-record `spec_decode_steps`,
`spec_decode_draft_tokens` and `spec_decode_accepted_draft_tokens` become each request's acceptance, and their sums
the run's.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

from speculab.harness.analysis.acceptance import acceptance_length, acceptance_rate
from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, error_category, obj
from speculab.harness.imports.imported import ImportedRun, file_record
from speculab.harness.imports.older import aiperf_early
from speculab.harness.records import AcceptanceSummary, ErrorCategory, ErrorInfo, RequestRecord
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "aiperf"
TOOL = "aiperf"
NAME = "AIPerf"
READ_AS = "an AIPerf profile_export.jsonl"
SIBLING = "profile_export_aiperf.json"
HOW = "AIPerf: the same --input-file or --random-seed, in order, at the same --concurrency or --request-rate"
NOTE = (
    "AIPerf files: `inter_chunk_latency` are the gaps between streamed chunks (a chunk may carry several tokens), "
    "read as chunk gaps; per-token ITL and tokens per chunk are unknown; TPOT is speculab's (E2E - TTFT) / "
    "(output_sequence_length - 1) per request, not AIPerf's `inter_token_latency`; warmup records are left out; "
    "the records hold no output text, so correctness (outputs, checks) is not compared"
)
_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
_FIX = "write it with `aiperf profile ... --streaming` (records export, the default)"


def detect(path: Path) -> bool:
    """Whether `path` looks like AIPerf's per-record export: JSON lines opening with `metadata` and `metrics`."""
    try:
        with path.open("rb") as f:
            head = f.read(4096).decode("utf-8", "replace").lstrip()
    except OSError:
        return False
    named = ("request_start_ns", "benchmark_phase", "timestamp_ns", "credit_phase")  # the last two: the early layout
    return head.startswith("{") and '"metadata"' in head and any(k in head for k in named)


def _seconds(ff: FileFields, metrics: Mapping[str, Any], name: str, i: int) -> float | None:
    """`metrics.NAME` in seconds, by its own `unit`; None where the record has no such metric."""
    m = metrics.get(name)
    if m is None:
        return None
    if not isinstance(m, dict) or "value" not in m:
        ff.fail(f"line {i}: `metrics.{name}` is not {{value, unit}}")
    unit = m.get("unit")
    if not isinstance(unit, str) or unit not in _SECONDS:
        ff.fail(f"line {i}: `metrics.{name}.unit` is {unit!r}, not a unit of time speculab knows")
    v = m["value"]
    if isinstance(v, list):
        ff.fail(f"line {i}: `metrics.{name}` is a list, not one time")
    return ff.number(v, f"metrics.{name}.value", f"line {i}: ") * _SECONDS[unit]


def _gaps(ff: FileFields, metrics: Mapping[str, Any], i: int) -> list[float] | None:
    """`metrics.inter_chunk_latency` (a list by its unit) in seconds; None where absent (one chunk)."""
    m = metrics.get("inter_chunk_latency")
    if m is None:
        return None
    unit = m.get("unit") if isinstance(m, dict) else None
    values = m.get("value") if isinstance(m, dict) else None
    if not isinstance(unit, str) or unit not in _SECONDS or not isinstance(values, list):
        ff.fail(f"line {i}: `metrics.inter_chunk_latency` is not {{value: [gaps], unit}}")
    at = f"line {i}: "
    return [ff.number(v, f"metrics.inter_chunk_latency.value[{j}]", at) * _SECONDS[unit] for j, v in enumerate(values)]


def _tokens(ff: FileFields, metrics: Mapping[str, Any], name: str, at: str) -> int | None:
    m = metrics.get(name)
    return ff.count(m.get("value") if isinstance(m, dict) else m, f"metrics.{name}", at)


SPEC_SOURCE = "aiperf spec_decode_* (the server's per-request metrics.speculative_decoding)"


def _speculation(ff: FileFields, metrics: Mapping[str, Any], at: str) -> dict[str, Any] | None:
    """A request's drafts, drafted and accepted tokens from AIPerf's per-record spec_decode_* (None: not reported)."""
    if "spec_decode_steps" not in metrics:
        return None
    return {
        "drafts": _tokens(ff, metrics, "spec_decode_steps", at),
        "draft_tokens": _tokens(ff, metrics, "spec_decode_draft_tokens", at),
        "accepted_tokens": _tokens(ff, metrics, "spec_decode_accepted_draft_tokens", at),
        "source": SPEC_SOURCE,
    }


def _acceptance(records: tuple[RequestRecord, ...]) -> AcceptanceSummary | None:
    """The run's acceptance: the per-request counts summed, by vLLM's definitions (`analysis.acceptance`); None when
    no request reported any."""
    spec = [r.speculation for r in records if r.speculation and r.speculation.get("source") == SPEC_SOURCE]
    if not spec:
        return None

    def total(key: str) -> int:
        return sum(int(s.get(key) or 0) for s in spec)

    drafts, drafted, accepted = total("drafts"), total("draft_tokens"), total("accepted_tokens")
    return AcceptanceSummary(
        source=f"AIPerf file: per-record spec_decode_* summed over {len(spec)} requests (the server's per-request "
        "metrics.speculative_decoding)",
        active=drafts > 0,
        drafts=drafts,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=acceptance_rate(accepted, drafted),
        acceptance_length=acceptance_length(accepted, drafts),
    )


def _error(e: Any) -> ErrorInfo:
    """AIPerf's `error` ({code, type, message}): the category from its code and words."""
    d = e if isinstance(e, dict) else {"message": str(e)}
    text = " ".join(str(d.get(k) or "") for k in ("type", "message")).strip()
    # a code is the server's HTTP status; without one the error is an exception in AIPerf's client
    category = error_category(text, d.get("code") is not None)
    code = f"{d['code']} " if d.get("code") is not None else ""
    return ErrorInfo(category, f"AIPerf: {code}{text[:300]}", d.get("code") if isinstance(d.get("code"), int) else None)


def _record(ff: FileFields, raw: Mapping[str, Any], index: int) -> RequestRecord:
    """A record of the file (`_line`: its line) as request `index`: sent at `request_start_ns`, the first chunk at
    + TTFT, one chunk per `inter_chunk_latency` gap, done at `request_end_ns`."""
    i = raw["_line"]
    meta = ff.mapping(raw.get("metadata"), "metadata", f"line {i}: ")
    metrics = raw.get("metrics") or {}
    if not isinstance(metrics, dict):
        ff.fail(f"line {i}: `metrics` is not an object")
    at = f"line {i}: "
    sent = ff.number(meta.get("request_start_ns"), "metadata.request_start_ns", at) * 1e-9
    end_ns = meta.get("request_end_ns")
    end = ff.number(end_ns, "metadata.request_end_ns", at) * 1e-9 if end_ns is not None else None
    prompt_tokens = _tokens(ff, metrics, "input_sequence_length", at)
    if aiperf_early.cancelled(raw):  # AIPerf's own cancelling, not the server's failure: not counted as one
        said = str(obj(raw.get("error")).get("message") or "was_cancelled")[:300]
        cut = ErrorInfo(ErrorCategory.CANCELLED, f"AIPerf: cancelled ({said})")
        return file_record(index, sent, prompt_tokens, end if end is not None else sent, error=cut)
    if raw.get("error"):
        return file_record(index, sent, prompt_tokens, end if end is not None else sent, error=_error(raw["error"]))
    ttft = _seconds(ff, metrics, "time_to_first_token", i)
    latency = _seconds(ff, metrics, "request_latency", i)
    if ttft is None:
        ff.fail(f"line {i}: no `metrics.time_to_first_token`; {_FIX}")
    if latency is None:
        ff.fail(f"line {i}: no `metrics.request_latency`")
    gaps = _gaps(ff, metrics, i) or []
    times = tuple(accumulate(gaps, initial=sent + ttft))
    text = raw.get("output_text") or raw.get("output") or ""
    return file_record(
        index,
        sent,
        prompt_tokens,
        end if end is not None else sent + latency,
        chunk_times=times,
        output_text=text if isinstance(text, str) else "",
        completion_tokens=_tokens(ff, metrics, "output_sequence_length", at),
        speculation=_speculation(ff, metrics, at),
    )


def _lines(ff: FileFields) -> list[dict[str, Any]]:
    """The file's records, one JSON object a line; a line cut short names its number."""
    out = []
    for n, line in enumerate(ff.text().splitlines(), 1):
        if line.strip():
            rec = ff.json(line, f"line {n}: ")
            out.append(aiperf_early.upgrade_record(ff.mapping(rec, "", f"line {n}: ")) | {"_line": n})
    if not out:
        ff.fail("it holds no records")
    return out


def _profiling(ff: FileFields, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The profiling records in the order their requests were sent (AIPerf writes them as they complete)."""
    kept = [r for r in rows if obj(r.get("metadata")).get("benchmark_phase", "profiling") != "warmup"]
    if not kept:
        ff.fail("it holds only warmup records")
    for r in kept:
        at = f"line {r['_line']}: "
        ff.number(
            ff.mapping(r.get("metadata"), "metadata", at).get("request_start_ns"), "metadata.request_start_ns", at
        )
    return sorted(kept, key=lambda r: r["metadata"]["request_start_ns"])


def _summary(path: Path) -> dict[str, Any]:
    """The sibling profile_export_aiperf.json ({} where absent or unreadable: it only adds the version and load)."""
    f = path.with_name(SIBLING)
    try:
        d = FileFields(f, f"AIPerf's {SIBLING}").json(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}
    return d if isinstance(d, dict) else {}


def _level(ff: FileFields, summary: Mapping[str, Any]) -> LevelSpec:
    """The profiling phase's load from the summary's `input_config.phases` (a concurrency, or a request rate), or,
    in releases before phases (0.8 and earlier), from `input_config.loadgen`."""
    phases = obj(summary.get("input_config")).get("phases")
    if not summary:
        ff.fail(f"no {SIBLING} beside it (AIPerf writes the load there: --concurrency or --request-rate)")
    sf = FileFields(ff.path.with_name(SIBLING), f"AIPerf's {SIBLING}")  # its surprises name it, not the export
    if phases is None and "loadgen" in obj(summary.get("input_config")):
        return _loadgen(sf, obj(obj(summary.get("input_config")).get("loadgen")))
    listed = phases if isinstance(phases, list) else []
    at = next((j for j, p in enumerate(listed) if isinstance(p, dict) and p.get("kind") == "profiling"), None)
    if at is None:
        sf.fail("no profiling phase in `input_config.phases`")
    phase = listed[at]
    cap = phase.get("concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    kind = phase.get("type")
    if kind in ("poisson", "gamma", "constant"):  # AIPerf's rate phases (--request-rate, its arrival pattern)
        rate = sf.positive(phase.get("rate"), f"input_config.phases[{at}].rate")
        return LevelSpec("rate", rate, ("operating",), kind, cap)
    if kind != "concurrency" or cap is None:
        sf.fail(f"`input_config.phases[{at}].type` is {kind!r}, neither a concurrency nor a request rate; not read yet")
    return LevelSpec("concurrency", cap, ("low", "operating"))


# `input_config.loadgen.request_rate_mode` (AIPerf's RequestRateMode) -> the arrival of a rate load; its
# "concurrency_burst" sends as fast as `concurrency` allows (a concurrency load)
_RATE_MODES = {"poisson": "poisson", "constant": "constant"}


def _loadgen(sf: FileFields, lg: Mapping[str, Any]) -> LevelSpec:
    """The load of a release that kept it in `input_config.loadgen` (0.8 and earlier): `request_rate` with its
    `request_rate_mode` (and `concurrency` as its cap), else `concurrency`."""
    cap = lg.get("concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    mode = str(lg.get("request_rate_mode") or "poisson").lower()
    if lg.get("request_rate") is not None and mode in _RATE_MODES:
        rate = sf.positive(lg.get("request_rate"), "input_config.loadgen.request_rate")
        return LevelSpec("rate", rate, ("operating",), _RATE_MODES[mode], cap)
    if cap is None:
        sf.fail(f"`input_config.loadgen.concurrency` is {lg.get('concurrency')!r}, and no request rate: no load")
    return LevelSpec("concurrency", cap, ("low", "operating"))


def _info(path: Path, summary: Mapping[str, Any]) -> dict[str, Any]:
    """Where the numbers came from: the version and run the summary states (none without it)."""
    cfg = obj(summary.get("input_config"))
    items = obj(cfg.get("models")).get("items")
    models = (
        [str(m.get("name")) for m in items if isinstance(m, dict) and m.get("name")] if isinstance(items, list) else []
    )
    info: dict[str, Any] = {"tool": TOOL, "file": str(path), "version": summary.get("aiperf_version")}
    said = {
        "date": summary.get("start_time"),
        "benchmark_id": summary.get("benchmark_id"),
        "endpoint": obj(cfg.get("endpoint")).get("type"),
        "model": ", ".join(m for m in models if m) or None,
        "cli_command": obj(summary.get("run_info")).get("cli_command"),
    }
    return info | {k: v for k, v in said.items() if v is not None}


def _label(path: Path) -> str:
    """AIPerf names every run's file profile_export.jsonl: its artifact directory names the run."""
    return path.parent.name if path.name == "profile_export.jsonl" and path.parent.name else path.name


def _layout_note(path: Path, rows: list[dict[str, Any]]) -> tuple[ReportWarning, ...]:
    """That an early layout's records were read under the later names (`timestamp_ns` as the send, `credit_phase` as
    the phase)."""
    text = path.read_text(encoding="utf-8", errors="replace")[:4096]
    if '"timestamp_ns"' not in text or '"request_start_ns"' in text:
        return ()
    renamed = [["timestamp_ns", "the send"], ["credit_phase", "the phase"]]
    early = {"file": _label(path), "tool": FORMAT, "layout": aiperf_early.LAYOUT, "renamed": renamed}
    return (ReportWarning(Kind.FILE_EARLY_LAYOUT, fields=early),)


def _read_note(path: Path, info: Mapping[str, Any]) -> ReportWarning:
    """What the file is: AIPerf's version, from the summary beside it (None where it states none), and what the
    summary says of the run."""
    said = [[k, info[k]] for k in ("date", "endpoint", "model") if k in info]
    read = {"file": _label(path), "tool": FORMAT, "what": "an AIPerf profile export", "named": NAME}
    read |= {"version": info.get("version") or None, "unstated": f"AIPerf version not stated (no {SIBLING})"}
    return ReportWarning(Kind.FILE_READ, fields=read | {"said": said})


def read(path: Path) -> ImportedRun:
    """Read one AIPerf profile_export.jsonl (and its sibling summary); a file it cannot read is one line naming it,
    the format and the field."""
    ff = FileFields(path, READ_AS)
    rows = _profiling(ff, _lines(ff))
    summary = _summary(path)
    records = tuple(_record(ff, r, i) for i, r in enumerate(rows))
    info = _info(path, summary)
    keys = tuple(f"{r['metadata'].get('conversation_id')}/{r['metadata'].get('turn_index')}" for r in rows)
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=_level(ff, summary),
        records=records,
        acceptance=_acceptance(records),
        prompt_keys=keys if all(r["metadata"].get("conversation_id") for r in rows) else (),
        key_kind="AIPerf conversation_id/turn_index",
        info=info,
        notes=(_read_note(path, info), *_layout_note(path, rows)),
        started_utc=str(summary.get("start_time") or ""),
        label=_label(path),
        model=str(info.get("model") or ""),
    )


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """The file's one run."""
    return (read(path),)
