"""LLMPerf `token_benchmark_ray.py --results-dir D` files -> an `ImportedRun` (docs/imports.md).

`*_individual_responses.json` is a list, one dict per completed request: `ttft_s`, `end_to_end_latency_s` (send to
the end of the stream), `number_input_tokens` (LLMPerf's count of the prompt it built), `number_output_tokens`
(LLMPerf's tokenizer count of the generated text, not the server's usage), `inter_token_latency_s` (a per-request
mean that counts the first token, not read), `error_code`, `error_msg`. The sibling `*_summary.json` (the same
prefix) holds the load (`num_concurrent_requests`) and `version` (LLMPerf's results version). LLMPerf lists the
requests as they completed and keeps no prompt, index or send time: with one request at a time that is the order of
its prompts (LLMPerf seeds its prompt sampling: the same arguments give the same prompts), and two such runs pair by
position; with several at a time it is not known, so such a run is compared unpaired (two samples), its send times
rebuilt as the closed loop it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.harness.design import UNKNOWN, LevelSpec
from speculab.harness.imports.fields import FileFields, error_category, stated_positive
from speculab.harness.imports.imported import ImportedRun, closed_loop_sends, file_record
from speculab.harness.imports.marks import Marks
from speculab.harness.records import ErrorInfo, RequestRecord
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "llmperf"
TOOL = "llmperf"
NAME = "LLMPerf"
READ_AS = "an LLMPerf individual_responses file"
HOW = "LLMPerf: the same --mean/--stddev-input-tokens and --mean/--stddev-output-tokens, at --num-concurrent-requests 1"
SUFFIX = "_individual_responses.json"
# LLMPerf's summary (`*_summary.json`, read alone at the run level by `summaries.llmperf`): its load and its results'
# counts; beside its responses it is theirs (a refusal names them)
SUMMARY_MARKS = Marks(
    "LLMPerf's summary, *_summary.json",
    ("num_concurrent_requests", "results_num_completed_requests"),
    "LLMPerf's *_individual_responses.json beside it",
)
NOTE = (
    "LLMPerf files: TTFT is `ttft_s`, E2E `end_to_end_latency_s` (to the end of the stream: read as the last token), "
    "output tokens `number_output_tokens` (LLMPerf's tokenizer count of the text, not the server's usage); TPOT is "
    "speculab's (E2E - TTFT) / (number_output_tokens - 1) per request; LLMPerf's `inter_token_latency_s` (a "
    "per-request mean that counts the first token) is not read; the chunks are not in the file: chunk gaps, tokens "
    "per chunk and per-token ITL are unknown; the file keeps no send times: they are rebuilt from LLMPerf's closed "
    "loop (each of its --num-concurrent-requests streams sending as its last request ended); tok/s is over "
    "LLMPerf's own measured time (its summary's completed requests per minute), none where the summary states no "
    "such rate"
)


def detect(path: Path) -> bool:
    """Whether `path` is an LLMPerf individual responses file: named `*_individual_responses.json` (LLMPerf's own
    name for it), or a JSON list whose first entry names LLMPerf's `ttft_s` and `end_to_end_latency_s` (both: a list
    of TTFTs alone is anyone's)."""
    if path.name.endswith(SUFFIX):
        return True
    try:
        with path.open("rb") as f:
            head = f.read(2048).decode("utf-8", "replace").lstrip()
    except OSError:
        return False
    return head.startswith("[") and '"ttft_s"' in head and '"end_to_end_latency_s"' in head


def summary_path(path: Path) -> Path:
    """The sibling summary LLMPerf writes with the same prefix: X_individual_responses.json -> X_summary.json."""
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    return path.with_name(f"{stem}_summary.json")


def _summary(ff: FileFields) -> tuple[FileFields, dict[str, Any]] | None:
    """The sibling summary, with its own fields (its surprises name it, not the responses file); None where there is
    none beside it (the file is read without its load and throughput: #51)."""
    p = summary_path(ff.path)
    if not p.is_file():
        return None
    sf = FileFields(p, "an LLMPerf summary file")
    return sf, sf.mapping(sf.json(sf.text()), "")


def offered_load(sf: FileFields, s: Mapping[str, Any]) -> LevelSpec:
    """The summary's `num_concurrent_requests`: LLMPerf's closed loop of that many streams."""
    n = sf.positive(s.get("num_concurrent_requests"), "num_concurrent_requests")
    if n != int(n):
        sf.fail(f"`num_concurrent_requests` is {n:g}, not a whole number of streams")
    return LevelSpec("concurrency", float(n), ("low", "operating"))


