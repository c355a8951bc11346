"""AIPerf's early per-record layout (described as 0.1.x by users' files; not checked against a release: AIPerf 0.1.1,
the only 0.1 on the package index, writes no profile_export.jsonl, and the first commit that does, 5e0b1e17 of
2025-10-09, already writes `request_start_ns` and `benchmark_phase`): each record's send time as `timestamp_ns` and its
phase as `credit_phase`, where later releases write `request_start_ns` and `benchmark_phase`; a cancelled request
(`was_cancelled`) may come first. Records are turned into the later names; nothing else is filled in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LAYOUT = "AIPerf's early layout (`timestamp_ns`, `credit_phase`)"
_RENAMED = (("timestamp_ns", "request_start_ns"), ("credit_phase", "benchmark_phase"))


def is_early(rec: Mapping[str, Any]) -> bool:
    meta = rec.get("metadata")
    return isinstance(meta, dict) and "request_start_ns" not in meta and "timestamp_ns" in meta


def upgrade_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """An early record under the later names (a later one unchanged)."""
    if not is_early(rec):
        return dict(rec)
    meta = dict(rec["metadata"])
    for old, new in _RENAMED:
        if old in meta and new not in meta:
            meta[new] = meta.pop(old)
    return dict(rec) | {"metadata": meta}


# the error AIPerf records for a request it cancelled itself (its worker, `--request-cancellation-rate`: code 499,
# "Client Closed Request"): 0.1.x files keep such a record with this error and no metrics
CANCELLATION = "RequestCancellationError"


def cancelled(rec: Mapping[str, Any]) -> bool:
    """Whether AIPerf cancelled the request (at the benchmark's end, a first request cut off, or by
    `--request-cancellation-rate`): `was_cancelled`, or its cancellation error."""
    meta, error = rec.get("metadata"), rec.get("error")
    return (isinstance(meta, dict) and meta.get("was_cancelled") is True) or (
        isinstance(error, dict) and error.get("type") == CANCELLATION
    )
