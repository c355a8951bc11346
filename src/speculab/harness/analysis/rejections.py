"""Client errors that name a request option speculab sent (continuous usage stats, stream options, logprobs), read
from a run's records one at a time, and the warning naming the flag that turns each off."""

from __future__ import annotations

from collections.abc import Iterable

from speculab.harness.records import RequestRecord
from speculab.harness.results.warnings import ReportWarning, WarningKind


class OptionRejections:
    """What the hints need from a run's records, one record at a time: which request options a 4xx named, how many
    requests were rejected as invalid, how many got 404/405. A few flags and counts, never the messages."""

    def __init__(self) -> None:
        self.invalid = self.missing = 0  # HTTP 400/422; HTTP 404/405
        self.continuous_usage = self.stream_options = self.logprobs = False

    def add(self, r: RequestRecord) -> None:
        if r.error is None:
            return
        if r.error.status in (400, 422):
            msg = r.error.message.lower()
            self.invalid += 1
            self.continuous_usage |= "continuous_usage" in msg
            self.stream_options |= "stream_options" in msg or "include_usage" in msg
            self.logprobs |= "logprobs" in msg
        elif r.error.status in (404, 405):
            self.missing += 1

    def warnings(self) -> list[ReportWarning]:
        """Client 4xx errors that name a request option we sent, each with the flag that turns it off; invalid
        requests naming none; requests to a path the server does not serve."""
        out = []
        if self.continuous_usage:
            out.append(_rejected("continuous_usage_stats"))
        elif self.stream_options:
            out.append(_rejected("stream_options"))
        if self.logprobs:
            out.append(_rejected("logprobs"))
        if self.invalid and not out:
            out.append(ReportWarning(WarningKind.REQUESTS_INVALID, fields={"count": self.invalid}))
        # /v1/models answered (the preflight checks it), but the completions path did not: a chat-only server (or
        # one without chat) under the other --api
        if self.missing:
            out.append(ReportWarning(WarningKind.ENDPOINT_NOT_SERVED, fields={"count": self.missing}))
        return out


# The flag that stops sending each option a server may refuse: the report's warning and diagnose's error name it.
FLAG_FIX = {
    "continuous_usage_stats": "rerun with --no-continuous-usage",
    "stream_options": "rerun with --no-include-usage",
    "logprobs": "rerun without --logprobs (or with a smaller N)",
}


def _rejected(option: str) -> ReportWarning:
    return ReportWarning(WarningKind.OPTION_REJECTED, fields={"option": option, "fix": FLAG_FIX[option]})


def request_option_warnings(records: Iterable[RequestRecord]) -> list[ReportWarning]:
    """Client 4xx errors that name a request option we sent: say which flag turns it off."""
    rejections = OptionRejections()
    for r in records:
        rejections.add(r)
    return rejections.warnings()
