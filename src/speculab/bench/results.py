"""A run on disk: manifest.json (what was run), requests.jsonl (one record per finished request, appended and
flushed as each finishes, so a crash loses nothing that finished) and summary.json (every number, seconds).

summary.json keys that other commands rely on (issue 2): metrics.{ttft_s,tpot_s,e2e_s,chunk_gap_s,itl_s}.
{mean,p50,p90,p99}, metrics.tokens_per_chunk.mean, counts.{sent,ok,error}, throughput.output_tok_s and
server.spec_decode.{acceptance_rate,acceptance_length} when the server has those counters.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from speculab import __version__
from speculab.bench.metrics import RunMetrics, StallConfig
from speculab.bench.records import RequestRecord
from speculab.errors import UserError

SUMMARY_SCHEMA = "speculab.bench.summary/1"
MANIFEST_SCHEMA = "speculab.bench.manifest/1"
MANIFEST, REQUESTS, SUMMARY = "manifest.json", "requests.jsonl", "summary.json"
_SECRET_FLAGS = ("--api-key",)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_safe(obj: Any) -> Any:
    """NaN and infinities become null: summary files are strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line with secret flag values replaced: the API key is never written to disk."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append("***")
            hide_next = False
        elif a in _SECRET_FLAGS:
            out.append(a)
            hide_next = True
        elif any(a.startswith(f + "=") for f in _SECRET_FLAGS):
            out.append(a.split("=", 1)[0] + "=***")
        else:
            out.append(a)
    return out


def versions() -> dict[str, Any]:
    import aiohttp
    import numpy

    return {
        "speculab": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "aiohttp": aiohttp.__version__,
        "numpy": numpy.__version__,
    }


class RunDir:
    """The output directory of one bench run. Refuses a directory that already holds a run."""

    def __init__(self, path: Path):
        self.path = path
        self._requests: IO[str] | None = None

    @staticmethod
    def check(path: Path) -> None:
        """Fail before any load if the directory cannot be used."""
        if path.exists() and not path.is_dir():
            raise UserError(f"--output {path} is a file; give a directory")
        if path.is_dir() and any((path / n).exists() for n in (MANIFEST, REQUESTS, SUMMARY)):
            raise UserError(f"--output {path} already holds a run; choose a new directory or remove it")
        parent = path if path.is_dir() else path.parent
        while not parent.exists():
            parent = parent.parent
        if not os.access(parent, os.W_OK):
            raise UserError(f"--output {path}: {parent} is not writable; choose another directory")

    def create(self) -> RunDir:
        self.check(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._requests = (self.path / REQUESTS).open("a", encoding="utf-8")
        except OSError as e:  # os.access cannot predict everything (root, read-only or virtual file systems)
            raise UserError(
                f"--output {self.path}: cannot create it ({e.strerror}); choose another directory"
            ) from None
        return self

    def write_json(self, name: str, obj: dict[str, Any]) -> None:
        """Atomic: write a temporary file, then rename over the target."""
        tmp = self.path / (name + ".tmp")
        text = json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n"
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.path / name)
        except OSError as e:
            raise self._write_error(name, e) from None

    def append(self, rec: RequestRecord) -> None:
        assert self._requests is not None, "create() first"
        line = json.dumps(json_safe(rec.to_dict()), ensure_ascii=False, allow_nan=False) + "\n"
        try:
            self._requests.write(line)
            self._requests.flush()
        except OSError as e:  # disk full, a removed mount: the run stops with one line, not a traceback
            raise self._write_error(REQUESTS, e) from None

    def _write_error(self, name: str, e: OSError) -> UserError:
        return UserError(
            f"cannot write {self.path / name} ({e.strerror or e}); the run stopped. Records written before "
            "are in requests.jsonl; free space or choose another --output"
        )

    def close(self) -> None:
        if self._requests is not None:
            self._requests.close()
            self._requests = None


