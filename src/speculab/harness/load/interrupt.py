"""Ctrl-C and SIGTERM for every command that offers load: the first one stops cleanly, a second Ctrl-C at once.

One mechanism for `bench`, `run`/`demo` and `diagnose`: `run_interruptible(main)` runs `main(stop)` on a fresh
event loop. The first SIGINT or SIGTERM (`timeout`, a CI job's cancel, `kill`) sets `stop`: the runner cancels
in-flight requests and records them as cancelled, launched servers are stopped and results written. After that a
second Ctrl-C raises KeyboardInterrupt at once (the default handler is back), which still runs every `finally`, so
launched servers are stopped; further SIGTERMs only set `stop` again, because their default action would kill the
process before it could stop the servers it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

from speculab.serving.receive_stamps import run_stamping

T = TypeVar("T")
_SIGNAL_ERRORS = (NotImplementedError, RuntimeError, ValueError)  # no loop signal support (Windows, a thread)


def run_interruptible(main: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """`asyncio.run(main(stop))` with `stop` set by the first Ctrl-C or SIGTERM (see the module doc), on a loop that
    reads the kernel's receive stamps (serving.receive_stamps)."""

    async def runner() -> T:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)  # restores the default: a second Ctrl-C stops at once

        with contextlib.suppress(*_SIGNAL_ERRORS):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        with contextlib.suppress(*_SIGNAL_ERRORS):
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        try:
            return await main(stop)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(*_SIGNAL_ERRORS):
                    loop.remove_signal_handler(sig)

    return run_stamping(runner())  # chunks timed at the kernel's receive (serving.receive_stamps)
