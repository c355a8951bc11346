"""LLMPerf's summaries -> `RunSummary`s: `token_benchmark_ray.py --results-dir D`'s `*_summary.json` read on its own
(what users keep; its `*_individual_responses.json` beside it is read per request by `llmperf_responses`), one run at
its `num_concurrent_requests`.

Read: `results_ttft_s_quantiles_p50`/`_p99` and `results_end_to_end_latency_s_quantiles_p50`/`_p99` (seconds),
`results_mean_output_throughput_token_per_s` (completed requests' output tokens over LLMPerf's own measured time),
`results_num_completed_requests_per_min` / 60 (requests/s over it), `results_num_completed_requests` and
`results_number_errors`. TPOT and ITL are not in the file: LLMPerf's `inter_token_latency_s` is a per-request mean
that counts the first token, neither figure (left absent, as the per-request reader leaves it unread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, MEDIAN, OUTPUT_TOK_S, P99, REQUEST_RPS, TTFT
from speculab.harness.imports import llmperf_responses
from speculab.harness.imports.fields import FileFields
from speculab.harness.imports.summaries.summary import Aggregates, RunSummary, count, seconds

TOOL = llmperf_responses.TOOL
READ_AS = "an LLMPerf summary file"
# the figure -> LLMPerf's metric (its quantiles `_quantiles_p50` and `_quantiles_p99`, in seconds)
_LATENCIES = ((TTFT, "results_ttft_s"), (E2E, "results_end_to_end_latency_s"))
_QUANTILE = {MEDIAN: "p50", P99: "p99"}


def detect(path: Path) -> bool:
    """An LLMPerf summary: a JSON object naming LLMPerf's load and its `results_` figures (`num_concurrent_requests`,
    `results_num_completed_requests`)."""
    if not path.is_file() or path.suffix != ".json":
        return False
    try:
        with path.open("rb") as f:
            head = f.read(16384).decode("utf-8", "replace").lstrip()
    except OSError:
        return False
    return head.startswith("{") and all(f'"{k}"' in head for k in llmperf_responses.SUMMARY_MARKS.keys)


def _aggregates(s: dict[str, Any]) -> Aggregates:
    figures = {
        r.name: seconds(s.get(f"{theirs}_quantiles_{_QUANTILE[r.statistic]}"), 1.0)
        for fig, theirs in _LATENCIES
        for r in fig.run_figures
        if r.statistic in _QUANTILE
    }
    figures[OUTPUT_TOK_S.name] = seconds(s.get("results_mean_output_throughput_token_per_s"), 1.0)
    per_min = seconds(s.get("results_num_completed_requests_per_min"), 1.0)
    figures[REQUEST_RPS.name] = per_min / 60.0 if per_min is not None else None
    return Aggregates(figures)


def read(path: Path) -> tuple[RunSummary, ...]:
    """The file's one run; it keeps its requests where its `*_individual_responses.json` is beside it."""
    ff = FileFields(path, READ_AS)
    s = ff.mapping(ff.json(ff.text()), "")
    responses = path.with_name(path.name.removesuffix("_summary.json") + llmperf_responses.SUFFIX)
    version = s.get("version")
    return (
        RunSummary(
            path=path,
            tool=TOOL,
            level=llmperf_responses.offered_load(ff, s),
            aggregates=_aggregates(s),
            completed=count(s.get("results_num_completed_requests")),
            failed=count(s.get("results_number_errors")),
            per_request=responses.is_file(),
            version=str(version) if version else None,
            model=str(s["model"]) if s.get("model") else None,
            info={k: s[k] for k in ("llmperf_commit", "timestamp") if s.get(k) is not None},
        ),
    )
