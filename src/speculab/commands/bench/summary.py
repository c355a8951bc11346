"""summary.json of a bench run: every number (seconds), and the warnings a reader must see first (records: the
report words them), among them the request options a server rejected with the flag that stops sending each.

summary.json keys that other commands rely on (issue 2): metrics.{ttft_s,tpot_s,e2e_s,chunk_gap_s,itl_s}.
{mean,p50,p90,p99}, metrics.tokens_per_chunk.mean, counts.{sent,ok,error}, throughput.output_tok_s and
server.spec_decode.{acceptance_rate,acceptance_length} when the server has those counters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from speculab.harness.analysis.metrics import RunMetrics, StallConfig
from speculab.harness.load.client_health import ClientHealth
from speculab.harness.records import FORCED
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.workload import validity

# /2: `warnings` are records (kind, subject, load, fields), not sentences (docs/results.md)
SUMMARY_SCHEMA = "speculab.bench.summary/2"


def _client_warnings(client: ClientHealth, m: RunMetrics, load: dict[str, Any]) -> list[ReportWarning]:
    # Dispatch lag only where nothing else makes requests wait: an open loop without a concurrency cap (with a cap,
    # sent - scheduled is mostly the wait for a free slot, which is the load design, not the client falling behind).
    uncapped_open = load.get("mode") in ("open", "trace") and load.get("concurrency") is None
    q99 = m.distributions["queue_s"].p99 if uncapped_open else None
    in_flight = float(load["concurrency"]) if load.get("mode") == "closed" and load.get("concurrency") else None
    return client.warnings(
        dispatch_lag_p99_s=q99 if q99 is not None and math.isfinite(q99) else None, in_flight=in_flight
    )


def build_warnings(m: RunMetrics, *, requested_rate_rps: float | None, interrupted: bool) -> list[ReportWarning]:
    """Things a reader must know before trusting the numbers (the report words them)."""
    w: list[ReportWarning] = []
    if interrupted:
        w.append(ReportWarning(WarningKind.BENCH_INTERRUPTED))
    # The client is judged against the schedule it drew, not the nominal rate: a seeded Poisson schedule of 200
    # requests is itself ~7% off the nominal rate by chance, which is no fault of the client or the server.
    sched = m.scheduled_rate_rps
    if requested_rate_rps and sched is not None and m.achieved_rate_rps is not None:
        rates = {"scheduled_rps": sched, "requested_rps": requested_rate_rps}
        if m.achieved_rate_rps < 0.95 * sched:
            w.append(_warning(WarningKind.OFFERED_LOAD_NOT_ACHIEVED, achieved_rps=m.achieved_rate_rps, **rates))
        elif abs(sched / requested_rate_rps - 1) > 0.05:
            w.append(_warning(WarningKind.SCHEDULE_OFF_RATE, requests=m.sent, **rates))
    q99 = m.distributions["queue_s"].p99
    if math.isfinite(q99) and q99 > 0.01:
        w.append(_warning(WarningKind.CLIENT_QUEUE_TIME, p99_s=q99))
    if n_unmeasured := m.token_count_sources.get("one_per_chunk"):
        w.append(_warning(WarningKind.CHUNK_TOKENS_UNKNOWN, count=n_unmeasured))
    if m.output_tokens_unknown:
        w.append(_warning(WarningKind.OUTPUT_TOKENS_UNKNOWN, count=m.output_tokens_unknown))
    n_connect = m.errors_by_category.get("connect", 0)
    if n_connect and m.ok:
        # the preflight reached the server and some requests succeeded: refusals later mean it went away
        w.append(_warning(WarningKind.CONNECT_LOST, connect=n_connect, ok=m.ok))
    if m.error:
        w.append(_warning(WarningKind.REQUESTS_FAILED, failed=m.error, sent=m.sent, by_category=m.errors_by_category))
    return w


def validity_warnings(
    workload: Mapping[str, Any],
    ignore_eos: bool,
    spec_decode: Mapping[str, Any] | None,
    said: Sequence[str],
    outputs: Sequence[tuple[int | None, str | None]],
) -> list[ReportWarning]:
    """Why this run's acceptance is not the user's traffic's (`workload.validity`'s rules), said first: the prompts
    speculab synthesised (the manifest's workload), ignore_eos, forced acceptance (what the server said it runs,
    `said`, and what the engine reported with its acceptance) and outputs too short for its acceptance length and
    the k its per-position rates show (k unknown without them: no rule)."""
    spec = str(workload.get("spec") or "")
    synthesised = validity.synthesised_prompts(spec, workload.get("synthesised"), int(workload.get("n_items") or 0))
    kind = "synthetic" if spec.startswith(validity.SYNTHETIC_SOURCE) else "trace"
    sd = spec_decode or {}
    reported = list(sd.get("forced_by") or ([sd.get("source")] if sd.get("provenance") == FORCED else []))
    k = len(sd.get("per_position") or ())
    found = (
        validity.synthetic_prompts(synthesised, workload.get("n_items"), kind),
        validity.ignored_eos(ignore_eos),
        validity.forced(said, reported),
        validity.short_outputs(k, outputs, sd.get("acceptance_length")),
    )
    return [w for w in found if w is not None]


def _warning(kind: WarningKind, **fields: Any) -> ReportWarning:
    return ReportWarning(kind, fields=fields)


def build_summary(
    m: RunMetrics,
    *,
    run: dict[str, Any],
    load: dict[str, Any],
    stall: StallConfig,
    warmup_requests: int,
    spec_decode: dict[str, Any] | None,
    spec_decode_note: ReportWarning | None,
    metrics_scraped: bool,
    interrupted: bool,
    hints: Sequence[ReportWarning] = (),
    skipped_turns: int = 0,
    client: ClientHealth | None = None,
    validity: Sequence[ReportWarning] = (),
) -> dict[str, Any]:
    d = m.to_dict()
    requested = load.get("rate_rps")
    # skipped_turns: conversation turns never sent, because an earlier turn of theirs failed (or time ran out)
    counts = d["counts"] | {"warmup": warmup_requests, "skipped_turns": skipped_turns}
    return {
        "schema": SUMMARY_SCHEMA,
        "interrupted": interrupted,
        "run": run,
        "load": load
        | {
            "requested_rate_rps": requested,
            # a rate's or a trace's schedule (what the client meant to send), next to what it sent
            "scheduled_rate_rps": m.scheduled_rate_rps if requested or load.get("mode") == "trace" else None,
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
            # why spec_decode is null: a record the report words (/2 before it: the sentence, read back as a note)
            "spec_decode_note": spec_decode_note.to_dict() if spec_decode_note is not None else None,
            "metrics_scraped": metrics_scraped,
        },
        # the client process over the measured phase: CPU share of one core, event-loop lag (load.client_health)
        "client": client.to_dict() if client is not None else None,
        # records with a kind (harness.results.warnings); the report words them. /1 wrote the sentences.
        "warnings": [
            w.to_dict()
            for w in (
                *validity,  # why acceptance is not the user's traffic's: first (`validity_warnings`)
                *build_warnings(m, requested_rate_rps=requested, interrupted=interrupted),
                *(_client_warnings(client, m, load) if client is not None else ()),
                *hints,
            )
        ],
    }
