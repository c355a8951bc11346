"""recommended.yaml and recommended-flags.txt: the configuration to ship, as the verdict model carries it
(`Report.shipped`, spelt for the engine by `speculab run`), written beside summary.json. Nothing here decides."""

from __future__ import annotations

from pathlib import Path

from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.verdict.model import Report

RECOMMENDED_YAML, RECOMMENDED_FLAGS = "recommended.yaml", "recommended-flags.txt"


def write_shipped(out_dir: Path, report: Report) -> tuple[Path, Path] | None:
    """Write out_dir/recommended.yaml and out_dir/recommended-flags.txt; their paths, or None (nothing written)
    when the report carries no configuration to ship."""
    if report.shipped is None:
        return None
    again, ship = out_dir / RECOMMENDED_YAML, out_dir / RECOMMENDED_FLAGS
    write_atomic(again, report.shipped.experiment_file)
    write_atomic(ship, report.shipped.flags_file)
    return again, ship
