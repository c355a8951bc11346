"""InferenceX's aggregate results -> `RunSummary`s: the `agg_<result>.json` that its `utils/process_result.py`
writes from one `bench_serving` result (one run at one concurrency), and the `agg_<experiment>.json` that
`utils/collect_results.py` writes, a list of those (the published body of baseline, MTP and EAGLE-3 runs: one row
each, split into arms by --a-row / --b-row).

Two layouts, and the one before them: single-node (`"is_multinode": false`: `tp`, `pp`, `ep`, `dp_attention`),
multi-node disaggregated (`"is_multinode": true`: `prefill_*` and `decode_*` workers, `num_prefill_gpu`,
`num_decode_gpu`), and InferenceMAX's first layout (2025: no `spec_decoding`, `isl`, `osl`; an `mtp` key on MTP runs).

Read: `median_*` and `p99_*` of `ttft`, `tpot`, `itl` and `e2el` (vLLM's `*_ms` figures, which process_result.py
divides by 1000: seconds), output tok/s as `output_tput_per_gpu` times the GPUs process_result.py divided it by (the
node's `tp * pp * pcp_size`, or the decode GPUs of a disaggregated run: the bench's own `output_throughput`, over its
own window), the load (`conc`, a closed loop), the model. InferenceX keeps no count of requests, no requests/s and
no acceptance.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, ITL, MEDIAN, OUTPUT_TOK_S, P99, TPOT, TTFT
from speculab.harness.design import LevelSpec
from speculab.harness.imports.aggregates.marks import has_keys, head
from speculab.harness.imports.fields import FileFields
from speculab.harness.imports.summaries.summary import Aggregates, Row, RunSummary, row_value, seconds

TOOL = "InferenceX"
READ_AS = "an InferenceX aggregate result (process_result.py's agg_*.json)"
SINGLE_NODE = "single-node layout"
MULTI_NODE = "multi-node (disaggregated) layout"
FIRST = "InferenceMAX's first layout (2025)"
# what process_result.py writes in every layout, in its first lines: the marks of an InferenceX aggregate
_MARKS = ("hw", "conc", "model", "framework", "precision", "tput_per_gpu")
_LATENCIES = ((TTFT, "ttft"), (TPOT, "tpot"), (ITL, "itl"), (E2E, "e2el"))
# the fields that tell one configuration from another (those a row has), in process_result.py's order; `conc` is
# the load, a row's field but not its configuration (an arm's rows at several concurrencies are its loads)
_CONFIG = (
    "hw", "image", "model", "framework", "precision", "spec_decoding", "mtp", "disagg", "isl", "osl",
    "is_multinode", "tp", "pp", "dcp_size", "pcp_size", "ep", "dp_attention",
    "prefill_hw", "decode_hw", "prefill_tp", "prefill_pp", "prefill_ep", "prefill_dp_attention",
    "prefill_num_workers", "decode_tp", "decode_pp", "decode_ep", "decode_dp_attention", "decode_num_workers",
    "num_prefill_gpu", "num_decode_gpu", "recipe_fingerprint",
)  # fmt: skip
LOAD_FIELD = "conc"


def detect(path: Path) -> bool:
    """An aggregate of process_result.py (an object), or collect_results.py's list of them."""
    text = head(path)
    return text[:1] in ("{", "[") and has_keys(text, _MARKS)


def layout(d: dict[str, Any]) -> str:
    if d.get("is_multinode") is True or "num_decode_gpu" in d:
        return MULTI_NODE
    return SINGLE_NODE if "spec_decoding" in d else FIRST


def _gpus(d: dict[str, Any]) -> float | None:
    """The GPUs process_result.py divided the run's output throughput by (None where the file says too little)."""
    if layout(d) == MULTI_NODE:
        decode, prefill = (d.get(k) for k in ("num_decode_gpu", "num_prefill_gpu"))
        if _gpu_count(decode) and decode > 0:
            return decode
        return decode + prefill if _gpu_count(decode) and _gpu_count(prefill) else None
    sizes = [d.get(k, 1) for k in ("tp", "pp", "pcp_size")]
    return math.prod(sizes) if all(_gpu_count(s) and s > 0 for s in sizes) else None


def _gpu_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _aggregates(d: dict[str, Any]) -> Aggregates:
    figures = {
        r.name: seconds(d.get(f"{r.statistic}_{theirs}"), 1.0)
        for fig, theirs in _LATENCIES
        for r in fig.run_figures
        if r.statistic in (MEDIAN, P99)
    }
    per_gpu, gpus = seconds(d.get("output_tput_per_gpu"), 1.0), _gpus(d)
    figures[OUTPUT_TOK_S.name] = per_gpu * gpus if per_gpu is not None and gpus is not None else None
    return Aggregates(figures)


def _run(ff: FileFields, d: dict[str, Any], index: int | None) -> RunSummary:
    at = f"[{index - 1}]." if index is not None else ""
    conc = ff.positive(d.get(LOAD_FIELD), f"{at}{LOAD_FIELD}")
    config = tuple(k for k in _CONFIG if k in d)
    fields = {k: row_value(d[k]) for k in (*config, LOAD_FIELD)}
    return RunSummary(
        path=ff.path,
        tool=TOOL,
        level=LevelSpec("concurrency", conc, ("operating",)),
        aggregates=_aggregates(d),
        completed=None,
        failed=None,
        model=str(d["model"]) if d.get("model") else None,
        info={"layout": layout(d)} | {k: d[k] for k in ("hw", "framework", "spec_decoding", "mtp") if k in d},
        # a lone aggregate is a row too (its file's first): a directory of them, baseline and MTP runs side by side
        # as InferenceX leaves them, is split into arms by their fields, never read as one arm's repeats
        row=Row(index or 1, fields, config),
    )


def read(path: Path) -> tuple[RunSummary, ...]:
    """The file's run, or each run of a collected list in order (each a row)."""
    ff = FileFields(path, READ_AS)
    d = ff.json(ff.text())
    if isinstance(d, dict):
        return (_run(ff, d, None),)
    if not isinstance(d, list) or not d:
        ff.fail("it is neither one aggregate (an object) nor a list of them")
    return tuple(_run(ff, ff.mapping(x, f"[{i}]"), i + 1) for i, x in enumerate(d))
