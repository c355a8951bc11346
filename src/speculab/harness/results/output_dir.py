"""The output directory every command writes to, checked before any request is sent: no command overwrites a result
it did not create.

Every file a speculab command leaves in its directory is named in RESULT_NAMES; a directory holding any of them is
refused by every command (a bench result cannot become an A/B report, a run cannot land in another run's
directory). The one exception is re-rendering: `speculab report DIR --output OUT` may replace a report it rendered
there before (`check_render_target`), because a report is recomputed from saved inputs, never measured.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.results.summary_file import SUMMARY_FILE

# bench and diagnose (manifest, records, summary, diagnosis), the A/B layout (inputs, runs/, launches, logs/), and
# the rendered report.
RESULT_NAMES = (
    "manifest.json",
    "requests.jsonl",
    SUMMARY_FILE,
    "diagnosis.json",
    "diagnosis.html",
    "inputs.json",
    "runs",
    "launches.json",
    "logs",
    "report.html",
)
_RENDERED = frozenset({SUMMARY_FILE, "report.html"})


def _held(path: Path) -> list[str]:
    return [n for n in RESULT_NAMES if (path / n).exists()] if path.is_dir() else []


def check_output_dir(path: Path, *, flag: str = "--output") -> None:
    """Refuse, with one line naming the fix, a directory that is a file, already holds a result, or cannot be
    created or written."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; give a directory")
    held = _held(path)
    if held:
        raise UserError(f"{flag} {path} already holds a run ({', '.join(held)}); choose a new directory or remove it")
    _check_writable(path, flag)


def check_render_target(path: Path, schema: str, *, flag: str = "--output") -> None:
    """Where `speculab report` may write report.html and summary.json: a new directory, or one holding only a report
    rendered there before (report.html and a summary.json of `schema`'s kind, any version: the renderer names the
    schema it writes, defined once with its model) - never a bench result or another run."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; give a directory")
    held = _held(path)
    if held and (set(held) - _RENDERED or not _is_rendered_report(path / SUMMARY_FILE, schema)):
        raise UserError(
            f"{flag} {path} holds another result ({', '.join(held)}), which the report would overwrite; choose a new "
            "directory"
        )
    _check_writable(path, flag)


def _is_rendered_report(summary: Path, schema: str) -> bool:
    if not summary.exists():
        return True  # report.html alone
    try:
        held = json.loads(summary.read_text(encoding="utf-8")).get("schema", "")
    except (OSError, ValueError, AttributeError):
        return False
    # "speculab.report.summary/1" -> any "speculab.report.summary/N": a report an earlier release rendered there
    return isinstance(held, str) and held.startswith(schema.rsplit("/", 1)[0] + "/")


def _check_writable(path: Path, flag: str) -> None:
    parent = path if path.is_dir() else path.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise UserError(f"{flag} {path}: {parent} is not writable; choose another directory")
