"""Notes and warnings as a person reads them: records (or their dicts from a file, or an older file's strings)
worded by the report, so a test asserts on what is printed, not on how a record is stored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from speculab.harness.results.warnings import ReportWarning
from speculab.report.phrases import warning_text


def words(notes: Iterable[ReportWarning | Mapping[str, Any] | str]) -> list[str]:
    """Each note's sentence, in order."""
    return [warning_text(n if isinstance(n, ReportWarning) else ReportWarning.from_dict(n)) for n in notes]


def screen_lines(lines: Iterable[str | ReportWarning]) -> list[str]:
    """Lines as the CLI's RunScreen prints them before a run: text as it is, a record (a plan's warning) worded."""
    return [line if isinstance(line, str) else warning_text(line) for line in lines]
