"""`RunSummary`: one run as a summary-only file states it (its tool's own aggregates, in seconds and per second),
and `Aggregates`, the closed set of figures read; what every summary reader builds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculab.harness.design import LevelSpec


@dataclass(frozen=True, slots=True)
class Aggregates:
    """A run's figures as its tool computed them; None where the file does not hold one (never filled in)."""

    ttft_median_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_median_s: float | None = None
    tpot_p99_s: float | None = None
    itl_median_s: float | None = None
    itl_p99_s: float | None = None
    e2e_median_s: float | None = None
    e2e_p99_s: float | None = None
    output_tok_s: float | None = None  # output tokens per second over the tool's own measured window
    request_rps: float | None = None  # completed requests per second over that window

    def get(self, name: str) -> float | None:
        return getattr(self, name)


AGGREGATES = tuple(Aggregates.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run at one load: its tool's aggregates and counts, and where they came from."""

    path: Path
    tool: str  # e.g. "vllm bench serve"
    level: LevelSpec
    aggregates: Aggregates
    completed: int | None  # requests that succeeded, as the file counts them
    failed: int | None  # requests that failed (None: the file does not say)
    # the file also keeps per-request data (read per request by harness.imports' readers when both sides have it)
    per_request: bool = False
    version: str | None = None  # the tool's version as the file states it
    model: str | None = None  # the model the file names
    label: str = ""  # how the report names the side (the file's name, a sweep's setting)
    run: int = 1  # which run at its load (a sweep's run=N.json: N + 1; a file's several lines at one load)
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.label or self.path.name


def seconds(v: Any, scale: float = 1e-3) -> float | None:
    """A finite, non-negative figure of the file scaled to seconds (ms: 1e-3); None where absent or not a number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return float(v) * scale


def count(v: Any) -> int | None:
    """A request count of the file; None where absent or not a count."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


# the per-request lists of vLLM's and SGLang's files (SGLang took vLLM's layout): a file holding any is a per-request
# file (read, or refused naming what it lacks, by harness.imports' readers), not a summary. vLLM 0.32 keeps
# `latencies` and `queue_times` lists without --save-detailed, which alone pair nothing: not among them
REQUEST_LISTS = ("start_times", "ttfts", "itls", "input_lens", "output_lens", "generated_texts", "errors")


def ms_aggregates(d: Mapping[str, Any], latencies: tuple[tuple[str, str], ...]) -> Aggregates:
    """The aggregates of a vLLM-layout summary (SGLang's too): `median_X_ms` / `p99_X_ms` for each (ours, X) of
    `latencies`, `output_throughput` (tok/s) and `request_throughput` (req/s)."""
    figures = {
        f"{ours}_{stat}_s": seconds(d.get(f"{stat}_{theirs}_ms"))
        for ours, theirs in latencies
        for stat in ("median", "p99")
    }
    return Aggregates(
        **figures,
        output_tok_s=seconds(d.get("output_throughput"), 1.0),
        request_rps=seconds(d.get("request_throughput"), 1.0),
    )


def keeps_requests(d: Mapping[str, Any]) -> bool:
    """Whether a vLLM or SGLang result holds per-request lists (`REQUEST_LISTS`)."""
    return any(isinstance(d.get(k), list) and d.get(k) for k in REQUEST_LISTS)
