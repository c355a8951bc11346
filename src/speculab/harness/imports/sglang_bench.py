"""SGLang `bench_serving --output-file F --output-details` JSONL -> an `ImportedRun` (docs/imports.md).

Each line of the file is one run (bench_serving appends a line per run). With `--output-details` a line holds, per
request in the order the prompts were sent (SGLang gathers its outputs in dataset order): `ttfts`, `itls`,
`input_lens` (the server's `prompt_tokens`, else SGLang's tokenizer), `output_lens` (the server's
`completion_tokens`), `generated_texts` and `errors` ("" when the request succeeded). Its `itls` are the gaps
between streamed chunks for the OpenAI-compatible backends; for the native backends (`sglang`, `sglang-native`)
SGLang splits each chunk's gap evenly over the chunk's tokens, so they are per-token shares, not the chunks. The
line keeps no send or end times: sends are rebuilt from the load (below), the end is the last chunk. The aggregates
(mean TPOT, ...) and `accept_length` (the server's mean, from /server_info) are not recomputed from: `accept_length`
is the arm's acceptance length, its source named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, error_category, obj, stated_positive
from speculab.harness.imports.imported import ImportedRun, closed_loop_sends, file_record, validity_notes
from speculab.harness.records import AcceptanceSummary, ErrorInfo, RequestRecord
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "sglang"
TOOL = "sglang bench_serving"
NAME = "SGLang"
READ_AS = "an SGLang bench_serving result"
SEVERAL = "SGLang run(s)"  # the lines of a file bench_serving appended to, one per load
HOW = "SGLang: the same --dataset-path and --seed (its datasets are shuffled with the seed)"
_FIX = "write it with `python -m sglang.bench_serving ... --output-file F --output-details`"
PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "errors")
# bench_serving's datasets of made-up prompts (sglang/bench_serving.py --dataset-name): acceptance on them is not
# the user's traffic's (harness.workload.validity)
RANDOM_DATASETS = frozenset({"random", "random-ids", "random-image", "generated-shared-prefix"})
SAID = ("backend", "dataset_name", "tag")  # what a line says of its run, kept in the run's info and noted
NATIVE = ("sglang", "sglang-native")  # the backends whose `itls` are a chunk's gap split over its tokens
NOTE = (
    "SGLang bench_serving files: `itls` are the gaps between streamed chunks (a chunk may carry several tokens), read "
    "as chunk gaps; from the native backend (`sglang`, /generate) SGLang splits each chunk's gap evenly over its "
    "tokens, so only the first and last token's times are read (chunk gaps, tokens per chunk and per-token ITL "
    "unknown); the file keeps no send times: they are rebuilt from the load (at a max concurrency, each request "
    "sent as one before it ended, in dataset order); tok/s is over the line's own `duration`; TPOT is speculab's "
    "(E2E - TTFT) / (output_lens - 1) per request, E2E the last chunk (ttft + the sum of itls), not the file's "
    "aggregate"
)


def detect(path: Path) -> bool:
    """Whether `path` looks like an SGLang bench_serving result: JSON lines, the first opening with SGLang's `tag`
    / `backend` and naming `dataset_name` (a file cut short is still detected, so that reading it says what is
    wrong)."""
    try:
        with path.open("rb") as f:
            head = f.read(4096).decode("utf-8", "replace").lstrip()
    except OSError:
        return False
    return head.startswith('{"tag"') or (head.startswith('{"backend"') and '"dataset_name"' in head)


def _lines(ff: FileFields) -> list[tuple[int, str]]:
    return [(n, ln) for n, ln in enumerate(ff.text().splitlines(), 1) if ln.strip()]


def _run(ff: FileFields, which: int | None) -> tuple[dict[str, Any], int]:
    """The one run to read: the file's only line, or `which` (--benchmark) of several."""
    lines = _lines(ff)
    if not lines:
        ff.fail("the file is empty (no run)")
    n = len(lines)
    if which is None and n > 1:
        raise UserError(
            f"{ff.path}: an SGLang file of {n} runs (bench_serving appends a line per run); compare takes one load "
            f"per side: pick one with --benchmark N (0-based, 0 to {n - 1})"
        )
    i = (which or 0) if n > 1 else 0
    if i >= n:
        raise UserError(f"{ff.path}: --benchmark {i}: the file holds {n} run(s), 0 to {n - 1}")
    at, text = lines[i]
    return ff.mapping(ff.json(text, f"line {at}: "), "", f"line {at}: "), i


