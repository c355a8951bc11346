"""SGLang's summary lines -> `RunSummary`s: `python -m sglang.bench_serving --output-file F` without
`--output-details` (0.5.x, checked with 0.5.23; and the releases of late 2024, checked with 0.4.0, whose shorter
line is named as that layout), one JSON line per run, appended.

Read: `median_*_ms` and `p99_*_ms` of `ttft`, `tpot`, `itl` and `e2e_latency`, `output_throughput` and
`request_throughput` (over SGLang's own measured window), `completed`, and `accept_length` (the server's
`avg_spec_accept_length`, pooled over its verify steps) as the arm's stated acceptance. SGLang writes no count of
failed requests (failures: not in the file). Several lines at one load are that load's runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, ITL, TPOT, TTFT
from speculab.harness.design import LevelSpec
from speculab.harness.imports import sglang_bench
from speculab.harness.imports.fields import FileFields
from speculab.harness.imports.summaries.summary import (
    LENGTH,
    LENS_ONLY,
    POOLED,
    RunSummary,
    count,
    keeps_requests,
    lens_only,
    ms_aggregates,
    stated,
)

TOOL = sglang_bench.TOOL
# 0.4.0 (December 2024) wrote a shorter line: no `tag`, medians of TTFT, ITL and E2E, output tok/s, no p99s
LATE_2024 = "the layout of SGLang 0.4 (late 2024): medians only, no p99, TPOT or requests/s"
_LATENCIES = ((TTFT, "ttft"), (TPOT, "tpot"), (ITL, "itl"), (E2E, "e2e_latency"))  # the figures, SGLang's names


def detect(path: Path) -> bool:
    """An SGLang bench_serving file, per-request data or not."""
    return path.is_file() and sglang_bench.detect(path)


def _level(ff: FileFields, d: dict[str, Any], at: int) -> LevelSpec:
    """`request_rate` (inf: no pacing) and `max_concurrency`: a summary needs no send times, so a rate is a load here
    (SGLang draws its sends from a Poisson process, or gamma with `burstiness`)."""
    cap = d.get("max_concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    try:
        rate = float(d.get("request_rate", math.inf))
    except (TypeError, ValueError):
        ff.fail(f"line {at}: `request_rate` is {d.get('request_rate')!r}")
    if math.isfinite(rate) and rate > 0:
        burst = d.get("burstiness", 1.0)
        return LevelSpec("rate", rate, ("operating",), "poisson" if burst in (None, 1, 1.0) else "gamma", cap)
    if cap is not None:
        return LevelSpec("concurrency", cap, ("low", "operating"))
    # every request at once: the load is how many there were
    return LevelSpec("concurrency", count(d.get("completed")) or 1, ("operating",))


def read(path: Path) -> tuple[RunSummary, ...]:
    """Every line of the file, in order; a load's lines numbered as its runs 1, 2, ..."""
    ff = FileFields(path, sglang_bench.READ_AS)
    lines = [(n, ln) for n, ln in enumerate(ff.text().splitlines(), 1) if ln.strip()]
    if not lines:
        ff.fail("the file is empty (no run)")
    out: list[RunSummary] = []
    for at, text in lines:
        d = ff.mapping(ff.json(text, f"line {at}: "), f"line {at}")
        level = _level(ff, d, at)
        run = 1 + sum(1 for r in out if r.level.key == level.key)
        out.append(
            RunSummary(
                path=path,
                tool=TOOL,
                level=level,
                aggregates=ms_aggregates(d, _LATENCIES),
                completed=count(d.get("completed")),
                failed=None,
                per_request=keeps_requests(d),
                run=run,
                info={"line": at}
                | {k: d[k] for k in ("backend", "dataset_name", "tag") if d.get(k) is not None}
                | ({"layout": LATE_2024} if "tag" not in d and "p99_ttft_ms" not in d else {})
                | ({"layout": LENS_ONLY} if lens_only(d) else {}),
                # the server's avg_spec_accept_length (/server_info), pooled over its verify steps
                acceptance=stated(LENGTH, d.get("accept_length"), POOLED, "accept_length"),
            )
        )
    return tuple(out)