def read_records(path: Path) -> list[RequestRecord]:
    """requests.jsonl -> records; a torn last line (the process died mid-write) is skipped."""
    out: list[RequestRecord] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(RequestRecord.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            if i == len(lines) - 1:
                break
            raise UserError(f"{path}:{i + 1}: not a request record ({e})") from None
    return out


def request_option_hints(records: Sequence[RequestRecord]) -> list[str]:
    """Client 4xx errors that name a request option we sent: say which flag turns it off."""
    msgs = [r.error.message.lower() for r in records if r.error is not None and r.error.status in (400, 422)]
    hints = []
    if any("continuous_usage" in m for m in msgs):
        hints.append("the server rejected stream_options.continuous_usage_stats: rerun with --no-continuous-usage")
    elif any("stream_options" in m or "include_usage" in m for m in msgs):
        hints.append("the server rejected stream_options: rerun with --no-include-usage")
    if any("logprobs" in m for m in msgs):
        hints.append("the server rejected the logprobs request: rerun without --logprobs (or with a smaller N)")
    if msgs and not hints:
        hints.append(
            f"{len(msgs)} requests were rejected as invalid (HTTP 400/422); see error messages in requests.jsonl"
        )
    # /v1/models answered (the preflight checks it), but the completions path did not: a chat-only server (or one
    # without chat) under the other --api
    n_missing = sum(1 for r in records if r.error is not None and r.error.status in (404, 405))
    if n_missing:
        hints.append(
            f"{n_missing} requests got HTTP 404/405: the server may not serve this endpoint; "
            "try the other --api (completions | chat)"
        )
    return hints


def build_warnings(m: RunMetrics, *, requested_rate_rps: float | None, interrupted: bool) -> list[str]:
    """Things a reader must know before trusting the numbers."""
    w: list[str] = []
    if interrupted:
        w.append("run interrupted: the summary covers only the requests that ran")
    # The client is judged against the schedule it drew, not the nominal rate: a seeded Poisson schedule of 200
    # requests is itself ~7% off the nominal rate by chance, which is no fault of the client or the server.
    sched = m.scheduled_rate_rps
    if requested_rate_rps and sched is not None and m.achieved_rate_rps is not None:
        if m.achieved_rate_rps < 0.95 * sched:
            w.append(
                f"offered load not achieved: {m.achieved_rate_rps:.3g} req/s sent vs {sched:.3g} scheduled "
                f"({requested_rate_rps:.3g} requested; concurrency cap or client overload; see queue_s)"
            )
        elif abs(sched / requested_rate_rps - 1) > 0.05:
            w.append(
                f"the random arrival schedule of {m.sent} requests came out at {sched:.3g} req/s, not "
                f"{requested_rate_rps:.3g} (sampling noise, sent on schedule); more prompts, --duration or "
                "--arrival constant bring it closer"
            )
    q99 = m.distributions["queue_s"].p99
    if math.isfinite(q99) and q99 > 0.01:
        w.append(f"client queue time p99 {q99 * 1e3:.1f} ms: requests waited before being sent (reported separately)")
    if n_unmeasured := m.token_count_sources.get("one_per_chunk"):
        w.append(
            f"per-chunk token counts unknown for {n_unmeasured} requests: they are left out of tokens per chunk "
            "(unless no request has counts: then usage / chunks), and out of per-token ITL unless their usage shows "
            "one token per chunk; enable continuous usage stats, --logprobs or --tokenizer"
        )
    if m.output_tokens_unknown:
        w.append(f"{m.output_tokens_unknown} successful requests have no output token count (no usage from server)")
    n_connect = m.errors_by_category.get("connect", 0)
    if n_connect and m.ok:
        # the preflight reached the server and some requests succeeded: refusals later mean it went away
        w.append(
            f"{n_connect} requests could not connect although {m.ok} succeeded: the server crashed, restarted or "
            "refused connections mid-run; throughput and the acceptance delta cover a broken window"
        )
    if m.error:
        cats = ", ".join(f"{k} {v}" for k, v in m.errors_by_category.items())
        w.append(f"{m.error} of {m.sent} requests failed ({cats}); latency numbers cover successful requests only")
    return w


def build_summary(
    m: RunMetrics,
    *,
    run: dict[str, Any],
    load: dict[str, Any],
    stall: StallConfig,
    warmup_requests: int,
    spec_decode: dict[str, Any] | None,
    spec_decode_note: str | None,
    metrics_scraped: bool,
    interrupted: bool,
    hints: Sequence[str] = (),
) -> dict[str, Any]:
    d = m.to_dict()
    requested = load.get("rate_rps")
    counts = d["counts"] | {"warmup": warmup_requests}
    return {
        "schema": SUMMARY_SCHEMA,
        "interrupted": interrupted,
        "run": run,
        "load": load
        | {
            "requested_rate_rps": requested,
            "scheduled_rate_rps": m.scheduled_rate_rps if requested else None,
            "achieved_rate_rps": m.achieved_rate_rps,
        },
        "counts": counts,
        "metrics": d["metrics"],
        "throughput": d["throughput"],
        "tokens": d["tokens"],
        "stalls": asdict(stall) | d["stalls"],
        "slo": d["slo"],
        "server": {
            "spec_decode": spec_decode,
            "spec_decode_note": spec_decode_note,
            "metrics_scraped": metrics_scraped,
        },
        "warnings": [*build_warnings(m, requested_rate_rps=requested, interrupted=interrupted), *hints],
    }