def _status(text: str) -> int | None:
    """The HTTP status of SGLang's "Reason: body" error (it keeps the reason phrase, not the code)."""
    reason = text.split(":", 1)[0].strip().upper().replace(" ", "_").replace("-", "_")
    status = HTTPStatus.__members__.get(reason)
    return int(status) if status is not None and ":" in text else None


def _error(text: str) -> ErrorInfo:
    """SGLang keeps an HTTP reason and body, or a client traceback: the category from what it says."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # as vLLM's (SGLang took its client): a traceback is an exception in the client, else the server's answer
    category = error_category(text, "traceback" not in text.lower())
    return ErrorInfo(category, f"SGLang bench_serving: {(lines[-1] if lines else text)[:300]}", _status(text))


def _timing(ff: FileFields, lists: Mapping[str, list[Any]], i: int, native: bool) -> tuple[float, list[float]]:
    """Request i's TTFT and the chunk times after its first, relative to its send (native: the last only)."""
    ttft = ff.number(lists["ttfts"][i], f"ttfts[{i}]")
    gaps = lists["itls"][i]
    if not isinstance(gaps, list):
        ff.fail(f"`itls[{i}]` is not a list of gaps")
    times, t = [], ttft
    for j, g in enumerate(gaps):
        t += ff.number(g, f"itls[{i}][{j}]")
        times.append(t)
    return ttft, (times[-1:] if native else times)


def _records(ff: FileFields, lists: Mapping[str, list[Any]], native: bool, cap: int | None) -> list[RequestRecord]:
    n = len(lists["ttfts"])
    timing: list[tuple[float, list[float]] | None] = [
        None if lists["errors"][i] else _timing(ff, lists, i, native) for i in range(n)
    ]
    # SGLang's semaphore wakes its waiters in turn: the next request in dataset order is sent as the earliest ends
    sends = closed_loop_sends([t[1][-1] if t and t[1] else (t[0] if t else 0.0) for t in timing], cap)
    out = []
    for i, (sent, t) in enumerate(zip(sends, timing, strict=True)):
        prompt_tokens = ff.count(lists["input_lens"][i], f"input_lens[{i}]")
        if t is None:
            out.append(
                file_record(i, sent, prompt_tokens, sent, scheduled_s=0.0, error=_error(str(lists["errors"][i])))
            )
            continue
        ttft, after = t
        text = lists["generated_texts"][i]
        out.append(
            file_record(
                i,
                sent,
                prompt_tokens,
                sent + (after[-1] if after else ttft),
                scheduled_s=0.0,
                chunk_times=[sent + x for x in (ttft, *after)],
                output_text=text if isinstance(text, str) else "",
                completion_tokens=ff.count(lists["output_lens"][i], f"output_lens[{i}]"),
                all_chunks=not native,
            )
        )
    return out


def _cap(d: Mapping[str, Any]) -> int | None:
    """`max_concurrency`: SGLang's semaphore (None: every request at once)."""
    cap = d.get("max_concurrency")
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None


def _level(ff: FileFields, d: Mapping[str, Any], n: int) -> tuple[LevelSpec, ReportWarning | None]:
    """`request_rate` (inf: no pacing) and `max_concurrency` -> the offered load; a rate is not read yet (its send
    times are random draws the file does not keep)."""
    cap = _cap(d)
    rate = d.get("request_rate", math.inf)
    try:
        rate_rps = float(rate)
    except (TypeError, ValueError):
        ff.fail(f"`request_rate` is {rate!r}, a load speculab does not read yet")
    if math.isfinite(rate_rps):
        raise UserError(
            f"{ff.path}: an SGLang run at --request-rate {rate_rps:g}: its send times are random draws the file does "
            "not keep, so its load cannot be rebuilt; not read yet (run it with --request-rate inf --max-concurrency N)"
        )
    if cap is not None:
        return LevelSpec("concurrency", cap, ("low", "operating")), None
    at_once = ReportWarning(Kind.FILE_ALL_AT_ONCE, fields={"file": ff.path.name, "tool": FORMAT, "requests": n})
    return LevelSpec("concurrency", n, ("operating",)), at_once


