"""Client errors that name a request option speculab sent (continuous usage stats, stream options, logprobs), read
from a run's records one at a time, and the hint naming the flag that turns each off."""

from __future__ import annotations

from collections.abc import Iterable

from speculab.harness.records import RequestRecord


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

    def hints(self) -> list[str]:
        """Client 4xx errors that name a request option we sent: say which flag turns it off."""
        hints = []
        if self.continuous_usage:
            hints.append("the server rejected stream_options.continuous_usage_stats: rerun with --no-continuous-usage")
        elif self.stream_options:
            hints.append("the server rejected stream_options: rerun with --no-include-usage")
        if self.logprobs:
            hints.append("the server rejected the logprobs request: rerun without --logprobs (or with a smaller N)")
        if self.invalid and not hints:
            hints.append(
                f"{self.invalid} requests were rejected as invalid (HTTP 400/422); see error messages in requests.jsonl"
            )
        # /v1/models answered (the preflight checks it), but the completions path did not: a chat-only server (or
        # one without chat) under the other --api
        if self.missing:
            hints.append(
                f"{self.missing} requests got HTTP 404/405: the server may not serve this endpoint; "
                "try the other --api (completions | chat)"
            )
        return hints


def request_option_hints(records: Iterable[RequestRecord]) -> list[str]:
    """Client 4xx errors that name a request option we sent: say which flag turns it off."""
    rejections = OptionRejections()
    for r in records:
        rejections.add(r)
    return rejections.hints()