def duration_s(s: Mapping[str, Any]) -> float | None:
    """LLMPerf's own measured wall time (its start to its end, around every request): it keeps only rates over it,
    `results_num_completed_requests` / (end - start) x 60 as `results_num_completed_requests_per_min`, and the
    completed requests' output tokens / (end - start) as `results_mean_output_throughput_token_per_s`, so it is
    read back from a rate and its count. None where the summary holds neither pair."""
    n_done = stated_positive(s.get("results_num_completed_requests"))
    per_min = stated_positive(s.get("results_num_completed_requests_per_min"))
    if n_done is not None and per_min is not None:
        return n_done / per_min * 60.0
    mean_out = stated_positive(s.get("results_number_output_tokens_mean"))
    tok_s = stated_positive(s.get("results_mean_output_throughput_token_per_s"))
    if n_done is not None and mean_out is not None and tok_s is not None:
        return n_done * mean_out / tok_s
    return None


def _error(code: Any, msg: Any) -> ErrorInfo:
    """LLMPerf keeps the HTTP status (-1: an exception in its client) and the body or message."""
    text = str(msg or "").strip()
    status = code if isinstance(code, int) and not isinstance(code, bool) and code >= 100 else None
    # a status: the server answered; -1 (or another code): an exception in LLMPerf's client; no code: not told
    answered = True if status is not None else (None if code in (None, "") else False)
    last = text.splitlines()[-1][:300] if text else ""
    return ErrorInfo(error_category(text, answered), f"LLMPerf: error_code {code}: {last}", status)


def _failed(r: Mapping[str, Any]) -> bool:
    return r.get("error_code") not in (None, "") or bool(r.get("error_msg"))


def _record(ff: FileFields, r: Mapping[str, Any], i: int, sent: float) -> RequestRecord:
    """Request i: sent at `sent` (rebuilt), its first token at + `ttft_s`, its last (the end) at + E2E."""
    prompt_tokens = ff.count(r.get("number_input_tokens"), f"[{i}].number_input_tokens")
    e2e = r.get("end_to_end_latency_s")
    if _failed(r):
        e2e_s = float(e2e) if isinstance(e2e, (int, float)) and not isinstance(e2e, bool) and e2e > 0 else 0.0
        return file_record(i, sent, prompt_tokens, sent + e2e_s, error=_error(r.get("error_code"), r.get("error_msg")))
    e2e_s = ff.number(e2e, f"[{i}].end_to_end_latency_s")
    ttft = ff.number(r.get("ttft_s"), f"[{i}].ttft_s")
    n = ff.count(r.get("number_output_tokens"), f"[{i}].number_output_tokens")
    times = (ttft, e2e_s) if n is not None and n > 1 and e2e_s > ttft else (ttft,)
    return file_record(
        i,
        sent,
        prompt_tokens,
        sent + e2e_s,
        chunk_times=[sent + t for t in times],
        completion_tokens=n,
        all_chunks=False,
    )


def _responses(ff: FileFields) -> list[dict[str, Any]]:
    d = ff.json(ff.text())
    if not isinstance(d, list):
        ff.fail("not a JSON list of responses")
    if not d:
        ff.fail("it holds no requests")
    return [ff.mapping(r, f"[{i}]") for i, r in enumerate(d)]


def read(path: Path) -> ImportedRun:
    """Read an LLMPerf `*_individual_responses.json` with its `*_summary.json` beside it, or alone (its load unknown,
    its throughput absent: `_alone`); a file it cannot read is one line naming it, the format and the field."""
    ff = FileFields(path, READ_AS)
    responses = _responses(ff)
    summary = _summary(ff)
    if summary is None:
        return _alone(ff, responses)
    sf, s = summary
    level = offered_load(sf, s)
    streams = int(level.value)
    sends = closed_loop_sends(_durations(responses), streams)  # one stream: exact to the client's own gap
    records = tuple(_record(ff, r, i, sent) for i, (r, sent) in enumerate(zip(responses, sends, strict=True)))
    window = duration_s(s)
    version = s.get("version")
    info = {"tool": TOOL, "file": str(path), "version": version, "summary": summary_path(path).name}
    info |= {k: s[k] for k in ("model", "timestamp", "llmperf_commit") if s.get(k) is not None}
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=level,
        records=records,
        info=info,
        notes=_notes(path, info, streams, window),
        label=path.parent.name or path.name,
        unpairable=_UNORDERED.format(n=streams) if streams > 1 else "",
        sends_rebuilt=True,
        duration_s=window,
        model=str(s.get("model") or ""),
    )


