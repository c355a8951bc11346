"""summary.json, the file every kind of result ends with, and the one way any kind is written: strict JSON
(`strict_json`), atomically (`atomic_file`), so a reader sees the old file or the new one, never half.

What goes in it is each kind's one writer's business, its schema defined beside it: a bench run's
(`commands.bench.summary.build_summary`, written by `run_dir.RunDir.write_summary` with the run's other files, through
`write_summary_file` like the others), an A/B run's
(`report.summary.write_summary`: the verdict model, `harness.verdict.model.REPORT_SCHEMA`, with its sentences) and a
run-level comparison's (`commands.compare.run_level.save`: `harness.verdict.run_level.RunLevelReport.to_dict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculab.harness.results.strict_json import write_json_atomic

SUMMARY_FILE = "summary.json"


def write_summary_file(directory: Path, data: Mapping[str, Any], *, indent: int) -> Path:
    """directory/summary.json holding `data` as strict JSON, written atomically (the directory made where missing);
    its path. `indent`: each kind's, kept as its files have always been laid out."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SUMMARY_FILE
    write_json_atomic(path, data, indent=indent)
    return path
