"""SpecForge's `benchmarks/bench_model_speedup.py` results -> `RunSummary`s: its `--output` JSONL, one line per
config (`batch_size,steps,topk,num_draft_tokens`) and benchmark (mtbench, gsm8k, ...), appended; `steps` 0 is the
baseline (no speculation). Lines are split into arms by --a-row / --b-row (e.g. `steps=0,benchmark=gsm8k`).

Read: `throughput` (completion tokens / `duration`, over the script's own window: output tok/s), the load
(`batch_size`: the client's semaphore, a closed loop), and `acc_length`, SGLang's `avg_spec_accept_length` from
`/get_server_info` (accepted tokens per verify step, pooled over the server's steps since its cache was last flushed:
the script flushes it after every benchmark). A baseline line's `acc_length` is the 1.0 the script writes, not a
measurement: not stated as acceptance. SpecForge writes no latency, no request count and no model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import OUTPUT_TOK_S
from speculab.harness.design import LevelSpec
from speculab.harness.imports.aggregates.marks import has_keys, head
from speculab.harness.imports.fields import FileFields
from speculab.harness.imports.summaries.summary import (
    LENGTH,
    POOLED,
    Aggregates,
    Row,
    RunSummary,
    StatedAcceptance,
    row_value,
    seconds,
)

TOOL = "SpecForge bench_model_speedup"
READ_AS = "a SpecForge bench_model_speedup result (its --output JSONL)"
_MARKS = ("batch_size", "steps", "topk", "num_draft_tokens", "acc_length", "benchmark")
_CONFIG = ("steps", "topk", "num_draft_tokens", "benchmark")
LOAD_FIELD = "batch_size"


def detect(path: Path) -> bool:
    text = head(path)
    return text.startswith("{") and has_keys(text.split("\n", 1)[0], _MARKS)


def _run(ff: FileFields, d: dict[str, Any], at: int, index: int) -> RunSummary:
    where = f"line {at}: "
    batch = ff.positive(d.get(LOAD_FIELD), LOAD_FIELD, where)
    steps = ff.number(d.get("steps"), "steps", where)
    stated: tuple[StatedAcceptance, ...] = ()
    if steps > 0 and d.get("acc_length") is not None:
        length = ff.number(d.get("acc_length"), "acc_length", where)
        stated = (StatedAcceptance(LENGTH, length, POOLED, "acc_length"),)
    return RunSummary(
        path=ff.path,
        tool=TOOL,
        level=LevelSpec("concurrency", batch, ("operating",)),
        aggregates=Aggregates({OUTPUT_TOK_S.name: seconds(d.get("throughput"), 1.0)}),
        completed=None,
        failed=None,
        info={"line": at} | {k: d[k] for k in ("duration", "completion_tokens") if d.get(k) is not None},
        acceptance=stated,
        row=Row(index, {k: row_value(d.get(k)) for k in (*_CONFIG, LOAD_FIELD)}, _CONFIG),
    )


def read(path: Path) -> tuple[RunSummary, ...]:
    """Every line, in order (each a row, numbered 1, 2, ... as the lines that hold one)."""
    ff = FileFields(path, READ_AS)
    lines = [(n, ln) for n, ln in enumerate(ff.text().splitlines(), 1) if ln.strip()]
    if not lines:
        ff.fail("the file is empty (no line)")
    return tuple(
        _run(ff, ff.mapping(ff.json(text, f"line {at}: "), "", f"line {at}: "), at, i + 1)
        for i, (at, text) in enumerate(lines)
    )
