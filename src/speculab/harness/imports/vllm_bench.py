"""vLLM `bench serve --save-result --save-detailed` JSON files -> an `ImportedRun` (docs/imports.md).

Per request the file holds, in the order the prompts were sent: `start_times` (vLLM's client clock, seconds),
`queue_times` (waiting for its concurrency limit before that), `ttfts`, `itls` (the gaps between streamed chunks: a
chunk may carry several tokens), `latencies` (send to last chunk), `input_lens` and `output_lens` (the server's
usage, else vLLM's tokenizer), `generated_texts` and `errors` ("" when the request succeeded). Its aggregates (mean
TPOT, ...) are not read: speculab recomputes every metric from these. `spec_decode_*` (the server's counters diffed
by vLLM's client) become the run's acceptance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, error_category
from speculab.harness.imports.imported import ImportedRun, closed_loop_sends, file_record, validity_notes
from speculab.harness.imports.marks import Marks
from speculab.harness.records import AcceptanceSummary, ErrorInfo, RequestRecord
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "vllm"
TOOL = "vllm bench serve"
READ_AS = "a vLLM bench serve result"
# the layout of benchmark_serving.py up to vLLM 0.6, as a file's note names it (what the file is read as)
BENCHMARK_SERVING = "a vLLM benchmarks/benchmark_serving.py result (its layout up to vLLM 0.6)"
UNSTATED = "vLLM version not stated in the file"  # what a file's note says where it states no version
# kept by later releases only: without `start_times` the sends are rebuilt from the load; without `latencies` E2E is
# the last chunk, TTFT + the sum of `itls` (vLLM's own latency is the same moment, the stream's end)
TIMES = ("start_times", "latencies")
# the per-request lists a file may hold, one entry per request; all but TIMES it must hold to be read (only with
# --save-detailed since `bench serve`; benchmark_serving.py up to 0.6 always wrote them)
PER_REQUEST = (*TIMES, "input_lens", "output_lens", "ttfts", "itls", "errors")
_REQUIRED = tuple(k for k in PER_REQUEST if k not in TIMES)
_FIX = "write it with `vllm bench serve --save-result --save-detailed`"
NAME = "vLLM"  # as compare names the files: "the vLLM files do not record sampling"
# how to send the same prompts in the same order (compare's refusal of runs it cannot pair)
HOW = "vLLM: a fixed --seed, or --disable-shuffle with a custom dataset"
# `vllm bench serve --dataset-name` values whose prompts are made up (vllm/benchmarks/datasets.py): acceptance on
# them is not the user's traffic's (harness.workload.validity); with `random` vLLM also sets ignore_eos itself
RANDOM_DATASETS = frozenset({"random", "random-mm", "random-rerank", "prefix_repetition", "burstgpt"})
NOTE = (
    "vLLM bench serve files: their `itls` are the gaps between streamed chunks (a chunk may carry several tokens), "
    "read as chunk gaps; per-token ITL and tokens per chunk are unknown; TPOT is speculab's (E2E - TTFT) / "
    "(output_lens - 1) per request, not the file's aggregate"
)


# vLLM's own marks (vllm/benchmarks/serve.py; benchmark_serving.py before it): every release's result opens with
# `date` and `backend` (`endpoint_type` beside it since 0.10), then `num_prompts`, then its counts from `completed` on
# (before the per-request lists, so a file cut short still has them). Other tools write a `backend` too (GuideLLM,
# draftbench, GenAI-Perf's `input_config`): a `backend` alone is no vLLM file
MARKS = Marks(TOOL, ("date", "backend|endpoint_type", "num_prompts", "completed"))


def detect(path: Path) -> bool:
    """Whether `path` is a vLLM bench serve result: a JSON object opening with vLLM's marks (`MARKS`) in its first
    8 KiB (a file cut short is still detected, so that reading it names what is wrong)."""
    head = _head(path)
    return head.startswith("{") and has_marks(head)


def _head(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return f.read(8192).decode("utf-8", "replace").lstrip()
    except OSError:
        return ""


def has_marks(head: str) -> bool:
    """Whether the start of a file names every one of vLLM's marks (`MARKS`)."""
    return all(any(f'"{k}"' in head for k in alts.split("|")) for alts in MARKS.keys)


def _load(ff: FileFields) -> dict[str, Any]:
    return ff.mapping(ff.json(ff.text()), "")


