"""When each chunk of a mock request is due, and what it carries: per stream (`PacedChunks`, the default script) or
by the step-batched engine loop (`StepLoop`, `BatchedChunks`). The rules are `speculab.mock.script`'s; here they run.

The engine loop (one per server) plans each step when it starts (its batch, its duration, each member's tokens),
waits for the step's absolute end, then hands every member its chunk at that end, all at once, and plans the next
step before yielding: the handlers write their chunks when the loop task yields, so a request that just got its last
chunk still counts as running when the next step's batch is taken (script.py says why). Steps follow each other
against absolute times, so a late wake-up never shifts the next step. The loop's wait is injected (`wait_until`):
the server's waits on the event loop's clock with its `spin_s`, the unit tests on a scripted clock.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from speculab.mock.script import MockConfig, chunk_sizes, conditional_acceptance, draw_accepted, step_s
from speculab.serving.pacing import sleep_until

WaitUntil = Callable[[float], Awaitable[None]]  # returns at a deadline (seconds on the loop's clock)


async def sleep_until_on_loop(deadline: float, spin_s: float = 0.0) -> None:
    """Sleep until `deadline` on the event loop's clock; `spin_s` > 0 ends the sleep that early and yields to the loop
    for the rest (serving.pacing: asyncio's sleeps overshoot by 1-2 ms, and other streams' writes still run)."""
    await sleep_until(deadline, asyncio.get_running_loop().time, spin_s)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a request: its tokens, when it is due, and the verification step that made it."""

    tokens: int
    step_tokens: int | None  # tokens its step yielded (accepted + 1 bonus; more than `tokens` when max_tokens cut
    # the step short); None: no verification step (the step-batched mode's first token comes from prefill alone)
    due: float  # loop clock, seconds


# --------------------------------------------------------------------------------------------------------------
# Per stream: chunk sizes from the pattern, each gap from the number of requests running


class PacedChunks:
    """The default script: chunk i+1 is due `gap_s` x (1 + `decode_slowdown_per_request` x (running - 1)) after chunk
    i, running read when chunk i has been written; sizes follow `tokens_per_chunk`."""

    def __init__(
        self,
        cfg: MockConfig,
        first_due: float,
        n_tokens: int,
        running: Callable[[], int],
        switches: Callable[[], int] = lambda: 0,
    ):
        self.cfg, self.running, self.switches = cfg, running, switches
        self.sizes = chunk_sizes(cfg.chunk_pattern, n_tokens)
        self.i, self.due = 0, first_due
        # the switches seen so far: one after this stream began delays its next gap, once
        self.seen = switches()

    def fault_token(self, pos: float) -> int:
        """The token offset of the chunk a mid-stream fault strikes before: a chunk after the first when there are
        two or more, drawn by `pos` in [0, 1)."""
        n = len(self.sizes)
        return sum(self.sizes[: 1 + int(pos * (n - 1))]) if n > 1 else 0

    async def next(self) -> Chunk | None:
        cfg = self.cfg
        if self.i > 0:
            self.due += cfg.gap_s * (1 + cfg.decode_slowdown_per_request * (max(self.running(), 1) - 1))
        # the load crossed cfg.switch_above while this stream ran: its next gap (never its first token) waits once
        if self.i > 0 and self.switches() != self.seen:
            self.seen = self.switches()
            self.due += cfg.switch_stall_s
        pattern = cfg.chunk_pattern
        chunk = Chunk(self.sizes[self.i], pattern[self.i % len(pattern)], self.due)
        self.i += 1
        return chunk

    def leave(self) -> None:
        """A stall begins (nothing to release: the stream's schedule is its own)."""

    def resume(self, chunk: Chunk, now: float) -> Chunk:
        """After a stall: the held chunk is due now at the earliest, and the later ones follow it."""
        self.due = max(self.due, now)
        return replace(chunk, due=self.due)

    def close(self) -> None:
        """The request ended."""


# --------------------------------------------------------------------------------------------------------------
# Step-batched: one engine loop per server


@dataclass(eq=False, slots=True)
class Member:
    """One request in the engine loop: the tokens it still needs and the inbox its chunks go to (None: the server
    is shutting down)."""

    left: int
    inbox: asyncio.Queue[Chunk | None] = field(default_factory=asyncio.Queue)
    started: bool = False  # its first step (the prefill's token) is done
    active: bool = False  # in the loop (joining or in the batch); a member that left gets no more chunks
    ready_at: float = 0.0  # when it joined (loop clock)


