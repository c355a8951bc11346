"""draftbench's sweep results -> `RunSummary`s: the JSON `sweep.py` writes (alexziskind1/draftbench: `results/*.json`),
one row per target × draft (a `null` draft is the target's baseline), every row a llama-server run of the same
prompts sent one at a time (`bench.py`: concurrency 1). Rows are split into arms by --a-row / --b-row.

Read: TPOT median as 1 / `median_tps` (draftbench's tps is each request's (completion tokens - 1) / (time after the
first token), so its median is the median request's 1 / TPOT; exact for an odd count of requests, between the two
middle ones' otherwise); `acceptance_rate`, llama-server's last logged "draft acceptance rate" (sweep.py reads the
last such line of the server's log: that of the last request, accepted / drafted). `mean_tps`, `mean_ttft` and
`mean_total_time` are means, which no run-level figure is: kept as the row's information, not compared. A row with
`error` (its server did not start) holds no run and is skipped (its number still counts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import TPOT
from speculab.harness.design import LevelSpec
from speculab.harness.imports.aggregates.marks import has_keys, head
from speculab.harness.imports.fields import FileFields, obj
from speculab.harness.imports.summaries.summary import (
    LAST_REQUEST,
    RATE,
    Aggregates,
    Row,
    RunSummary,
    StatedAcceptance,
    row_value,
    seconds,
)

TOOL = "draftbench"
READ_AS = "a draftbench sweep result (sweep.py's results JSON)"
# sweep.py's first keys, then its rows' (the first row's are in the head)
_MARKS = ("hardware", "backend", "model_family", "results", "target", "draft", "mean_tps")
_CONFIG = ("target", "draft")
_MEDIAN_TPOT = next(r for r in TPOT.run_figures if r.statistic == "median")


def detect(path: Path) -> bool:
    text = head(path)
    return text.startswith("{") and has_keys(text, _MARKS)


def _run(ff: FileFields, d: dict[str, Any], row: dict[str, Any], index: int) -> RunSummary:
    at = f"results[{index - 1}]."
    tps = seconds(row.get("median_tps"), 1.0)
    rate = row.get("acceptance_rate")
    stated: tuple[StatedAcceptance, ...] = ()
    if row.get("draft") is not None and rate is not None:
        value = ff.number(rate, f"{at}acceptance_rate")
        stated = (StatedAcceptance(RATE, value, LAST_REQUEST, "acceptance_rate"),)
    family = str(d.get("model_family") or "")
    return RunSummary(
        path=ff.path,
        tool=TOOL,
        level=LevelSpec("concurrency", 1, ("operating",)),  # bench.py sends its prompts one at a time
        aggregates=Aggregates({_MEDIAN_TPOT.name: 1.0 / tps if tps else None}),
        completed=None,
        failed=None,
        model=f"{family} {row.get('target')}".strip() if row.get("target") else None,
        info={k: d[k] for k in ("name", "hardware", "backend", "timestamp") if d.get(k) is not None}
        | {k: row[k] for k in ("mean_tps", "mean_ttft", "mean_total_time") if row.get(k) is not None},
        acceptance=stated,
        row=Row(index, {k: row_value(row.get(k)) for k in _CONFIG}, _CONFIG),
    )


def read(path: Path) -> tuple[RunSummary, ...]:
    """Every row that holds a run, in file order (each numbered by its place in `results`)."""
    ff = FileFields(path, READ_AS)
    d = ff.mapping(ff.json(ff.text()), "")
    rows = d.get("results")
    if not isinstance(rows, list):
        ff.fail("no `results` list")
    runs = tuple(
        _run(ff, d, ff.mapping(r, f"results[{i}]"), i + 1) for i, r in enumerate(rows) if "error" not in obj(r)
    )
    if not runs:
        ff.fail("no row of `results` holds a run (each is empty or an `error`)")
    return runs
