"""TensorRT-LLM's `trtllm-bench` reports -> `RunSummary`s: the JSON of `trtllm-bench throughput --report_json F`
(`tensorrt_llm/bench/dataclasses/reporting.py`, `get_statistics_dict`): one run.

Read: `performance.request_latency_percentiles_ms` p50 and p99 (E2E), with a streaming run's
`streaming_metrics.ttft_percentiles` and `tpot_percentiles` (ms; its TPOT is each request's (last token - first
token) / (output tokens - 1)), `performance.system_output_throughput_tok_s` and `request_throughput_req_s` (over
its own window, first send to last completion), `request_info.num_requests`, `engine.version` and `engine.model`;
and with speculation, `decoding_stats`: `acceptance_length_percentiles.average` and
`draft_acceptance_rate_percentiles.average`, both means of each request's own figure (output tokens per decoding
iteration; accepted / (max draft length × iterations)), or the early-2025 releases' `acceptance_percentiles.average`
(each request's generated tokens per iteration, a length). trtllm-bench's p50 is its own (the value at
int(0.5 n) of the sorted requests), read as the median.

The report keeps no asked load (`--concurrency`): the load is the measured average concurrency
(`request_info.avg_num_concurrent_requests`, rounded), and says so. It counts no failed request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, MEDIAN, OUTPUT_TOK_S, P99, REQUEST_RPS, TPOT, TTFT, Figure
from speculab.harness.design import LevelSpec
from speculab.harness.imports.aggregates.marks import has_keys, head
from speculab.harness.imports.fields import FileFields, obj
from speculab.harness.imports.summaries.summary import (
    LENGTH,
    PER_REQUEST_MEAN,
    RATE,
    Aggregates,
    Row,
    RunSummary,
    StatedAcceptance,
    count,
    row_value,
    seconds,
)

TOOL = "trtllm-bench"
READ_AS = "a trtllm-bench report (--report_json)"
# reporting.py's first sections, in its order: `engine` (model, version), `machine`, `world_info`
_MARKS = ("engine", "world_info")
# the percentiles of a figure, where the report keeps them (ms), and its names of the two the table states
_PERCENTILES = ((E2E, "performance", "request_latency_percentiles_ms"),
                (TTFT, "streaming_metrics", "ttft_percentiles"),
                (TPOT, "streaming_metrics", "tpot_percentiles"))  # fmt: skip
_THEIRS = {MEDIAN: "p50", P99: "p99"}
# where the load was read from, the report keeping no asked one (the side's note words it)
MEASURED_LOAD = "request_info.avg_num_concurrent_requests"
# what tells one run's setup from another's (a row's fields, so that a directory of reports of several setups is split
# by --a-row / --b-row, never read as one arm's repeats): the engine's, the world's and the speculation's mode
_CONFIG = (("engine", "model"), ("engine", "backend"), ("decoding_stats", "mode"), ("world_info", "tp_size"),
           ("world_info", "pp_size"), ("world_info", "ep_size"), ("world_info", "max_batch_size"),
           ("world_info", "max_num_tokens"))  # fmt: skip
# the acceptance the report states with speculation, by its kind; the releases of early 2025 wrote one
# `acceptance_percentiles` instead, each request's generated tokens (the first aside) per decoding iteration: a
# length, though their console called it a rate
_ACCEPTANCE = (
    (LENGTH, "acceptance_length_percentiles"),
    (RATE, "draft_acceptance_rate_percentiles"),
    (LENGTH, "acceptance_percentiles"),
)


def detect(path: Path) -> bool:
    text = head(path)
    return text.startswith("{") and has_keys(text, _MARKS)


def _figures(d: dict[str, Any], fig: Figure, section: str, key: str) -> dict[str, float | None]:
    stats = obj(obj(d.get(section)).get(key))
    return {r.name: seconds(stats.get(_THEIRS[r.statistic])) for r in fig.run_figures if r.statistic in _THEIRS}


def _aggregates(d: dict[str, Any]) -> Aggregates:
    figures: dict[str, float | None] = {}
    for fig, section, key in _PERCENTILES:
        figures |= _figures(d, fig, section, key)
    perf = obj(d.get("performance"))
    figures[OUTPUT_TOK_S.name] = seconds(perf.get("system_output_throughput_tok_s"), 1.0)
    figures[REQUEST_RPS.name] = seconds(perf.get("request_throughput_req_s"), 1.0)
    return Aggregates(figures)


def _acceptance(ff: FileFields, d: dict[str, Any]) -> tuple[StatedAcceptance, ...]:
    decoding = obj(d.get("decoding_stats"))
    out = []
    for kind, key in _ACCEPTANCE:
        average = obj(decoding.get(key)).get("average")
        if average is not None:
            value = ff.number(average, f"decoding_stats.{key}.average")
            out.append(StatedAcceptance(kind, value, PER_REQUEST_MEAN, f"decoding_stats.{key}.average"))
    return tuple(out)


def _row(d: dict[str, Any]) -> Row:
    """The report's setup as a row, each field by its own name (`mode`: none without speculation)."""
    fields = {key: row_value(obj(d.get(section)).get(key)) for section, key in _CONFIG}
    return Row(1, fields, tuple(fields))


def read(path: Path) -> tuple[RunSummary, ...]:
    """The report's one run."""
    ff = FileFields(path, READ_AS)
    d = ff.mapping(ff.json(ff.text()), "")
    requests = ff.mapping(d.get("request_info"), "request_info")
    measured = ff.positive(requests.get("avg_num_concurrent_requests"), MEASURED_LOAD)
    engine = obj(d.get("engine"))
    mode = obj(d.get("decoding_stats")).get("mode")
    return (
        RunSummary(
            path=path,
            tool=TOOL,
            level=LevelSpec("concurrency", max(1, round(measured)), ("operating",)),
            aggregates=_aggregates(d),
            completed=count(requests.get("num_requests")),
            failed=None,
            version=str(engine["version"]) if engine.get("version") else None,
            model=str(engine["model"]) if engine.get("model") else None,
            info={"measured_load": MEASURED_LOAD, "backend": engine.get("backend"), "decoding_mode": mode},
            acceptance=_acceptance(ff, d),
            row=_row(d),
        ),
    )
