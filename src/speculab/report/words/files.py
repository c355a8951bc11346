"""What the readers of other tools' result files found in a file and did with it (the FILE_* kinds) in words: each
kind's frame around the tool's own nouns (what its files are, how it names its version and its times), which the
reader puts in the record's fields, so that a new reader brings its nouns and no sentences."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import WarningKind

Fields = Mapping[str, Any]


# the tool's own nouns (what its files are, how it names its version and its times) from the record's fields


def _file_read(f: Fields) -> str:
    """'baseline.json: a vLLM bench serve result (vLLM 0.32.0; date 20261203-083618, backend openai)'."""
    version = f"{f['named']} {f['version']}" if f.get("version") else f["unstated"]
    told = [f"{k} {v}" if k else str(v) for k, v in f.get("said") or ()]
    told += [f"{name} ({n} run{'s' if n != 1 else ''})" for name, n in f.get("runs") or ()]
    at = f"{f['at'][0]} {f['at'][1]}, " if f.get("at") else ""
    return f"{f['file']}: {f['what']} ({version}; {at}{', '.join(told) or f.get('unsaid', '')})"


def _early_layout(f: Fields) -> str:
    """'<file>: <layout>: `timestamp_ns` read as the send, `credit_phase` as the phase'."""
    read = ", ".join(f"`{key}` {'read ' if i == 0 else ''}as {what}" for i, (key, what) in enumerate(f["renamed"]))
    return f"{f['file']}: {f['layout']}: {read}"


FILE_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.FILE_READ: _file_read,
    WarningKind.FILE_ALL_AT_ONCE: lambda f: (
        f"{f['file']}: request rate inf and no max concurrency: all {f['requests']} requests were sent at once"
    ),
    WarningKind.FILE_THROUGHPUT_PROFILE: lambda f: (
        f"{f['file']}: {f['named']}'s throughput profile: up to {f['requests']} requests at once"
    ),
    WarningKind.FILE_SENDS_FROM_LOAD: lambda f: (
        f"{f['file']}: no `{f['field']}` ({f['layout']}): sends are rebuilt from the load (each request sent as one "
        "before it ended, in the file's order), so tok/s is approximate"
    ),
    WarningKind.FILE_E2E_FROM_CHUNKS: lambda f: (
        f"{f['file']}: no `{f['field']}` ({f['layout']}): E2E is the last chunk, TTFT + the sum of {f['gaps']}"
    ),
    WarningKind.FILE_SENDS_CLOSED_LOOP: lambda f: (
        f"the {f['named']} file keeps no send times: rebuilt as the closed loop of {f['streams']} streams it was, "
        "each sending as its last request ended, in the order listed (as they completed); requests in flight are "
        "approximate"
    ),
    WarningKind.FILE_EARLY_LAYOUT: _early_layout,
    WarningKind.FILE_THROUGHPUT_WINDOW: lambda f: (
        f"{f['named']}'s tok/s: over {f['window']}, not the rebuilt send times"
    ),
    WarningKind.FILE_NO_THROUGHPUT: lambda f: f"{f['lacks']}: no throughput, and no throughput comparison",
    WarningKind.FILE_LOAD_UNSTATED: lambda f: (
        f"{f['file']}: the load is not in the file ({f['named']} writes it in {f['where']}, not beside it): not "
        f"assumed; compared only with another file whose load is not stated either; {f['sends']}"
    ),
    WarningKind.FILE_RUNS_FAILED: lambda f: (
        f"{f['file']}: the sweep also wrote {', '.join(f['failed'])} (failed runs, not compared)"
    ),
}
