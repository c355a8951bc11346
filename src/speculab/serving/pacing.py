"""Waiting for a deadline precisely: asyncio's sleeps wake 1-2 ms late (epoll waits in whole milliseconds, and
Python 3.11 rounds the timeout up twice), which is the same order as the send-time errors we claim to avoid.
`sleep_until` sleeps to `spin_s` before the deadline and spends the rest yielding to the loop, so the event loop
still runs other tasks (streams being read, chunks written) while it waits, and the wait ends within ~0.05 ms.
The price is CPU while spinning: at most `spin_s` per deadline. Used by the load runner's open-loop sends and by
the mock server's scripted writes (one implementation of the mechanism)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

SEND_SPIN_S = 0.0015  # open-loop sends: covers asyncio's usual 1-2 ms overshoot (bench/trace_replay.py measures it)


async def sleep_until(deadline: float, clock: Callable[[], float], spin_s: float = 0.0) -> None:
    """Return at `deadline` on `clock` (seconds), or at once if it has passed."""
    delay = deadline - clock()
    if delay > spin_s:
        await asyncio.sleep(delay - spin_s)
        delay = spin_s
    # bounded on the loop's own clock too: an injected clock that does not advance (a test's) cannot spin forever
    loop = asyncio.get_running_loop()
    give_up = loop.time() + max(0.0, delay) + 0.001
    while clock() < deadline and loop.time() < give_up:
        await asyncio.sleep(0)
