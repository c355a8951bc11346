"""EndpointWatch: a URL arm's server is 'gone' only after a run of refused connections AND probes nobody answers."""

from __future__ import annotations

import asyncio

from speculab.harness.records import ErrorCategory, ErrorInfo, RequestRecord
from speculab.harness.servers.liveness import EndpointWatch, ExitWatch
from speculab.harness.servers.process import free_port
from speculab.mock.requests import MockConfig
from speculab.mock.server import running_mock_server
from speculab.report.phrases import warning_text


def rec(category: ErrorCategory | None) -> RequestRecord:
    err = ErrorInfo(category, f"{category.value}: refused") if category is not None else None
    return RequestRecord(0, 0.0, 0.0, 0.001, error=err)


CONNECT, DROPPED, HTTP, CANCELLED = (ErrorCategory.CONNECT, ErrorCategory.DROPPED, ErrorCategory.HTTP,
                                     ErrorCategory.CANCELLED)  # fmt: skip


async def _pending(coro: object) -> bool:
    """Whether an awaitable is still waiting after the loop has had a few turns (it never returns when gone)."""
    task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    done = task.done()
    task.cancel()
    return not done


def test_refused_connections_and_silent_probes_mean_gone() -> None:
    async def main() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            w = EndpointWatch(session, f"http://127.0.0.1:{free_port()}", probe_interval_s=0.01)
            w.see(rec(CONNECT))
            w.see(rec(CONNECT))
            assert not await _pending(w.admit())  # two refusals: nothing checked, requests still go
            w.see(rec(CONNECT))
            assert await _pending(w.admit())  # the third: requests are held while the probes ask
            await w.settle()
            assert w.gone.is_set()
            seen = w.evidence  # what showed it gone, as numbers: the report words the record, the error says it
            assert seen is not None and (seen.failures, seen.detail, seen.probes) == (3, "connect: refused", 3)
            assert seen.said().startswith(
                "3 requests in a row could not connect (connect: refused), nor could 3 probes of /v1/models over "
            )
            assert warning_text(seen.warning()) == (
                f"the server stopped answering mid-run, and the run stopped there: {seen.said()}"
            )
            assert await _pending(w.admit())  # gone: a request waits until the level's stop cancels it

    asyncio.run(main())


def test_the_evidence_keeps_the_reason_not_the_address() -> None:
    from speculab.harness.servers.liveness import _detail

    msg = "cannot connect: Cannot connect to host 127.0.0.1:4137 ssl:default [Connect call failed ('127.0.0.1', 4137)]"
    assert _detail(msg) == "Connect call failed ('127.0.0.1', 4137)"
    assert _detail("cannot connect: Cannot connect to host nohost:80 ssl:default [Name or service not known]") == (
        "Name or service not known"
    )
    assert _detail("cannot connect: refused") == "refused"


def test_a_server_that_answers_the_probe_is_not_gone() -> None:
    async def main() -> None:
        import aiohttp

        async with running_mock_server(MockConfig()) as url, aiohttp.ClientSession() as session:
            w = EndpointWatch(session, url, probe_interval_s=0.01)
            for _ in range(5):
                w.see(rec(CONNECT))
            await w.settle()
            assert not w.gone.is_set() and w.connect_failures == 0
            assert not await _pending(w.admit())  # released: sending resumes

    asyncio.run(main())


def test_anything_that_answered_restarts_the_count_but_a_cancelled_request_does_not() -> None:
    async def main() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            w = EndpointWatch(session, f"http://127.0.0.1:{free_port()}", probe_interval_s=0.01)
            for answered in (None, HTTP, DROPPED):
                w.see(rec(CONNECT))
                w.see(rec(CONNECT))
                w.see(rec(answered))  # a success, an HTTP error, a dropped stream: something was listening
                assert w.connect_failures == 0
            w.see(rec(CONNECT))
            w.see(rec(CANCELLED))  # says nothing either way
            w.see(rec(CONNECT))
            assert w.connect_failures == 2 and not await _pending(w.admit())
            w.cancel()

    asyncio.run(main())


class _Server:
    """ExitWatch's view of a launched server: whether its process is on its way out."""

    def __init__(self, exiting: bool) -> None:
        self.leaving = exiting

    def exiting(self) -> bool:
        return self.leaving


def test_a_refused_request_from_an_exiting_server_holds_the_next_ones_until_its_exit_is_seen() -> None:
    async def main() -> None:
        alive = ExitWatch(_Server(False))
        alive.see(rec(CONNECT))
        assert not await _pending(alive.admit())  # refused by a live process: the load goes on as offered
        leaving = ExitWatch(_Server(True))
        leaving.see(rec(HTTP))
        assert not await _pending(leaving.admit())  # an answer: nothing to hold
        leaving.see(rec(CONNECT))
        assert await _pending(leaving.admit())  # refused while exiting: held until the exit is seen
        leaving.gone.set()  # ServerProcess.watch saw it exit
        await leaving.settle()
        assert await _pending(leaving.admit())  # gone: held until the level's stop cancels it
        brief = ExitWatch(_Server(True), hold_s=0.01)  # an exit never seen: held no longer than hold_s
        brief.see(rec(CONNECT))
        await brief.settle()
        assert not brief.gone.is_set() and not await _pending(brief.admit())

    asyncio.run(main())
