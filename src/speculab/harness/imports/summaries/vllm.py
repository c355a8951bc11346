"""vLLM's summary files -> `RunSummary`s: `vllm bench serve --save-result` without `--save-detailed` (releases up to
0.25 wrote no per-request lists without it, later ones neither), `benchmarks/benchmark_serving.py --save-result`
(the same keys, before `vllm bench serve` replaced it), and the `run=N.json` files of `vllm bench sweep serve`.

Read: `median_*_ms` and `p99_*_ms` of `ttft`, `tpot`, `itl` and `e2el` (vLLM writes the percentiles
`--metric-percentiles` asks for, 99 by default, of the metrics `--percentile-metrics` names, `ttft,tpot,itl` by
default: E2E is then not in the file), `output_throughput` and `request_throughput` (over vLLM's own measured
window, first send to last completion), `completed`, and `failed` (else `num_prompts - completed`: vLLM counts a
request that did not succeed as not completed); with speculation, `spec_decode_acceptance_length` and
`spec_decode_acceptance_rate` as the file states them (pooled: the server's counters diffed around the run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, ITL, TPOT, TTFT
from speculab.harness.imports import vllm_bench, vllm_sweep
from speculab.harness.imports.fields import FileFields
from speculab.harness.imports.summaries.summary import (
    LENGTH,
    LENS_ONLY,
    POOLED,
    RATE,
    RunSummary,
    StatedAcceptance,
    count,
    keeps_requests,
    lens_only,
    ms_aggregates,
    stated,
)

TOOL = vllm_bench.TOOL
# the four latencies' figures and vLLM's names of them
_LATENCIES = ((TTFT, "ttft"), (TPOT, "tpot"), (ITL, "itl"), (E2E, "e2el"))


def detect(path: Path) -> bool:
    """A vLLM result file (its marks near the start), per-request data or not, or a sweep combination's own
    summary.json (its runs' results as one list)."""
    return path.is_file() and (vllm_bench.detect(path) or vllm_sweep.combination_summary(path))


def _failed(d: dict[str, Any]) -> int | None:
    if (failed := count(d.get("failed"))) is not None:
        return failed
    asked, done = count(d.get("num_prompts")), count(d.get("completed"))
    return asked - done if asked is not None and done is not None and asked >= done else None


def _acceptance(d: dict[str, Any]) -> tuple[StatedAcceptance, ...]:
    """`spec_decode_acceptance_length` and `spec_decode_acceptance_rate` (in %): vLLM's client diffed the server's
    spec-decode counters around the run, so both are pooled over every draft the server made in it."""
    length = stated(LENGTH, d.get("spec_decode_acceptance_length"), POOLED, "spec_decode_acceptance_length")
    return length + stated(RATE, d.get("spec_decode_acceptance_rate"), POOLED, "spec_decode_acceptance_rate", 1e-2)


def read(path: Path) -> tuple[RunSummary, ...]:
    """The file's one run (a sweep's run=N.json is run N + 1 at its load), or a combination's summary.json's runs
    (each its `run_number` + 1)."""
    ff = FileFields(path, vllm_bench.READ_AS)
    d = ff.json(ff.text())
    if isinstance(d, list) and vllm_sweep.combination_summary(path):
        runs = [ff.mapping(r, f"[{i}]") for i, r in enumerate(d)]
        if not runs:
            ff.fail("it is an empty list (no run)")
        # each its sweep's own run number, else its place in the list
        numbers = [k if (k := count(r.get("run_number"))) is not None else i for i, r in enumerate(runs)]
        return tuple(_run(ff, r, k, vllm_sweep.TOOL) for r, k in zip(runs, numbers, strict=True))
    if not isinstance(d, dict):
        ff.fail("not a JSON object")
    n = vllm_sweep.run_number(path)
    return (_run(ff, d, n, vllm_bench.TOOL if n is None else vllm_sweep.TOOL),)


def _run(ff: FileFields, d: dict[str, Any], n: int | None, tool: str) -> RunSummary:
    """One run's result: run `n` + 1 of a sweep's combination (None: a file of one run)."""
    path = ff.path
    completed = count(d.get("completed"))
    failed = _failed(d)
    asked = count(d.get("num_prompts")) or (completed or 0) + (failed or 0) or 1
    level, _ = vllm_bench.offered_load(ff, d, asked)
    version = d.get("vllm_version") or d.get("version")
    # a sweep's run files are all run=N.json (and summary.json): the side is named by the combination's directory
    label = f"{path.parent.name}/{path.name}" if n is not None else ""
    return RunSummary(
        path=path,
        tool=tool,
        level=level,
        aggregates=ms_aggregates(d, _LATENCIES),
        completed=completed,
        failed=failed,
        per_request=keeps_requests(d),
        version=str(version) if version else None,
        model=str(d["model_id"]) if d.get("model_id") else None,
        label=label,
        run=n + 1 if n is not None else 1,
        info={k: d[k] for k in ("date", "backend", "label") if d.get(k) is not None}
        | ({"layout": LENS_ONLY} if lens_only(d) else {}),
        acceptance=_acceptance(d),
    )
