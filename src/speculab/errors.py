"""Errors a user can cause. The CLI prints their message on one line and exits with their code."""

from __future__ import annotations


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
    (results and report are written first)."""

    exit_code = 4
