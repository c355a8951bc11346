"""A run on disk: manifest.json (what was run), requests.jsonl (one record per finished request, appended and
flushed as each finishes, so a crash loses nothing that finished) and summary.json (every number, seconds).

summary.json keys that other commands rely on (issue 2): metrics.{ttft_s,tpot_s,e2e_s,chunk_gap_s,itl_s}.
{mean,p50,p90,p99}, metrics.tokens_per_chunk.mean, counts.{sent,ok,error}, throughput.output_tok_s and
server.spec_decode.{acceptance_rate,acceptance_length} when the server has those counters.
"""

from __future__ import annotations

import math
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from speculab import __version__
from speculab.harness.analysis.metrics import RunMetrics, StallConfig
from speculab.harness.records import RequestRecord
from speculab.harness.results.output_dir import check_output_dir
from speculab.harness.results.requests_file import RequestsFile, write_error
from speculab.harness.results.strict_json import write_json_atomic

SUMMARY_SCHEMA = "speculab.bench.summary/1"
MANIFEST_SCHEMA = "speculab.bench.manifest/1"
MANIFEST, REQUESTS, SUMMARY = "manifest.json", "requests.jsonl", "summary.json"
_SECRET_FLAGS = ("--api-key",)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
    """The output directory of one bench (or diagnose) run. Refuses a directory that already holds a run."""

    def __init__(self, path: Path):
        self.path = path
        self._requests: RequestsFile | None = None

    @staticmethod
    def check(path: Path) -> None:
        """Fail before any load if the directory cannot be used."""
        check_output_dir(path, (MANIFEST, REQUESTS, SUMMARY))

    def create(self) -> RunDir:
        self.check(self.path)
        self._requests = RequestsFile(self.path / REQUESTS)
        return self

    def write_json(self, name: str, obj: dict[str, Any]) -> None:
        """Atomic: write a temporary file, then rename over the target."""
        try:
            write_json_atomic(self.path / name, obj)
        except OSError as e:
            raise write_error(self.path / name, e) from None

    def append(self, rec: RequestRecord) -> None:
        assert self._requests is not None, "create() first"
        self._requests.append(rec)

    def close(self) -> None:
        if self._requests is not None:
            self._requests.close()
            self._requests = None


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