def _acceptance(d: Mapping[str, Any]) -> AcceptanceSummary | None:
    """`accept_length`: the server's average speculative acceptance length (SGLang's /server_info), where given."""
    v = d.get("accept_length")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        return None
    return AcceptanceSummary(
        source="SGLang bench_serving file: accept_length (the server's avg_spec_accept_length; server-wide)",
        active=True,
        acceptance_length=float(v),
    )


def read(path: Path, benchmark: int | None = None) -> ImportedRun:
    """Read one run (line) of an SGLang bench_serving result file (`benchmark`: which, 0-based, for a file of
    several); a file it cannot read is one line naming it, the format and the field."""
    ff = FileFields(path, READ_AS)
    d, i = _run(ff, benchmark)
    return _read_run(ff, d, i)


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """Every run (line) of an SGLang bench_serving file, in the file's order: one load each (bench_serving appends
    a line per run, so a file written at several --max-concurrency values is a sweep)."""
    ff = FileFields(path, READ_AS)
    lines = _lines(ff)
    if not lines:
        ff.fail("the file is empty (no run)")
    return tuple(
        _read_run(ff, ff.mapping(ff.json(t, f"line {at}: "), "", f"line {at}: "), i) for i, (at, t) in enumerate(lines)
    )


def _read_run(ff: FileFields, d: dict[str, Any], i: int) -> ImportedRun:
    path = ff.path
    lists = ff.request_lists(d, PER_REQUEST, "ttfts", _FIX)
    level, at_once = _level(ff, d, len(lists["ttfts"]))
    backend = str(d.get("backend") or "")
    records = tuple(_records(ff, lists, backend in NATIVE, _cap(d)))
    # bench_serving's own measured time, first send to last response: what its `output_throughput` divides by
    window = stated_positive(d.get("duration"))
    info = {"tool": TOOL, "file": str(path), "version": None, "run": i}
    info |= {k: d[k] for k in SAID if d.get(k) is not None}
    notes = (_read_note(path, info, i), _throughput_note(window), *((at_once,) if at_once else ()))
    notes += validity_notes(d.get("dataset_name"), d.get("ignore_eos"), RANDOM_DATASETS, len(records))
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=level,
        records=records,
        acceptance=_acceptance(d),
        info=info,
        notes=notes,
        sends_rebuilt=True,
        duration_s=window,
        # SGLang writes no model of its own; `server_info` (the server's /get_server_info, where it asked) names it
        model=str(obj(d.get("server_info")).get("model_path") or ""),
    )


def _read_note(path: Path, info: Mapping[str, Any], line: int) -> ReportWarning:
    """What the file is: which line (run) of it, and what the line says of the run (SGLang writes no version)."""
    read = {"file": path.name, "tool": FORMAT, "what": "an SGLang bench_serving run", "named": NAME, "version": None}
    read |= {"unstated": "SGLang's version is not in the file", "at": ["line", line]}
    return ReportWarning(Kind.FILE_READ, fields=read | {"said": [[k, info[k]] for k in SAID if k in info]})


def _throughput_note(window: float | None) -> ReportWarning:
    """What tok/s is over: the line's own measured time, or nothing (sends rebuilt: their span is not the run's)."""
    if window is None:
        lacks = "the SGLang line states no `duration` and keeps no send times"
        return ReportWarning(Kind.FILE_NO_THROUGHPUT, fields={"tool": FORMAT, "lacks": lacks})
    return ReportWarning(
        Kind.FILE_THROUGHPUT_WINDOW, fields={"tool": FORMAT, "named": NAME, "window": "the line's own `duration`"}
    )
