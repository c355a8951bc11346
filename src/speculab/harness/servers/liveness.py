"""A server speculab did not launch: whether it is still there, told from what its requests see.

Launch mode watches its server's process and stops the moment it exits. A server behind a URL (two-URL mode) has no
process to watch; when it goes away every request fails at once with a refused connection, and a run would go on
recording hundreds of failures that measure nothing. One refused connection is no proof, though (a restart of a
proxy, a port briefly exhausted), so the rule needs two kinds of evidence:

1. `threshold` requests in a row could not connect (`ErrorCategory.CONNECT`). Anything else — a success, an HTTP
   error, a dropped stream — means something answered, and starts the count again.
2. Then new requests are held back (not sent, so they cost nothing and record nothing) while /v1/models is asked
   `probes` times, `probe_interval_s` apart. Any HTTP answer, of any status, lets them go: the endpoint is there.
   No answer at all to every probe: `gone` is set, and the caller stops the level (`run`) or the run (`bench`).

A launched server's process is watched (`ServerProcess.watch` sets `gone` the moment it exits), but the kernel closes
an exiting process's sockets before it reports the exit: `ExitWatch` holds requests back after one that could not
connect to a server whose process is on its way out, until the exit is seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Protocol

import aiohttp

from speculab.harness.client.body import MAX_PROBE_BYTES, read_body
from speculab.harness.client.endpoint import Clock
from speculab.harness.records import ErrorCategory, RequestRecord
from speculab.harness.results.warnings import ReportWarning, WarningKind


def _detail(message: str) -> str:
    """The operating system's reason in a connection error's message ("Connect call failed ...", "Name or service
    not known"), without the host and port the caller names anyway."""
    m = re.search(r"\[([^\]]+)\]\s*$", message)
    return (m.group(1) if m else message.removeprefix("cannot connect: "))[:120]


class _Exiting(Protocol):
    def exiting(self) -> bool: ...  # ServerProcess.exiting: the process has exited or is on its way out


@dataclass(frozen=True, slots=True)
class GoneEvidence:
    """What showed a server gone: `failures` requests in a row could not connect (`detail`: the operating system's
    reason for the first), nor could `probes` probes of /v1/models over `probe_s` seconds."""

    failures: int
    detail: str
    probes: int
    probe_s: float

    def warning(self) -> ReportWarning:
        """The record a run's summary and manifest keep (the report words it)."""
        return ReportWarning(WarningKind.SERVER_GONE, fields=asdict(self))

    def said(self) -> str:
        """The evidence in the one-line error a command exits with (said, not kept: the record's sentence, the same
        words, is the report's: report/words/runs' SERVER_GONE)."""
        return (
            f"{self.failures} requests in a row could not connect ({self.detail}), nor could {self.probes} probes of "
            f"/v1/models over {self.probe_s:.1f} s"
        )


class _Gate:
    """Requests held back while a check is under way: `admit` before each send, `settle` to wait for the check,
    `cancel` to abandon it; once `gone` is set, held requests never go (they are cancelled with the level)."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()
        self.evidence: GoneEvidence | None = None  # set with `gone` where requests showed it (a URL arm)
        self._open = asyncio.Event()  # set: requests may be sent
        self._open.set()
        self._check: asyncio.Task[None] | None = None

    async def admit(self) -> None:
        """Before each send: returns at once unless a check is under way (then when it found the server); once the
        endpoint is gone it never returns, and the request is cancelled with the level."""
        if not self._open.is_set():
            await self._open.wait()

    async def settle(self) -> None:
        """Wait for a check under way to conclude (so a block's end knows whether the endpoint is gone)."""
        if self._check is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._check)

    def cancel(self) -> None:
        """Abandon a check under way (the run is stopping anyway)."""
        if self._check is not None:
            self._check.cancel()

    def _hold(self, check: Callable[[], Awaitable[None]]) -> None:
        self._open.clear()
        self._check = asyncio.create_task(self._run(check))

    async def _run(self, check: Callable[[], Awaitable[None]]) -> None:
        try:
            await check()
        finally:
            self._check = None
            if not self.gone.is_set():
                self._open.set()


class ExitWatch(_Gate):
    """A launched server's requests, beside the watch on its process, which sets `gone` when the process exits.
    After a request that could not connect, while the process is exiting (`ServerProcess.exiting`), the next ones
    wait for the exit to be seen (at most `hold_s`): without it a run at concurrency 1 recorded 82 refused requests
    between the server's sockets closing and its exit being reported. A refused connection from a process that is
    not exiting holds nothing back: the load goes on as offered."""

    def __init__(self, server: _Exiting, hold_s: float = 5.0):
        super().__init__()
        self.server, self.hold_s = server, hold_s

    def see(self, rec: RequestRecord) -> None:
        """Every finished request of this arm."""
        refused = rec.error is not None and rec.error.category is ErrorCategory.CONNECT
        if refused and self._check is None and not self.gone.is_set() and self.server.exiting():
            self._hold(self._until_gone)

    async def _until_gone(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.gone.wait(), self.hold_s)


class EndpointWatch(_Gate):
    """Watches one URL arm's requests (`see` each record, `admit` before each send) for a server that has gone."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        *,
        threshold: int = 3,
        probes: int = 3,
        probe_interval_s: float = 0.5,
        probe_timeout_s: float = 5.0,
        clock: Clock = time.perf_counter,
    ):
        super().__init__()
        self.session, self.base_url, self.headers = session, base_url, dict(headers or {})
        self.threshold, self.probes = threshold, probes
        self.probe_interval_s, self.probe_timeout_s, self.clock = probe_interval_s, probe_timeout_s, clock
        self.connect_failures = 0  # requests in a row that could not connect
        self.first_failure = ""  # the first of them: its error message

    def see(self, rec: RequestRecord) -> None:
        """Every finished request of this arm, in the order they finish."""
        if rec.error is not None and rec.error.category is ErrorCategory.CONNECT:
            if self.connect_failures == 0:
                self.first_failure = rec.error.message
            self.connect_failures += 1
            if self.connect_failures >= self.threshold and self._check is None and not self.gone.is_set():
                self._hold(self._probe)
        elif rec.error is None or rec.error.category is not ErrorCategory.CANCELLED:
            self.connect_failures = 0  # something answered (a cancelled request says nothing either way)

    async def _answers(self) -> bool:
        try:
            timeout = aiohttp.ClientTimeout(total=self.probe_timeout_s)
            async with self.session.get(self.base_url + "/v1/models", headers=self.headers, timeout=timeout) as r:
                await read_body(r, MAX_PROBE_BYTES, truncate=True)  # bounded: a broken server may never stop
                return True  # any status: something is listening and speaking HTTP
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    async def _probe(self) -> None:
        t0 = self.clock()
        for i in range(self.probes):
            if i:
                await asyncio.sleep(self.probe_interval_s)
            if await self._answers():
                self.connect_failures = 0
                return
        failures, detail = self.connect_failures, _detail(self.first_failure)
        self.evidence = GoneEvidence(failures, detail, self.probes, self.clock() - t0)
        self.gone.set()


async def set_when(target: asyncio.Event, *sources: asyncio.Event) -> None:
    """Set `target` as soon as any of `sources` is set (run as a task; cancel it when done): a load's one stop, from
    the user's Ctrl-C and a watch's `gone` alike."""
    waits = [asyncio.create_task(e.wait()) for e in sources]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        target.set()
    finally:
        for w in waits:
            w.cancel()
