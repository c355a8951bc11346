"""Run the mock server in a child process (its own CPU and event loop, as a real server would have), so timing
tests measure the client, not contention between client and server on one event loop.

The children are forked from a fork server that imported the mock once (multiprocessing's "forkserver" start method,
one per pytest-xdist worker, started on first use): a child started with `python -c` paid about 0.8 s of CPU importing
aiohttp and the mock before it served a byte, 64 times a suite run (85 s of CPU on the 2-core VM, 2026-12-07, process
accounting). A forked child is still a process of its own, with a fresh event loop made after the fork.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from tests import sharing

_FORKSERVER = multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(["speculab.mock.script", "speculab.mock.server"])
START_TIMEOUT_S = 60.0  # the first child also waits for the fork server to start and import the mock


def _serve(cfg: dict[str, Any], ready: Connection, stop: Connection, niceness: int, parent: int) -> None:
    """The child: serve `MockConfig(**cfg)` on 127.0.0.1:free-port, send the URL, serve until the parent hangs up."""
    from speculab.mock.script import MockConfig
    from speculab.mock.server import running_mock_server

    # the parent's priority and CPU cgroup, as a child it started itself would have: the fork server keeps the ones of
    # the moment it started (a mock forked in the suite's idle background for a held test would fall behind its
    # script: tests/sharing.py)
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    sharing.follow(parent)

    def wait_for_hang_up() -> None:
        with contextlib.suppress(EOFError):
            stop.recv_bytes()

    async def main() -> None:
        async with running_mock_server(MockConfig(**cfg)) as url:
            ready.send(url)
            await asyncio.get_running_loop().run_in_executor(None, wait_for_hang_up)

    asyncio.run(main())


@contextlib.contextmanager
def mock_process(**cfg: Any) -> Iterator[str]:
    """Start `MockConfig(**cfg)` on 127.0.0.1:free-port in a child process; yields its base URL."""
    with mock_child(**cfg) as (url, _):
        yield url


@contextlib.contextmanager
def mock_child(**cfg: Any) -> Iterator[tuple[str, BaseProcess]]:
    """`mock_process`, also yielding the child, for tests that kill the server mid-run (`child.kill()`)."""
    ready_r, ready_w = _FORKSERVER.Pipe(duplex=False)
    stop_r, stop_w = _FORKSERVER.Pipe(duplex=False)
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    child = _FORKSERVER.Process(target=_serve, args=(cfg, ready_w, stop_r, niceness, os.getpid()), daemon=True)
    child.start()
    ready_w.close()  # the child holds its own ends now: the parent's copies would keep the pipes open
    stop_r.close()
    try:
        try:
            if not ready_r.poll(START_TIMEOUT_S):
                raise RuntimeError(f"mock server did not start in {START_TIMEOUT_S:g} s")
            url = ready_r.recv()
        except EOFError:
            child.join(5)
            raise RuntimeError(f"mock server did not start (exit {child.exitcode})") from None
        yield url, child
    finally:
        stop_w.close()  # the child's wait ends: it stops serving and exits
        ready_r.close()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
