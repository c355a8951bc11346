"""`ImportedRun`: one arm's measured run as read from a result file, in speculab's terms (seconds, records); what
every reader builds its runs of: `file_record` (one request as a file states it) and `closed_loop_sends` (send times
a file does not keep, rebuilt from its closed loop)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculab.harness.design import LevelSpec
from speculab.harness.records import (
    AcceptanceSummary,
    ChunkEvent,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
    TokenCountSource,
)
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.workload import validity


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
    # what the reader found in the file and did with it (the FILE_* records, worded by the report); compare adds its
    # own (runs left out); a bench directory's reader still says its note in words (carried as kind `note`)
    notes: tuple[str | ReportWarning, ...] = ()
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
    # the target model the file names (the served model's name or path, as the tool wrote it); "": it names none.
    # Compare refuses an A/B of two different target models (`same_model`)
    model: str = ""

    def __post_init__(self) -> None:
        if not self.input_lens:
            lens = tuple(r.prompt_tokens for r in self.records if not r.warmup)
            object.__setattr__(self, "input_lens", lens)  # frozen: set once, here

    @property
    def name(self) -> str:
        return self.label or self.path.name

    interrupted: bool = False
    # True where the records' send times are rebuilt (the file keeps none: LLMPerf, SGLang): their span is not the
    # run's; `duration_s` is then the tool's own measured wall time (from its summary), what throughput divides by,
    # and with neither the run has no throughput (said in its notes)
    sends_rebuilt: bool = False
    duration_s: float | None = None
    # where the file's tool states the load, for a run whose file does not (`level.kind` UNKNOWN): what a refusal to
    # compare it with a stated load names as the fix ("": the file states its load)
    load_from: str = ""


def file_record(
    index: int,
    sent_s: float,
    prompt_tokens: int | None,
    end_s: float,
    *,
    scheduled_s: float | None = None,
    chunk_times: Iterable[float] = (),
    output_text: str = "",
    completion_tokens: int | None = None,
    error: ErrorInfo | None = None,
    speculation: dict[str, Any] | None = None,
    all_chunks: bool = True,
) -> RequestRecord:
    """Request `index` as a result file states it: sent at `sent_s` (`scheduled_s`: when the tool meant to send it,
    where it waited for a free slot first; else the send), one chunk of unknown text and tokens at each of
    `chunk_times` (the file's first-token time and whatever gaps it keeps), done at `end_s`. Its token counts are
    the file's (`TokenCountSource.RESULT_FILE`: the run's tool says which file). `all_chunks` False: the file keeps
    only the first and last token's times, so `chunk_times` are those two and nothing between them is known."""
    return RequestRecord(
        index=index,
        scheduled_s=sent_s if scheduled_s is None else scheduled_s,
        sent_s=sent_s,
        end_s=end_s,
        chunks=tuple(ChunkEvent(t, "", None) for t in chunk_times),
        output_text=output_text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        token_count_source=TokenCountSource.RESULT_FILE,
        error=error,
        speculation=speculation,
        all_chunks=all_chunks,
    )


def closed_loop_sends(durations: Sequence[float], streams: int | None) -> list[float]:
    """Send times rebuilt for a tool's closed loop of `streams` (the file keeps none): the first `streams` requests
    at 0, each next, in the file's order, when the earliest in flight ends; all at 0 where nothing capped them."""
    if streams is None:
        return [0.0] * len(durations)
    ends: list[float] = []
    out = []
    for d in durations:
        t = heapq.heappop(ends) if len(ends) >= streams else 0.0
        out.append(t)
        heapq.heappush(ends, t + d)
    return out


def validity_notes(
    dataset: Any, ignore_eos: Any, synthetic: Iterable[str], prompts: int | None
) -> tuple[ReportWarning, ...]:
    """What a file says of its run that makes its acceptance not the user's traffic's (`workload.validity`): a
    `dataset` the tool makes up (`synthetic`: the tool's names for such datasets), `ignore_eos` set. A file that says
    neither gets no record: what it does not state is not guessed."""
    name = str(dataset) if isinstance(dataset, str) else ""
    found = (
        validity.synthetic_prompts(prompts or 1, prompts, name) if name in set(synthetic) else None,
        validity.ignored_eos(ignore_eos is True, "ignore_eos"),
    )
    return tuple(w for w in found if w is not None)
