"""The one line a command's error says as it exits: its message, or a failed gate's in the report's words: the error
gate's record, the answers `--fail-on` matched (each where it was given: a label, or the gate's record)."""

from __future__ import annotations

from speculab.errors import AnswerMatched, ErrorRateExceeded, UserError
from speculab.harness.verdict.model import ReportWarning
from speculab.report.phrases import warning_text

SHOWN_HITS = 3  # answers named on the --fail-on line; the rest are counted ("and 2 more")


def _where(where: object) -> str:
    return warning_text(where) if isinstance(where, ReportWarning) else str(where)


def error_line(e: UserError) -> str:
    """What the CLI prints after "error:" (without the markup): the gates' records worded, any other error's message."""
    if isinstance(e, ErrorRateExceeded) and isinstance(e.why, ReportWarning):
        return warning_text(e.why) + (f"; what was measured is in {e.where}" if e.where is not None else "")
    if isinstance(e, AnswerMatched):
        hits = [f"{_where(where)}: {answer}" for answer, where in e.hits]
        more = f" and {len(hits) - SHOWN_HITS} more" if len(hits) > SHOWN_HITS else ""
        return f"--fail-on {','.join(e.asked)}: {'; '.join(hits[:SHOWN_HITS])}{more}; the report is in {e.out}"
    return str(e)
