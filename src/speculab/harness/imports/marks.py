"""What makes a file a tool's: the top-level keys its tool writes (`Marks`), and, for a file no reader claims, the
tool whose marks it has the most of and the marks it lacks (`closest`), so that the refusal names them. Readers claim
files by their own `detect`; this only words a file that none claimed. Knows nothing of how any file is read.

A tool's marks live with its reader (`vllm_bench.MARKS`, `llmperf_responses.SUMMARY_MARKS`); `OTHERS` holds those of
files speculab recognises but does not read: another tool's aggregates beside the per-request file that is read, and
tools not read yet. The registry lists which are asked (`registry.unclaimed`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Marks:
    """A tool's file by its top-level keys (every one present in a file of the tool; a `a|b` entry: either)."""

    tool: str  # e.g. "vllm bench serve"
    keys: tuple[str, ...]
    # what to give instead where such a file is not read ("": the tool's files are read; the refusal names the marks
    # the file lacks)
    instead: str = ""

    def present(self, keys: frozenset[str]) -> tuple[str, ...]:
        """The marks among `keys`, each as the file spells it."""
        return tuple(found for k in self.keys if (found := next((a for a in k.split("|") if a in keys), None)))

    def missing(self, keys: frozenset[str]) -> tuple[str, ...]:
        """The marks not among `keys` (a `a|b` mark as "a or b")."""
        return tuple(k.replace("|", "` or `") for k in self.keys if not any(a in keys for a in k.split("|")))


# files speculab recognises and does not read (their tool's reader, where one is registered, claims them first)
OTHERS: tuple[Marks, ...] = (
    Marks(
        "AIPerf's aggregates, profile_export_aiperf.json",
        ("aiperf_version|schema_version", "input_config|records"),
        "AIPerf's per-request records beside it, profile_export.jsonl",
    ),
    Marks(
        "GenAI-Perf's aggregates, profile_export_genai_perf.json",
        ("input_config", "request_throughput", "request_latency|time_to_first_token"),
        "GenAI-Perf's per-request export beside it, profile_export.json (perf_analyzer's, every request's timestamps)",
    ),
    Marks("draftbench", ("timestamp", "hardware", "settings", "results")),
)


def top_keys(path: Path) -> frozenset[str]:
    """The keys of the file's JSON object (of its first line, for JSON lines; of its first entry, for a list);
    empty where it is no such JSON (a directory, YAML, text)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").lstrip()
    except OSError:
        return frozenset()
    try:
        d: Any = json.JSONDecoder().raw_decode(text)[0]
    except (ValueError, RecursionError):
        return frozenset()
    if isinstance(d, list) and d:
        d = d[0]
    return frozenset(k for k in d if isinstance(k, str)) if isinstance(d, dict) else frozenset()


# a file with fewer of a tool's marks than this is not named as that tool's (a `date` alone is anyone's)
_AT_LEAST = 2


def closest(path: Path, candidates: Iterable[Marks]) -> tuple[Marks, tuple[str, ...], tuple[str, ...]] | None:
    """The tool the file has the largest share of marks of (at least two of them; the first listed where tied: one
    tool's marks may be all in another's file, AIPerf's aggregates holding GenAI-Perf's keys), with the marks it has
    and those it lacks; None where it has no tool's."""
    keys = top_keys(path)
    if not keys:
        return None
    best: tuple[Marks, tuple[str, ...], tuple[str, ...]] | None = None
    share = 0.0
    for m in candidates:
        have = m.present(keys)
        if len(have) >= _AT_LEAST and len(have) / len(m.keys) > share:
            best, share = (m, have, m.missing(keys)), len(have) / len(m.keys)
    return best
