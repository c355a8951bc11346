"""The step-batched engine loop on a scripted clock (issue 49): who is in each step, when each chunk is due, what it
carries; and the per-stream schedule it sits beside."""

from __future__ import annotations

import asyncio
import random

import pytest

from speculab.mock.script import MockConfig
from speculab.mock.timing import Chunk, Member, PacedChunks, StepLoop

# a = 10 ms, b = 1 ms per request, d = 0.5 ms per request x draft; every draft accepted: 3 tokens per decode step
ENGINE = {"step_batched": True, "step_s": 0.010, "step_s_per_request": 0.001, "verify_s_per_request_token": 0.0005}
ALWAYS = MockConfig(**ENGINE, num_speculative_tokens=2, forced_acceptance_rates=(1.0, 1.0))


class ScriptedClock:
    """The loop's clock: waiting for a deadline moves it there at once."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    async def wait_until(self, deadline: float) -> None:
        self.waits.append(deadline)
        self.now = max(self.now, deadline)
        await asyncio.sleep(0)


async def _drain(member: Member) -> list[Chunk]:
    chunks = []
    while member.left > 0 or not member.inbox.empty():
        chunk = await member.inbox.get()
        assert chunk is not None
        chunks.append(chunk)
    return chunks


def _run(cfg: MockConfig, scenario, running=lambda: 0):
    async def main():
        clock = ScriptedClock()
        loop = StepLoop(cfg, random.Random(0), running, clock.wait_until)
        try:
            return await scenario(loop, clock)
        finally:
            loop.close()

    return asyncio.run(main())


def test_every_member_advances_each_step_and_the_first_step_gives_the_prefill_token_alone() -> None:
    async def scenario(loop: StepLoop, clock: ScriptedClock):
        a, b = Member(8), Member(4)
        loop.join(a, 0.0)
        loop.join(b, 0.0)
        return await asyncio.gather(_drain(a), _drain(b)), list(loop.recent_batches)

    (a, b), batches = _run(ALWAYS, scenario, running=lambda: 2)
    step = 0.010 + 0.001 * 2 + 0.0005 * 2 * 2  # 14 ms at batch 2, k = 2
    assert [c.tokens for c in a] == [1, 3, 3, 1]  # 8 tokens: the prefill's, two whole steps, the last cut to fit
    assert [c.step_tokens for c in a] == [None, 3, 3, 3]  # the cut step still counts its whole acceptance
    assert [c.tokens for c in b] == [1, 3]
    assert [c.due for c in a] == pytest.approx([step, 2 * step, 3 * step, 4 * step])
    assert [c.due for c in b] == pytest.approx([step, 2 * step])
    assert batches == [2, 2, 2, 2]  # the batch is what runs on the server, not only who decodes


def test_a_request_ready_mid_step_joins_the_next_step() -> None:
    async def scenario(loop: StepLoop, clock: ScriptedClock):
        a, b = Member(3), Member(1)
        loop.join(a, 0.0)
        await asyncio.sleep(0)  # the loop plans its first step, with a alone
        loop.join(b, 0.005)  # ready 5 ms into that step
        return await asyncio.gather(_drain(a), _drain(b))

    a, b = _run(ALWAYS, scenario, running=lambda: 1)
    step = 0.010 + 0.001 + 0.0005 * 2  # 12 ms: the batch is 1 (running), never fewer than the members
    assert [c.due for c in a] == pytest.approx([step, step + 0.014])  # second step: 2 members, 14 ms
    assert [c.due for c in b] == pytest.approx([step + 0.014])  # waited for the step in progress


def test_an_idle_loop_starts_when_the_first_member_was_ready_and_steps_back_to_back() -> None:
    async def scenario(loop: StepLoop, clock: ScriptedClock):
        a = Member(2)
        loop.join(a, 1.0)
        first = await _drain(a)
        b = Member(1)
        loop.join(b, 5.0)  # the loop went idle in between
        return first, await _drain(b), clock.waits

    first, second, waits = _run(MockConfig(**ENGINE), scenario, running=lambda: 1)
    assert [c.due for c in first] == pytest.approx([1.011, 1.022])  # plain steps: a + b = 11 ms
    assert [(c.tokens, c.step_tokens) for c in first] == [(1, None), (1, 1)]  # a plain step is a step of one token
    assert [c.due for c in second] == pytest.approx([5.011])
    assert waits == pytest.approx([1.011, 1.022, 5.011])  # against absolute ends: lateness never accumulates


def test_a_member_that_leaves_gets_nothing_more_and_close_tells_the_rest() -> None:
    async def scenario(loop: StepLoop, clock: ScriptedClock):
        a, b = Member(100), Member(100)
        loop.join(a, 0.0)
        loop.join(b, 0.0)
        await a.inbox.get()
        loop.leave(a)  # its chunk of the step under way is dropped
        await b.inbox.get()
        await b.inbox.get()
        loop.close()
        return a.inbox.qsize(), b.inbox.get_nowait()

    left_over, last = _run(ALWAYS, scenario, running=lambda: 2)
    assert left_over == 0 and last is None


def test_drawn_acceptance_follows_the_content_rates_per_position() -> None:
    cfg = MockConfig(**ENGINE, num_speculative_tokens=3, acceptance_rates=(0.8, 0.5, 0.5))

    async def scenario(loop: StepLoop, clock: ScriptedClock):
        members = [Member(2000) for _ in range(4)]
        for m in members:
            loop.join(m, 0.0)
        return await asyncio.gather(*(_drain(m) for m in members))

    steps = [c.step_tokens for chunks in _run(cfg, scenario, running=lambda: 4) for c in chunks[1:]]
    at_least = [sum(s > j + 1 for s in steps) / len(steps) for j in range(3)]  # P(position j accepted)
    assert at_least == pytest.approx([0.8, 0.4, 0.2], abs=0.02)


def test_the_per_stream_schedule_reads_the_running_count_for_each_gap() -> None:
    running = [1]
    cfg = MockConfig(gap_s=0.02, tokens_per_chunk=(2, 1), output_tokens=5, decode_slowdown_per_request=0.5)

    async def main() -> list[Chunk]:
        paced = PacedChunks(cfg, 1.0, 5, lambda: running[0])
        out = [await paced.next()]
        running[0] = 3  # two more requests in flight: the next gap is 0.02 x (1 + 0.5 x 2)
        out.append(await paced.next())
        out.append(paced.resume(await paced.next(), 2.0))  # a stall ending at 2.0: the chunk is due then
        return out

    chunks = asyncio.run(main())
    assert [(c.tokens, c.step_tokens) for c in chunks] == [(2, 2), (1, 1), (2, 2)]
    assert [c.due for c in chunks] == pytest.approx([1.0, 1.04, 2.0])
    assert PacedChunks(cfg, 0.0, 5, lambda: 1).fault_token(0.99) == 3  # chunks 2, 1, 2: the third starts at token 3


def test_a_loop_that_fails_leaves_no_request_waiting_for_a_step() -> None:
    def broken() -> int:
        raise RuntimeError("the running count is broken")

    async def scenario(loop: StepLoop, clock: ScriptedClock):
        a = Member(5)
        loop.join(a, 0.0)
        first = await a.inbox.get()
        late = Member(5)
        loop.join(late, 1.0)  # after the loop ended: told at once, never stepped
        return first, late.inbox.get_nowait()

    assert _run(ALWAYS, scenario, running=broken) == (None, None)


def test_a_switch_while_a_stream_runs_lengthens_its_next_gap_once_never_its_first_token() -> None:
    switches = [0]
    cfg = MockConfig(gap_s=0.02, output_tokens=5, switch_above=8, switch_stall_s=0.5)

    async def main() -> list[float]:
        late = PacedChunks(cfg, 1.0, 5, lambda: 9, lambda: switches[0])
        switches[0] = 1  # the load crossed 8 before this stream's first token: its first chunk is on time
        due = [(await late.next()).due]
        due += [(await late.next()).due for _ in range(2)]  # the gap after it waits the switch's 0.5 s, once
        after = PacedChunks(cfg, 1.0, 5, lambda: 9, lambda: switches[0])  # began after the switch: no wait
        return [*due, (await after.next()).due, (await after.next()).due]

    assert asyncio.run(main()) == pytest.approx([1.0, 1.52, 1.54, 1.0, 1.02])