def _durations(responses: list[dict[str, Any]]) -> list[float]:
    """Each request's E2E, 0 where the file holds none (a failed request's)."""
    e2e = [r.get("end_to_end_latency_s") for r in responses]
    return [float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else 0.0 for x in e2e]


def _alone(ff: FileFields, responses: list[dict[str, Any]]) -> ImportedRun:
    """The responses file with no summary beside it (#51): each request as with one, but the load is not in the file
    (LevelSpec kind UNKNOWN, never assumed: it compares only with another unknown load), nor is LLMPerf's measured
    time (no throughput), nor its version or model. Its sends are rebuilt one after another (the only order the
    file keeps, with no streams to spread them over), which stands for no load; and with the streams unknown its
    order is not known to be its prompts', so it does not pair by position."""
    path = ff.path
    sends = closed_loop_sends(_durations(responses), 1)
    records = tuple(_record(ff, r, i, sent) for i, (r, sent) in enumerate(zip(responses, sends, strict=True)))
    info = {"tool": TOOL, "file": str(path), "version": None, "summary": None}
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=LevelSpec(UNKNOWN, 0.0, ("low", "operating")),
        records=records,
        info=info,
        notes=_alone_notes(path),
        label=path.parent.name or path.name,
        unpairable=_UNSTATED,
        sends_rebuilt=True,
        duration_s=None,
        load_from=f"LLMPerf's {summary_path(path).name} beside it (its --num-concurrent-requests)",
    )


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """The file's one run."""
    return (read(path),)


_UNORDERED = (
    "an LLMPerf run at --num-concurrent-requests {n} lists its requests as they completed, with no prompt or index, "
    "so no position is a prompt"
)


_UNSTATED = (
    "an LLMPerf responses file without its summary does not state --num-concurrent-requests, and with several at a "
    "time it lists its requests as they completed, so no position is known to be a prompt"
)


def _alone_notes(path: Path) -> tuple[ReportWarning, ...]:
    """What the file is, that its load is not in it, and that its throughput is not either."""
    summary = summary_path(path).name
    read = {"file": f"{path.parent.name}/{path.name}", "tool": FORMAT, "what": "an LLMPerf run"}
    read |= {"named": "LLMPerf results version", "version": None}
    read |= {"unstated": f"LLMPerf's version is in its summary, not beside it ({summary})", "unsaid": "no model named"}
    read |= {"said": []}
    sends = "its send times are rebuilt one request after another, in the order listed, standing for no load"
    where = f"its summary, {summary} (--num-concurrent-requests)"
    load = {"file": f"{path.parent.name}/{path.name}", "named": NAME, "where": where, "sends": sends}
    lacks = f"LLMPerf's measured time is in its summary ({summary}), not beside it, and the file keeps no send times"
    return (
        ReportWarning(Kind.FILE_READ, fields=read),
        ReportWarning(Kind.FILE_LOAD_UNSTATED, fields=load),
        ReportWarning(Kind.FILE_NO_THROUGHPUT, fields={"tool": FORMAT, "lacks": lacks}),
    )


def _notes(path: Path, info: Mapping[str, Any], streams: int, window: float | None) -> tuple[ReportWarning, ...]:
    """What the file is (LLMPerf's results version and what its summary says of the run), how its sends were rebuilt
    (one stream: as they ran, so no note), and what its tok/s is over."""
    read = {"file": f"{path.parent.name}/{path.name}", "tool": FORMAT, "what": "an LLMPerf run"}
    read |= {"named": "LLMPerf results version", "version": info.get("version") or None}
    read |= {"unstated": "LLMPerf's version not stated in the summary", "unsaid": "no model named"}
    read |= {"said": [[k, info[k]] for k in ("model", "llmperf_commit") if k in info]}
    rebuilt = ReportWarning(Kind.FILE_SENDS_CLOSED_LOOP, fields={"tool": FORMAT, "named": NAME, "streams": streams})
    return (ReportWarning(Kind.FILE_READ, fields=read), *((rebuilt,) if streams > 1 else ()), _throughput_note(window))


def _throughput_note(window: float | None) -> ReportWarning:
    """What tok/s is over: LLMPerf's own measured time, or nothing (sends rebuilt: their span is not the run's)."""
    if window is None:
        lacks = (
            "the LLMPerf summary states no completed requests per minute or output throughput, and the file keeps no "
            "send times"
        )
        return ReportWarning(Kind.FILE_NO_THROUGHPUT, fields={"tool": FORMAT, "lacks": lacks})
    window_is = "its own measured time, from its summary (completed requests per minute)"
    return ReportWarning(Kind.FILE_THROUGHPUT_WINDOW, fields={"tool": FORMAT, "named": NAME, "window": window_is})
