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
    # per position: the prompt's length in tokens as the file states it (the pairing check); None where unknown.
    # Left out (or ()): each measured record's `prompt_tokens`, in order, which is what every file reader states; a
    # bench directory gives its own (per request index, its warmup left out)
    input_lens: tuple[int | None, ...] = ()
    # the prompts, where known (a speculab bench run's workload, reloaded); () when the file holds none (vLLM's)
    items: tuple[RequestSpec, ...] = ()
    # per position: what the file says identifies the prompt across runs of the same tool (AIPerf's
    # conversation_id and turn_index), compared when both files have them and `key_kind`s are equal; () when none
    prompt_keys: tuple[str, ...] = ()
    key_kind: str = ""
    acceptance: AcceptanceSummary | None = None
    # where the numbers came from: tool, version, date, backend, model, as the file states them
    info: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    started_utc: str = ""
    # how the report names the arm: the file's name, or its folder's where the tool's file names are all alike
    # (AIPerf's profile_export.jsonl in each run's artifact directory)
    label: str = ""
    # why this run's requests cannot be paired with another's by position, whatever the other holds ("": they may):
    # compared unpaired, for that reason (an LLMPerf run of several requests at a time lists them as they completed)
    unpairable: str = ""
    # which run of several at one load (a vLLM sweep's run=N.json, N + 1): the report's repeat; 1 for a single run
    repeat: int = 1
    # a speculab bench run's manifest.json as it wrote it (what it asked: workload, sampling, load, endpoint, fit,
    # server), for compare's checks of two bench runs and the sampling of the A/B; None for another tool's file
    manifest: Mapping[str, Any] | None = None
    # why the run's files say it did not finish, for its A/B's own note ("": they do not say so)
    unfinished: str = ""

    def __post_init__(self) -> None:
        if not self.input_lens:
            lens = tuple(r.prompt_tokens for r in self.records if not r.warmup)
            object.__setattr__(self, "input_lens", lens)  # frozen: set once, here

    @property
    def name(self) -> str:
        return self.label or self.path.name

    interrupted: bool = False
