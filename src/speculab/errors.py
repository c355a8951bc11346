"""Errors a user can cause. The CLI prints their message on one line and exits with their code; a failed gate's
error carries its records instead of their sentence, and the CLI words them through the report (`speculab.report.
console.exit`), as every warning is worded."""

from __future__ import annotations

import difflib
import errno
from collections.abc import Iterable, Sequence
from pathlib import Path


class UserError(Exception):
    """A mistake the user can fix: bad flag, unreachable URL, malformed file. Message names the fix."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class EndpointError(UserError):
    """The endpoint could not be used (unreachable, wrong model, rejected our requests)."""

    exit_code = 3


class ErrorRateExceeded(UserError):
    """The run finished, but more requests failed than `--max-error-rate` allows: its numbers are not to be trusted
    (results and report are written first). `why`: the gate's record (`harness.results.warnings.ReportWarning`, kind
    `error_gate`: how many failed of how many, by category, against the gate), `where`: what was measured."""

    exit_code = 4

    # `why` is typed loosely: the records live in the harness, which imports this module
    def __init__(self, why: object, where: Path | None = None):
        # the plain message (a caller's, not the CLI's line): that the gate failed, not by how much
        at = f"; what was measured is in {where}" if where is not None else ""
        super().__init__(f"more requests failed than --max-error-rate allows{at}")
        self.why, self.where = why, where


class AnswerMatched(UserError):
    """A headline answer the user named with `--fail-on` was given (a CI gate); results and report are written
    first. `hits`: each (answer, where) that matched, where a label or, for `errors`, the gate's record."""

    exit_code = 5

    def __init__(self, asked: Sequence[str], hits: Sequence[tuple[str, object]], out: Path):
        # the plain message (a caller's, not the CLI's line): which answers, not where
        given = ", ".join(dict.fromkeys(answer for answer, _ in hits))
        super().__init__(f"--fail-on {','.join(asked)}: {given} given; the report is in {out}")
        self.asked, self.hits, self.out = tuple(asked), tuple(hits), out


class WorkerLost(UserError):
    """A client worker (a load host of `--workers`/`--ray`) ended mid-run, before its share was done: the run
    finished without it; what every worker sent is on disk."""

    exit_code = 6


# a disk that cannot take what a command writes: full, over quota, a file too large, or mounted read-only
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def disk_error(e: OSError) -> UserError | None:
    """A write the disk refused as one line naming the file and the fix; None for any other OSError (a bug or a
    fault the caller knows better than this)."""
    if e.errno not in _DISK_ERRNOS:
        return None
    where = f"cannot write {e.filename}" if e.filename else "cannot write the output"
    return UserError(
        f"{where} ({e.strerror or e}); the files written before it are whole. Free space or write elsewhere "
        "(`speculab run --resume DIR` finishes an interrupted A/B, the directory copied elsewhere too)"
    )


def user_text(raw: bytes, source: str) -> str:
    """A user's file (workload, trace, experiment) as text, or one `UserError` naming the file and the line of the
    first byte no text file holds: one that is not UTF-8, or a NUL (a binary file, or UTF-16 saved by an editor).
    A leading byte-order mark (Windows editors write one) is dropped: it is not text, and JSON refuses it."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line, col = _line_col(raw, e.start)
        raise UserError(
            f"{source}:{line}: not UTF-8 text (byte {raw[e.start]:#04x} at column {col}); save the file as UTF-8"
        ) from None
    nul = raw.find(b"\0")
    if nul >= 0:
        line, col = _line_col(raw, nul)
        raise UserError(
            f"{source}:{line}: a NUL byte at column {col}, which no text file holds; is it binary, or UTF-16? "
            "save it as UTF-8 text"
        )
    return text


def _line_col(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of `offset` in `raw`."""
    return raw.count(b"\n", 0, offset) + 1, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def did_you_mean(given: object, choices: Iterable[str]) -> str:
    """ "; did you mean `X`?" for the choice closest to a misspelt name or value, or "" when none is close: the one
    phrasing of a typo's fix (flags, flag values, experiment-file keys and values)."""
    close = difflib.get_close_matches(str(given), list(choices), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""
