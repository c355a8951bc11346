"""`RunSummary`: one run as a summary-only file states it (its tool's own aggregates, in seconds and per second),
and `Aggregates`, those figures by the figures table's names (`analysis.figures.RUN_FIGURES`, the closed set a reader
may fill); what every summary reader builds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import MEDIAN, OUTPUT_TOK_S, P99, REQUEST_RPS, RUN_FIGURES, Figure
from speculab.harness.design import LevelSpec

# the run-level figures' names: the only keys an `Aggregates` holds
_NAMES = frozenset(r.name for r in RUN_FIGURES)


@dataclass(frozen=True, slots=True)
class Aggregates:
    """A run's figures as its tool computed them, by run-level figure name (`tpot_median_s`; `output_tok_s`: output
    tokens per second over the tool's own measured window, `request_rps`: completed requests per second over it);
    None or absent where the file does not hold one (never filled in)."""

    values: Mapping[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a reader's key outside the table is a typo that would silently never be compared
        if unknown := set(self.values) - _NAMES:
            raise ValueError(f"not run-level figures of the figures table: {sorted(unknown)}")

    def get(self, name: str) -> float | None:
        return self.values.get(name)


# how a tool weighs the acceptance it states (`StatedAcceptance.weighting`), as that tool defines it: the mean of each
# request's own figure, one figure pooled over every step or draft of the run (or of the server's life), or the one
# figure of the last request the tool saw
PER_REQUEST_MEAN, POOLED, LAST_REQUEST = "per_request_mean", "pooled", "last_request"
# what the acceptance is: a rate (accepted draft tokens / drafted, 0..1) or a length (tokens per verify step, >= 1)
RATE, LENGTH = "rate", "length"


@dataclass(frozen=True, slots=True)
class StatedAcceptance:
    """An acceptance figure a result file states, as its tool computed it (never recomputed here): what it is
    (`RATE` or `LENGTH`), its value, how the tool weighs it, and where in the file it is (`source`, the file's own
    key path, e.g. `decoding_stats.acceptance_length_percentiles.average`)."""

    kind: str
    value: float
    weighting: str
    source: str

    def __post_init__(self) -> None:
        # a reader's slip here would be worded wrongly in every report: refuse it where it is made
        if self.kind not in (RATE, LENGTH) or self.weighting not in (PER_REQUEST_MEAN, POOLED, LAST_REQUEST):
            raise ValueError(f"not an acceptance kind and weighting: {self.kind!r}, {self.weighting!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "weighting": self.weighting, "source": self.source}


@dataclass(frozen=True, slots=True)
class Row:
    """Where a run is in a file that holds several configurations (a baseline row and speculative rows, one per
    load or dataset): its 1-based place among the file's rows, and its own fields by the file's names (strings, a
    missing value "none"), of which `config` names those that tell one configuration from another (the load's
    field, e.g. InferenceX's `conc`, is among `fields` but not `config`: rows at several loads are one arm)."""

    index: int
    fields: Mapping[str, str]
    config: tuple[str, ...]

    @property
    def configuration(self) -> tuple[tuple[str, str], ...]:
        """The row's configuration: its `config` fields, in order."""
        return tuple((k, self.fields.get(k, "none")) for k in self.config)


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
    # the acceptance the file states for this run (a rate, a length or both; none for a baseline or a file that
    # states none): shown per arm, compared by nothing
    acceptance: tuple[StatedAcceptance, ...] = ()
    # its row, where the file holds several configurations (split into arms by --a-row / --b-row: summaries.rows)
    row: Row | None = None

    @property
    def name(self) -> str:
        return self.label or self.path.name


def stated(kind: str, v: Any, weighting: str, source: str, scale: float = 1.0) -> tuple[StatedAcceptance, ...]:
    """The acceptance a file states at key `source` (`scale`: to a fraction, e.g. 1e-2 for vLLM's percent), or ()
    where it holds none (absent, not a number, or not above 0: a run without speculation)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        return ()
    return (StatedAcceptance(kind, float(v) * scale, weighting, source),)


def row_value(v: Any) -> str:
    """A row's field as a selector matches it: a string, null as "none", 4.0 as "4"."""
    if v is None:
        return "none"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


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


# the per-request timing lists of vLLM's and SGLang's files (SGLang took vLLM's layout): a file holding any is a
# per-request file (read, or refused naming what it lacks, by harness.imports' readers), not a summary. vLLM 0.32
# keeps `latencies` and `queue_times` lists without --save-detailed, which alone pair nothing: not among them; nor are
# `input_lens`, `output_lens`, `generated_texts` and `errors`, which hold no time: a file that keeps them and no
# `ttfts` or `itls` is read at the run level, as a summary of the same tool is (issue 51: it was told to use
# --save-detailed while the plainer summary was read)
REQUEST_LISTS = ("start_times", "ttfts", "itls")
# what such a file keeps besides its aggregates (its side's note names the layout)
LENS_ONLY = "per-request token counts (`input_lens`, `output_lens`) without timings: read at the run level"


def ms_aggregates(d: Mapping[str, Any], latencies: tuple[tuple[Figure, str], ...]) -> Aggregates:
    """The aggregates of a vLLM-layout summary (SGLang's too): `median_X_ms` / `p99_X_ms` for each (figure, X) of
    `latencies` (the file's statistics are spelt as the table's: median, p99), `output_throughput` (tok/s) and
    `request_throughput` (req/s)."""
    figures = {
        r.name: seconds(d.get(f"{r.statistic}_{theirs}_ms"))
        for fig, theirs in latencies
        for r in fig.run_figures
        if r.statistic in (MEDIAN, P99)
    }
    figures[OUTPUT_TOK_S.name] = seconds(d.get("output_throughput"), 1.0)
    figures[REQUEST_RPS.name] = seconds(d.get("request_throughput"), 1.0)
    return Aggregates(figures)


def keeps_requests(d: Mapping[str, Any]) -> bool:
    """Whether a vLLM or SGLang result holds per-request timing lists (`REQUEST_LISTS`)."""
    return any(isinstance(d.get(k), list) and d.get(k) for k in REQUEST_LISTS)


def lens_only(d: Mapping[str, Any]) -> bool:
    """Whether a vLLM or SGLang result keeps per-request token counts but no timing (`LENS_ONLY`)."""
    return not keeps_requests(d) and any(isinstance(d.get(k), list) and d.get(k) for k in ("input_lens", "output_lens"))
