"""GuideLLM `benchmarks.json` (or `.yaml`), as `guidellm run --output kind=json` writes it -> an `ImportedRun`
(docs/imports.md).

The file holds `benchmarks`, one per load (several for a sweep); each has its `config.strategy` (the load) and
`requests.{successful, errored, incomplete}`, per request: `request_start_time` (GuideLLM's clock, seconds),
`time_to_first_token_ms`, `inter_token_latency_ms` (the mean gap from the first to the last token: (last - first) /
(output_tokens - 1)), `request_latency` (seconds), `prompt_tokens`, `output_tokens`, `output`, `request_args` (the
request body sent: its prompt) and `info` (`timings`, `error`, `status`). Its `time_per_output_token_ms` counts the
first token too and is not read, nor is any aggregate: speculab recomputes TPOT = (E2E - TTFT) / (tokens - 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, error_category, obj
from speculab.harness.imports.imported import ImportedRun, file_record
from speculab.harness.imports.older import guidellm_early
from speculab.harness.records import ErrorCategory, ErrorInfo, RequestRecord, RequestSpec
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind

FORMAT = "guidellm"
TOOL = "guidellm"
NAME = "GuideLLM"
READ_AS = "a GuideLLM benchmarks file"
SEVERAL = "GuideLLM benchmark(s)"  # a sweep's benchmarks, one per load
HOW = "GuideLLM: the same --data file, in order, and the same --profile"
NOTE = (
    "GuideLLM files: TPOT is speculab's (E2E - TTFT) / (output_tokens - 1) per request, E2E the last token at TTFT + "
    "inter_token_latency_ms x (output_tokens - 1); GuideLLM's time_per_output_token_ms (which counts the first token) "
    "is not read; the chunks between the first and last token are not in the file: chunk gaps, tokens per chunk and "
    "per-token ITL are unknown"
)
_STATUSES = ("successful", "errored", "incomplete")


def detect(path: Path) -> bool:
    """Whether `path` looks like a GuideLLM benchmarks file: JSON naming `guidellm_version` or GuideLLM's
    `generative_benchmark` near its start, or YAML opening with its `benchmarks:` (GuideLLM's YAML sorts its keys,
    so its version comes last)."""
    try:
        with path.open("rb") as f:
            head = f.read(8192).decode("utf-8", "replace")
    except OSError:
        return False
    if path.suffix in (".yaml", ".yml") and head.lstrip().startswith("benchmarks:"):
        return True
    return "guidellm_version" in head or "generative_benchmark" in head


def _load(ff: FileFields) -> dict[str, Any]:
    text = ff.text()
    if ff.path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            d = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml where installed
        except yaml.YAMLError as e:
            ff.fail(f"not YAML ({str(e).splitlines()[0][:200]})")
    else:
        d = ff.json(text)
    return ff.mapping(d, "")


def _benchmark(ff: FileFields, d: Mapping[str, Any], which: int | None) -> tuple[dict[str, Any], int]:
    """The one benchmark to read: the file's only one, or `which` (--benchmark) of a sweep's several (the other
    side may be a file of one benchmark: the one load picked from the sweep is compared with it)."""
    benchmarks = d.get("benchmarks")
    if not isinstance(benchmarks, list):
        ff.fail("no `benchmarks`" if benchmarks is None else "`benchmarks` is not a list")
    if not benchmarks:
        ff.fail("`benchmarks` is empty (the run wrote no benchmark)")
    n = len(benchmarks)
    if which is None and n > 1:
        loads = ", ".join(_strategy_label(b) for b in benchmarks[:4]) + (", ..." if n > 4 else "")
        raise UserError(
            f"{ff.path}: a GuideLLM file of {n} benchmarks ({loads}); compare takes one load per side: pick one with "
            f"--benchmark N (0-based, 0 to {n - 1})"
        )
    i = (which or 0) if n > 1 else 0  # a file of one benchmark is that one, whatever --benchmark picks in a sweep
    if i >= n:
        raise UserError(f"{ff.path}: --benchmark {i}: the file holds {n} benchmark(s), 0 to {n - 1}")
    return ff.mapping(benchmarks[i], f"benchmarks[{i}]"), i


def _strategy_label(b: Any) -> str:
    s = obj(guidellm_early.strategy(obj(b)))
    value = s.get("streams") or s.get("rate") or s.get("max_concurrency")
    return f"{s.get('type_', '?')}@{value:g}" if isinstance(value, (int, float)) else str(s.get("type_", "?"))


def _level(ff: FileFields, b: Mapping[str, Any], n: int) -> tuple[LevelSpec, ReportWarning | None]:
    """`config.strategy` -> the offered load; a note where GuideLLM sent every request at once."""
    s = ff.mapping(guidellm_early.strategy(b), "config.strategy")
    kind, cap = s.get("type_"), s.get("max_concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    if kind == "synchronous":
        return LevelSpec("concurrency", 1, ("low", "operating")), None
    if kind == "concurrent":
        return LevelSpec(
            "concurrency", ff.positive(s.get("streams"), "config.strategy.streams"), ("low", "operating")
        ), None
    if kind in ("constant", "poisson"):
        return LevelSpec("rate", ff.positive(s.get("rate"), "config.strategy.rate"), ("operating",), kind, cap), None
    if kind == "throughput":  # every request at once, up to its cap
        value = cap or n
        up_to = {"file": ff.path.name, "tool": FORMAT, "named": NAME, "requests": value}
        profile = ReportWarning(Kind.FILE_THROUGHPUT_PROFILE, fields=up_to)
        return LevelSpec("concurrency", value, ("operating",)), profile
    ff.fail(f"`config.strategy.type_` is {kind!r}, a load speculab does not read yet")


def _prompt(args: Any) -> tuple[str | None, tuple[dict[str, Any], ...] | None]:
    """The prompt (or messages) of the body GuideLLM sent, from `request_args` (a JSON string); (None, None) if none."""
    try:
        sent = json.loads(args) if isinstance(args, str) else args
    except ValueError:
        return None, None
    body = sent.get("body") if isinstance(sent, dict) else None
    if not isinstance(body, dict):
        return None, None
    if isinstance(body.get("prompt"), str):
        return body["prompt"], None
    msgs = body.get("messages")
    return None, (tuple(msgs) if isinstance(msgs, list) else None)


def _error(status: str, info: Mapping[str, Any]) -> ErrorInfo:
    """An errored request keeps GuideLLM's `info.error`; an incomplete one was cut off at the benchmark's end."""
    if status == "incomplete":
        return ErrorInfo(ErrorCategory.CANCELLED, "GuideLLM: incomplete (cut off when the benchmark ended)")
    text = str(info.get("error") or "errored")
    # GuideLLM keeps the exception's text, which does not tell an HTTP answer from a client failure: the words decide
    last = text.strip().splitlines()[-1][:300] if text.strip() else "errored"
    return ErrorInfo(error_category(text, None), f"GuideLLM: {last}")


def _record(ff: FileFields, r: Mapping[str, Any], status: str, index: int) -> RequestRecord:
    """One request: sent at `request_start_time`, its first token at + TTFT, its last at + the mean ITL x (n - 1),
    done at + `request_latency`."""
    where = r["_at"]  # the request's path in the file
    info = r.get("info") if isinstance(r.get("info"), dict) else {}
    sent = ff.number(r.get("request_start_time"), f"{where}.request_start_time")
    target = _timings(r).get("targeted_start")
    scheduled = target if isinstance(target, (int, float)) and not isinstance(target, bool) and target <= sent else sent
    prompt_tokens = ff.count(r.get("prompt_tokens"), f"{where}.prompt_tokens")
    latency = r.get("request_latency")
    end = sent + (latency if isinstance(latency, (int, float)) and not isinstance(latency, bool) else 0.0)
    if status != "successful":
        return file_record(index, sent, prompt_tokens, end, scheduled_s=scheduled, error=_error(status, info))
    n = ff.count(r.get("output_tokens"), f"{where}.output_tokens")
    first = sent + ff.number(r.get("time_to_first_token_ms"), f"{where}.time_to_first_token_ms") / 1000
    times = [first]
    if n is not None and n > 1:
        itl_s = ff.number(r.get("inter_token_latency_ms"), f"{where}.inter_token_latency_ms") / 1000
        times.append(first + itl_s * (n - 1))
    text = r.get("output")
    return file_record(
        index,
        sent,
        prompt_tokens,
        sent + ff.number(latency, f"{where}.request_latency"),
        scheduled_s=scheduled,
        chunk_times=times,
        output_text=text if isinstance(text, str) else "",
        completion_tokens=n,
        all_chunks=False,
    )


def _requests(ff: FileFields, b: Mapping[str, Any], i: int) -> list[tuple[str, dict[str, Any]]]:
    """Every request of the benchmark with its status, in the order GuideLLM took them from its dataset: by
    `info.timings.queued`, then `request_start_time` (GuideLLM lists them by status, each list as they completed;
    its worker processes may start them a little out of the dataset's order, so the start alone is not it)."""
    reqs = ff.mapping(b.get("requests"), f"benchmarks[{i}].requests")
    out = []
    for status in _STATUSES:
        listed = reqs.get(status) or []
        if not isinstance(listed, list):
            ff.fail(f"`benchmarks[{i}].requests.{status}` is not a list")
        for j, r in enumerate(listed):
            at = f"benchmarks[{i}].requests.{status}[{j}]"
            r = guidellm_early.upgrade_request(ff.mapping(r, at))
            ff.number(r.get("request_start_time"), f"{at}.request_start_time")
            out.append((status, r | {"_at": at}))
    if not out:
        ff.fail(f"`benchmarks[{i}].requests` holds no requests")
    return sorted(out, key=lambda sr: (_queued(sr[1]), sr[1]["request_start_time"]))


def _timings(r: Mapping[str, Any]) -> Mapping[str, Any]:
    """`info.timings` ({} where the file has none, or not as an object: they only order and date requests)."""
    info = r.get("info")
    t = info.get("timings") if isinstance(info, dict) else None
    return t if isinstance(t, dict) else {}


def _queued(r: Mapping[str, Any]) -> float:
    """When GuideLLM queued the request (its dataset order); its start where the file has no such time."""
    t = _timings(r).get("queued")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else r["request_start_time"]


def read(path: Path, benchmark: int | None = None) -> ImportedRun:
    """Read one benchmark of a GuideLLM benchmarks file (`benchmark`: which, 0-based, for a file of several); a file
    it cannot read is one line naming it, the format and the field."""
    ff = FileFields(path, READ_AS)
    d = _load(ff)
    b, i = _benchmark(ff, d, benchmark)
    return _run(ff, d, b, i)


def read_all(path: Path) -> tuple[ImportedRun, ...]:
    """Every benchmark of a GuideLLM file, in the file's order: one load each (a sweep's several loads)."""
    ff = FileFields(path, READ_AS)
    d = _load(ff)
    _benchmark(ff, d, 0)  # the same checks as one benchmark's read: `benchmarks` is a non-empty list
    return tuple(_run(ff, d, ff.mapping(b, f"benchmarks[{i}]"), i) for i, b in enumerate(d["benchmarks"]))


def _run(ff: FileFields, d: Mapping[str, Any], b: Mapping[str, Any], i: int) -> ImportedRun:
    path = ff.path
    reqs = _requests(ff, b, i)
    records = tuple(_record(ff, r, status, k) for k, (status, r) in enumerate(reqs))
    prompts = [_prompt(r.get("request_args")) for _, r in reqs]
    items = tuple(RequestSpec(index=k, prompt=p, messages=m) for k, (p, m) in enumerate(prompts))
    level, at_once = _level(ff, b, len(records))
    version = obj(d.get("metadata")).get("guidellm_version")
    info = {"tool": TOOL, "file": str(path), "version": version, "benchmark": i, "strategy": _strategy_label(b)}
    info |= {"date": b["start_time"]} if isinstance(b.get("start_time"), (int, float)) else {}
    # the early layout states no version: its name says which it is
    unstated = guidellm_early.LAYOUT if guidellm_early.is_early(b) else "GuideLLM version not stated in the file"
    read = {
        "file": path.name,
        "tool": FORMAT,
        "what": "a GuideLLM benchmark",
        "named": NAME,
        "version": version or None,
    }
    read |= {"unstated": unstated, "at": ["benchmark", i], "said": [["", info["strategy"]]]}
    notes = (ReportWarning(Kind.FILE_READ, fields=read), *((at_once,) if at_once else ()))
    return ImportedRun(
        path=path,
        tool=TOOL,
        level=level,
        records=records,
        items=items if all(p is not None or m is not None for p, m in prompts) else (),
        info=info,
        notes=notes,
        model=str(obj(obj(b.get("config")).get("backend")).get("model") or ""),
    )


def offered_load(ff: FileFields, b: Mapping[str, Any], n: int) -> tuple[LevelSpec, ReportWarning | None]:
    """The offered load of a GuideLLM benchmark (`n`: its requests), with its note; the one reading of GuideLLM's
    strategy, for its summary-only files too (harness.imports.summaries)."""
    return _level(ff, b, n)


def strategy_label(b: Any) -> str:
    """A benchmark's strategy as GuideLLM names it, e.g. concurrent@4."""
    return _strategy_label(b)