class StepLoop:
    """The step-batched engine: every member advances each step (script.py has the rules)."""

    def __init__(self, cfg: MockConfig, rng: random.Random, running: Callable[[], int], wait_until: WaitUntil):
        self.cfg, self.rng, self.running, self.wait_until = cfg, rng, running, wait_until
        self.rates = conditional_acceptance(cfg)
        self.members: list[Member] = []  # in the batch
        self.joining: list[Member] = []  # ready, waiting for the next step to start
        self.recent_batches: deque[int] = deque(maxlen=1024)  # the last steps' batches, oldest first (tests)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def join(self, member: Member, ready_at: float) -> None:
        """`member` is ready (prefill done, or back from a stall) at `ready_at`: it joins the next step to start."""
        if self._closed:  # the server is stopping: nothing more is stepped
            member.inbox.put_nowait(None)
            return
        member.active, member.ready_at = True, ready_at
        self.joining.append(member)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="speculab-mock-steps")

    def leave(self, member: Member) -> None:
        """`member` ended (or stalls): out of the batch; a chunk already planned for it is dropped."""
        if member.active:
            member.active = False
            for group in (self.members, self.joining):
                if member in group:
                    group.remove(member)

    def close(self) -> None:
        """The server is stopping: end the loop and tell every member (their handlers drop their streams)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        self._release()

    def _release(self) -> None:
        for m in (*self.members, *self.joining):
            m.active = False
            m.inbox.put_nowait(None)
        self.members.clear()
        self.joining.clear()

    async def _run(self) -> None:
        try:
            await self._step_on()
        finally:  # cancelled, or a fault of the loop itself: no handler is left waiting for a step that never comes
            self._closed = True
            self._release()

    async def _step_on(self) -> None:
        end = float("-inf")  # the last step's end
        while True:
            while not self.members and not self.joining:
                self._wake.clear()
                await self._wake.wait()
            # idle: the step starts when its first member was ready (never before the last step ended)
            start = end if self.members else max(end, min(m.ready_at for m in self.joining))
            self.members.extend(self.joining)
            self.joining.clear()
            plan, end = self._plan(start)
            await self.wait_until(end)
            self._deliver(plan)

    def _plan(self, start: float) -> tuple[list[tuple[Member, Chunk]], float]:
        """The step starting at `start`: each member's chunk, and the step's end. The batch is every request running
        on the server (those in prefill too), never fewer than the members."""
        batch = max(self.running(), len(self.members))
        self.recent_batches.append(batch)
        end = start + step_s(self.cfg, batch)
        return [(m, self._chunk(m, end)) for m in self.members], end

    def _chunk(self, m: Member, due: float) -> Chunk:
        if not m.started:  # the prefill's token: one, no drafts
            return Chunk(1, None, due)
        step_tokens = 1 + draw_accepted(self.rates, self.rng) if self.cfg.num_speculative_tokens > 0 else 1
        return Chunk(min(step_tokens, m.left), step_tokens, due)

    def _deliver(self, plan: list[tuple[Member, Chunk]]) -> None:
        for m, chunk in plan:
            if m.active:
                m.started = True
                m.left -= chunk.tokens
                m.inbox.put_nowait(chunk)
        for m in [m for m in self.members if m.left <= 0]:
            m.active = False
            self.members.remove(m)


class BatchedChunks:
    """One request's chunks in the step-batched mode: it joins the engine loop when ready, then takes a chunk per
    step. A request's chunk count is drawn as it goes, so a mid-stream fault is placed by token, not by chunk."""

    def __init__(self, loop: StepLoop, ready_at: float, n_tokens: int, wait_until: WaitUntil):
        self.loop, self.ready_at, self.n_tokens, self.wait_until = loop, ready_at, n_tokens, wait_until
        self.member = Member(n_tokens)
        self.joined = False

    def fault_token(self, pos: float) -> int:
        """A mid-stream fault strikes before the first chunk at or past this token: after the first chunk when
        there are two tokens or more."""
        return 1 + int(pos * (self.n_tokens - 1)) if self.n_tokens > 1 else 0

    async def next(self) -> Chunk | None:
        if not self.joined:
            await self.wait_until(self.ready_at)
            self.loop.join(self.member, self.ready_at)
            self.joined = True
        return await self.member.inbox.get()

    def leave(self) -> None:
        self.loop.leave(self.member)

    def resume(self, chunk: Chunk, now: float) -> Chunk:
        self.loop.join(self.member, now)
        return chunk

    def close(self) -> None:
        self.loop.leave(self.member)
