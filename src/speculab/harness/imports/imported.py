"""`ImportedRun`: one arm's measured run as read from a result file, in speculab's terms (seconds, records)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculab.harness.design import LevelSpec
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.servers.acceptance import AcceptanceSummary


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """One run at one load: its records (index = position in the file) and what the file says about itself."""

    path: Path
    tool: str  # e.g. "vllm bench serve"; "speculab bench" for a bench directory
    level: LevelSpec
    records: tuple[RequestRecord, ...]
    # per position: the prompt's length in tokens as the file states it (the pairing check); None where unknown
    input_lens: tuple[int | None, ...]
    # the prompts, where known (a speculab bench run's workload, reloaded); () when the file holds none (vLLM's)
    items: tuple[RequestSpec, ...] = ()
    acceptance: AcceptanceSummary | None = None
    # where the numbers came from: tool, version, date, backend, model, as the file states them
    info: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    started_utc: str = ""
    interrupted: bool = False
