"""inference-perf's lifecycle reports of a run's load stages -> `RunSummary`s (docs/imports.md): each
`stage_N_lifecycle_metrics.json` is one stage, and each stage one load (`load_summary.requested_rate`, or its
`concurrency` for the concurrent load type); `summary_lifecycle_metrics.json` (every stage together) is read only
where no stage report is beside it, as the run's one stage. What the reports do not state (the arrival pattern, the
stages' loads in the earliest layout, the model) comes from the `config.yaml` inference-perf writes beside them.

Read, of `successes.latency` (seconds): `time_to_first_token`, `time_per_output_token` and `request_latency` (E2E),
their `median` and `p99`; of `successes.throughput`: `output_tokens_per_sec` and `requests_per_sec` (over
inference-perf's own window: first send to last end); `successes.count` and `failures.count`. Its
`inter_token_latency` is not read: its gaps are between chunks, or between tokens with 0 inside a chunk where a
tokenizer was set, neither speculab's per-token ITL. Its `time_per_output_token` is read from the layout of 0.5 and
later only (marked by `successes.token_count_mismatches`): earlier layouts divided by the times they kept, one a
chunk, not by the output tokens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.harness.analysis.figures import E2E, MEDIAN, OUTPUT_TOK_S, P99, REQUEST_RPS, TPOT, TTFT
from speculab.harness.design import LevelSpec
from speculab.harness.imports.fields import FileFields, obj
from speculab.harness.imports.summaries.summary import Aggregates, RunSummary, count, seconds

TOOL = "inference-perf"
READ_AS = "an inference-perf lifecycle report"
SUMMARY = "summary_lifecycle_metrics.json"
PER_REQUEST = "per_request_lifecycle_metrics.json"
CONFIG = "config.yaml"
_STAGE = re.compile(r"stage_(\d+)_lifecycle_metrics\.json")
# before 0.5 (inference-perf's #301): TPOT over the times kept (one a chunk), and no p99 before 0.3 (`p50`, `p90`)
EARLY = "the layout of inference-perf before 0.5: TPOT over chunk times, not read"
_LATENCIES = ((TTFT, "time_to_first_token"), (E2E, "request_latency"))


def stage_of(path: Path) -> int | None:
    """The stage a report's name says (stage_N_lifecycle_metrics.json: N); None for another name."""
    m = _STAGE.fullmatch(path.name)
    return int(m.group(1)) if m else None


def stage_files(d: Path) -> list[Path]:
    """The stage reports in directory `d`, by stage."""
    try:
        found = [p for p in d.iterdir() if stage_of(p) is not None and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: stage_of(p) or 0)


def _is_report(path: Path) -> bool:
    """A lifecycle report's own marks: a JSON object whose start holds `load_summary` and `successes` (its
    `failures` come after every statistic of the successes, past what is read here)."""
    try:
        with path.open("rb") as f:
            head = f.read(16384).decode("utf-8", "replace")
    except OSError:
        return False
    return head.lstrip().startswith("{") and all(f'"{k}"' in head for k in ("load_summary", "successes"))


def detect(path: Path) -> bool:
    """A stage report, or the run's summary report where no stage report is beside it (else the stages are the
    run's loads, and the summary, every stage together, would count each request twice)."""
    if not path.is_file() or path.suffix != ".json":
        return False
    if stage_of(path) is None and (path.name != SUMMARY or stage_files(path.parent)):
        return False
    return _is_report(path)


def config(d: Path) -> dict[str, Any]:
    """The `config.yaml` inference-perf wrote beside its reports ({} where absent or unreadable)."""
    import yaml

    try:
        text = (d / CONFIG).read_text(encoding="utf-8")
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def stage_level(ff: FileFields, load: Mapping[str, Any], cfg: Mapping[str, Any], stage: int) -> LevelSpec:
    """A stage's load: its `concurrency` (the concurrent type), else its `requested_rate`, the arrivals the
    config's `load.type` names; where the report states neither (the earliest layout), the config's stage."""
    kind = obj(cfg.get("load")).get("type")
    listed = obj(cfg.get("load")).get("stages")
    said = obj(listed[stage]) if isinstance(listed, list) and stage < len(listed) else {}
    cap = load.get("concurrency", said.get("concurrency_level"))
    if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
        return LevelSpec("concurrency", cap, ("low", "operating"))
    rate = load.get("requested_rate", said.get("rate"))
    if rate is None:
        ff.fail(
            f"no `load_summary.requested_rate` or `concurrency` (the stage's load), nor a rate or concurrency_level "
            f"for stage {stage} in a {CONFIG} beside it"
        )
    arrival = kind if kind in ("constant", "poisson") else None
    return LevelSpec("rate", ff.positive(rate, "load_summary.requested_rate"), ("operating",), arrival)


def _aggregates(successes: Mapping[str, Any]) -> Aggregates:
    latency = obj(successes.get("latency"))
    figures: dict[str, float | None] = {}
    late = "token_count_mismatches" in successes
    for fig, theirs in (*_LATENCIES, *(((TPOT, "time_per_output_token"),) if late else ())):
        s = obj(latency.get(theirs))
        stated = {MEDIAN: s.get("median", s.get("p50")), P99: s.get("p99")}
        figures |= {r.name: seconds(stated[r.statistic], 1.0) for r in fig.run_figures}
    rates = obj(successes.get("throughput"))
    figures[OUTPUT_TOK_S.name] = seconds(rates.get("output_tokens_per_sec"), 1.0)
    figures[REQUEST_RPS.name] = seconds(rates.get("requests_per_sec"), 1.0)
    return Aggregates(figures)


def read(path: Path) -> tuple[RunSummary, ...]:
    """The report's one stage as a run at its load."""
    ff = FileFields(path, READ_AS)
    d = ff.mapping(ff.json(ff.text()), "")
    successes = ff.mapping(d.get("successes"), "successes")
    stage = stage_of(path) or 0
    cfg = config(path.parent)
    listed = obj(cfg.get("load")).get("stages")
    if stage_of(path) is None and isinstance(listed, list) and len(listed) > 1:
        ff.fail(
            f"the summary of {len(listed)} stages together, at no one load; give the stage_N_lifecycle_metrics.json "
            "inference-perf wrote beside it (each stage is a load)"
        )
    level = stage_level(ff, ff.mapping(d.get("load_summary"), "load_summary"), cfg, stage)
    model = obj(cfg.get("server")).get("model_name")
    late = "token_count_mismatches" in successes
    return (
        RunSummary(
            path=path,
            tool=TOOL,
            level=level,
            aggregates=_aggregates(successes),
            completed=count(successes.get("count")),
            failed=count(obj(d.get("failures")).get("count")),
            per_request=(path.parent / PER_REQUEST).is_file(),  # its requests, beside it, read per request
            model=model if isinstance(model, str) and model else None,
            label=path.parent.name or path.name,
            info={"stage": stage} | ({} if late else {"layout": EARLY}),
        ),
    )
