"""GuideLLM's summaries -> `RunSummary`s: a `benchmarks.json` whose per-request lists are empty (`--output-sampling 0`
in GuideLLM 0.2-0.3, checked with 0.3.1; the 0.4+ layout with its requests left out), each benchmark one run at its
load.

Read, of each benchmark's `metrics` (their `successful` distributions): `time_to_first_token_ms`,
`time_per_output_token_ms`, `inter_token_latency_ms` (median and `percentiles.p99`), `request_latency` (seconds,
E2E), the means of `output_tokens_per_second` and `requests_per_second` (GuideLLM's rates over its measured
window), and `request_totals` (`successful`; `errored` + `incomplete` failed; 0.2-0.3 keep it beside `metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, ITL, MEDIAN, OUTPUT_TOK_S, P99, REQUEST_RPS, TPOT, TTFT
from speculab.harness.imports import guidellm_benchmarks
from speculab.harness.imports.fields import FileFields, obj
from speculab.harness.imports.older import guidellm_early
from speculab.harness.imports.summaries.summary import Aggregates, RunSummary, count, seconds

TOOL = guidellm_benchmarks.TOOL
# the figure -> GuideLLM's metric and its scale to seconds
_LATENCIES = (
    (TTFT, "time_to_first_token_ms", 1e-3),
    (TPOT, "time_per_output_token_ms", 1e-3),
    (ITL, "inter_token_latency_ms", 1e-3),
    (E2E, "request_latency", 1.0),
)


def detect(path: Path) -> bool:
    """A GuideLLM benchmarks file (JSON), per-request data or not."""
    return path.is_file() and path.suffix == ".json" and guidellm_benchmarks.detect(path)


def _successful(metrics: Mapping[str, Any], name: str) -> dict[str, Any]:
    return obj(obj(metrics.get(name)).get("successful"))


def _aggregates(metrics: Mapping[str, Any]) -> Aggregates:
    figures: dict[str, float | None] = {}
    for fig, theirs, scale in _LATENCIES:
        s = _successful(metrics, theirs)
        stated = {MEDIAN: s.get("median"), P99: obj(s.get("percentiles")).get("p99")}
        figures |= {r.name: seconds(stated[r.statistic], scale) for r in fig.run_figures}
    figures[OUTPUT_TOK_S.name] = seconds(_successful(metrics, "output_tokens_per_second").get("mean"), 1.0)
    figures[REQUEST_RPS.name] = seconds(_successful(metrics, "requests_per_second").get("mean"), 1.0)
    return Aggregates(figures)


def _has_requests(b: Mapping[str, Any]) -> bool:
    reqs = obj(b.get("requests"))
    return any(isinstance(reqs.get(s), list) and reqs.get(s) for s in ("successful", "errored", "incomplete"))


def read(path: Path) -> tuple[RunSummary, ...]:
    """Every benchmark of the file, in order; a load's benchmarks numbered as its runs 1, 2, ..."""
    ff = FileFields(path, guidellm_benchmarks.READ_AS)
    d = ff.mapping(ff.json(ff.text()), "the file")
    benchmarks = d.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        ff.fail("no `benchmarks`" if benchmarks is None else "`benchmarks` is not a non-empty list")
    version = obj(d.get("metadata")).get("guidellm_version")
    out: list[RunSummary] = []
    for i, b in enumerate(benchmarks):
        b = ff.mapping(b, f"benchmarks[{i}]")
        metrics = obj(b.get("metrics"))
        totals = obj(b.get("request_totals") or metrics.get("request_totals"))
        done, errored, incomplete = (count(totals.get(k)) for k in ("successful", "errored", "incomplete"))
        failed = None if errored is None and incomplete is None else (errored or 0) + (incomplete or 0)
        level, _ = guidellm_benchmarks.offered_load(ff, b, count(totals.get("total")) or done or 1)
        run = 1 + sum(1 for r in out if r.level.key == level.key)
        out.append(
            RunSummary(
                path=path,
                tool=TOOL,
                level=level,
                aggregates=_aggregates(metrics),
                completed=done,
                failed=failed,
                per_request=_has_requests(b),
                version=str(version) if version else None,
                model=None,
                run=run,
                info={"benchmark": i, "strategy": guidellm_benchmarks.strategy_label(b)}
                | ({"layout": guidellm_early.LAYOUT} if not version and guidellm_early.is_early(b) else {}),
            )
        )
    return tuple(out)