def _lists(ff: FileFields, d: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The per-request lists, all present and of one length (FileFields.request_lists), and the queue times where
    the file has them."""
    out = ff.request_lists(d, _REQUIRED, "ttfts", _FIX)
    n, queue = len(out["ttfts"]), d.get("queue_times")
    for key in TIMES:  # where the file has them, one per request like the rest
        v = d.get(key)
        if v is None:
            continue
        if not isinstance(v, list):
            ff.fail(f"`{key}` is not a list")
        if len(v) != n:
            ff.fail(f"`{key}` has {len(v)} entries, `ttfts` {n}")
        out[key] = v
    out["queue_times"] = queue if isinstance(queue, list) and len(queue) == n else [0.0] * n
    return out


def _sends(ff: FileFields, d: Mapping[str, Any], lists: Mapping[str, list[Any]]) -> list[float]:
    """Each request's send: the file's `start_times`, else rebuilt from its load as its closed loop (a release that
    kept none: benchmark_serving.py up to 0.6), each lasting to its last chunk."""
    n = len(lists["ttfts"])
    if "start_times" in lists:
        return [ff.number(lists["start_times"][i], f"start_times[{i}]") for i in range(n)]
    durations = [0.0 if lists["errors"][i] else _last_chunk(ff, lists, i) for i in range(n)]
    cap = d.get("max_concurrency")
    return closed_loop_sends(durations, cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None)


def _last_chunk(ff: FileFields, lists: Mapping[str, list[Any]], i: int) -> float:
    """Request i's last chunk after its send: TTFT + the sum of its chunk gaps."""
    gaps = lists["itls"][i]
    if not isinstance(gaps, list):
        ff.fail(f"`itls[{i}]` is not a list of chunk gaps")
    ttft = ff.number(lists["ttfts"][i], f"ttfts[{i}]")
    return ttft + sum(ff.number(g, f"itls[{i}][{j}]") for j, g in enumerate(gaps))


def _error(text: str) -> ErrorInfo:
    """vLLM keeps an HTTP reason, its own message, or a client traceback: the category from what it says."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else text
    # a traceback is an exception in vLLM's client; any other text is the server's reason phrase (or vLLM's own
    # "Never received a valid chunk", which error_category knows)
    return ErrorInfo(error_category(text, "traceback" not in text.lower()), f"vLLM bench serve: {last[:300]}")


def _latency(ff: FileFields, lists: Mapping[str, list[Any]], i: int) -> float:
    """Request i's E2E: the file's `latencies`, else its last chunk (TTFT + the sum of `itls`)."""
    if "latencies" in lists:
        return ff.number(lists["latencies"][i], f"latencies[{i}]")
    return _last_chunk(ff, lists, i)


def _record(ff: FileFields, lists: Mapping[str, list[Any]], i: int, sent: float) -> RequestRecord:
    """Request i: sent at `sent`, first chunk at + TTFT, then one chunk per `itls` gap, done at + latency."""
    queue = lists["queue_times"][i]
    queue_s = float(queue) if isinstance(queue, (int, float)) and math.isfinite(queue) and queue >= 0 else 0.0
    err = lists["errors"][i]
    prompt_tokens = ff.count(lists["input_lens"][i], f"input_lens[{i}]")
    text = lists["generated_texts"][i]
    if err:
        latency = lists["latencies"][i] if "latencies" in lists else 0.0
        end = sent + max(0.0, ff.number(latency or 0.0, f"latencies[{i}]"))
        return file_record(i, sent, prompt_tokens, end, scheduled_s=sent - queue_s, error=_error(str(err)))
    gaps = lists["itls"][i]
    if not isinstance(gaps, list):
        ff.fail(f"`itls[{i}]` is not a list of chunk gaps")
    first = sent + ff.number(lists["ttfts"][i], f"ttfts[{i}]")
    end = sent + _latency(ff, lists, i)
    times = tuple(accumulate((ff.number(g, f"itls[{i}][{j}]") for j, g in enumerate(gaps)), initial=first))
    return file_record(
        i,
        sent,
        prompt_tokens,
        end,
        scheduled_s=sent - queue_s,
        chunk_times=times,
        output_text=text if isinstance(text, str) else "",
        completion_tokens=ff.count(lists["output_lens"][i], f"output_lens[{i}]"),
    )


def _level(ff: FileFields, d: Mapping[str, Any], n: int) -> tuple[LevelSpec, ReportWarning | None]:
    """vLLM's `request_rate` ("inf" = all at once) and `max_concurrency` -> the offered load; a note when unusual."""
    if d.get("ramp_up_strategy"):
        ff.fail(f"`ramp_up_strategy` is {d['ramp_up_strategy']!r}: a run with a ramp-up is not one load; not read yet")
    cap = d.get("max_concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    rate = d.get("request_rate", "inf")
    try:
        rate_rps = float(rate)
    except (TypeError, ValueError):
        ff.fail(f'`request_rate` is {rate!r}, not a number or "inf"')
    if math.isfinite(rate_rps) and rate_rps > 0:
        burst = d.get("burstiness", 1.0)
        arrival = "poisson" if burst in (None, 1, 1.0) else "gamma"
        return LevelSpec("rate", rate_rps, ("operating",), arrival, cap), None
    if cap is not None:
        return LevelSpec("concurrency", cap, ("low", "operating")), None
    at_once = ReportWarning(Kind.FILE_ALL_AT_ONCE, fields={"file": ff.path.name, "tool": FORMAT, "requests": n})
    return LevelSpec("concurrency", n, ("operating",)), at_once


def _acceptance(d: Mapping[str, Any]) -> AcceptanceSummary | None:
    """`spec_decode_*`: vLLM's client diffed the server's spec-decode counters around the run; rate is in %."""
    if "spec_decode_num_drafts" not in d and "spec_decode_acceptance_length" not in d:
        return None
    rate = d.get("spec_decode_acceptance_rate")
    drafts = d.get("spec_decode_num_drafts")
    per_position = d.get("spec_decode_per_position_acceptance_rates") or ()
    return AcceptanceSummary(
        source="vLLM bench serve file: spec_decode_* (the server's counters, diffed by vLLM's client; server-wide)",
        active=bool(drafts),
        drafts=drafts,
        draft_tokens=d.get("spec_decode_draft_tokens"),
        accepted_tokens=d.get("spec_decode_accepted_tokens"),
        acceptance_rate=float(rate) / 100.0 if isinstance(rate, (int, float)) else None,
        acceptance_length=d.get("spec_decode_acceptance_length"),
        per_position=tuple(float(x) for x in per_position if isinstance(x, (int, float))),
    )


def _info(path: Path, d: Mapping[str, Any]) -> dict[str, Any]:
    """Where the numbers came from, as the file states it (vLLM writes its version only if given as --metadata)."""
    version = d.get("vllm_version") or d.get("version")
    keys = ("date", "backend", "model_id", "tokenizer_id", "label")
    return {"tool": TOOL, "file": str(path), "version": version} | {k: d[k] for k in keys if d.get(k) is not None}


def _layout(d: Mapping[str, Any], lists: Mapping[str, list[Any]]) -> str:
    """The tool and release the file's layout is: benchmark_serving.py wrote `best_of` and no send times (up to
    vLLM 0.6); `bench serve` wrote `endpoint_type` (0.10 on)."""
    if "start_times" not in lists and "best_of" in d and "endpoint_type" not in d:
        return BENCHMARK_SERVING
    return READ_AS


def _layout_notes(path: Path, lists: Mapping[str, list[Any]]) -> tuple[ReportWarning, ...]:
    """What an older layout lacks (the later layout's key), and what was done instead."""
    about = {"file": path.name, "tool": FORMAT}
    sends = ReportWarning(
        Kind.FILE_SENDS_FROM_LOAD,
        fields=about | {"field": "start_times", "layout": "an older vLLM layout, benchmark_serving.py's"},
    )
    e2e = ReportWarning(
        Kind.FILE_E2E_FROM_CHUNKS,
        fields=about | {"field": "latencies", "layout": "an older vLLM layout", "gaps": "itls"},
    )
    return (*((sends,) if "start_times" not in lists else ()), *((e2e,) if "latencies" not in lists else ()))


def _read_note(
    path: Path, d: Mapping[str, Any], lists: Mapping[str, list[Any]], info: Mapping[str, Any]
) -> ReportWarning:
    """What the file is, as it states it: its layout, vLLM's version and what it says of its run."""
    said = [[k, info[k]] for k in ("date", "backend", "model_id") if k in info]
    fields = {"file": path.name, "tool": FORMAT, "what": _layout(d, lists), "named": NAME}
    fields |= {"version": info.get("version") or None, "unstated": UNSTATED}
    return ReportWarning(Kind.FILE_READ, fields=fields | {"said": said})


def read(path: Path, keep: Mapping[str, str] | None = None) -> ImportedRun:
    """Read one vLLM bench serve result file; a file it cannot read is one line naming it, the format and the field.
    `keep`: more top-level keys of the file to keep in the run's info, under these names (a sweep's own keys)."""
    ff = FileFields(path, READ_AS)
    d = _load(ff)
    lists = _lists(ff, d)
    n = len(lists["ttfts"])
    records = tuple(_record(ff, lists, i, sent) for i, sent in enumerate(_sends(ff, d, lists)))
    level, at_once = _level(ff, d, n)
    info = _info(path, d) | {name: d[k] for k, name in (keep or {}).items() if k in d}
    notes = (_read_note(path, d, lists, info), *((at_once,) if at_once else ()), *_layout_notes(path, lists))
    # vLLM writes neither its dataset nor ignore_eos unless given as --metadata (dataset_name=random ignore_eos=true)
    ignored = d.get("ignore_eos") in (True, "true", "True", "1")
    notes += validity_notes(d.get("dataset_name"), ignored or None, RANDOM_DATASETS, n)
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=level,
        records=records,
        acceptance=_acceptance(d),
        info=info,
        notes=notes,
        started_utc=str(d.get("date") or ""),
        model=str(d.get("model_id") or ""),
    )


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """The file's one run."""
    return (read(path),)


def offered_load(ff: FileFields, d: Mapping[str, Any], n: int) -> tuple[LevelSpec, ReportWarning | None]:
    """The offered load a vLLM result states (`n`: its requests, the load when all were sent at once), with its note;
    the one reading of vLLM's load, for its summary-only files too (harness.imports.summaries)."""
    return _level(ff, d, n)
