"""How the lifecycle maps the runner's request numbers back to workload items (no server: a recording fake)."""

from __future__ import annotations

import asyncio

import pytest

from speculab.commands.run.blocks import _BlockRequest
from speculab.harness.load.runner import LoadConfig, run_load
from speculab.harness.records import RequestRecord, RequestSpec


def items(n: int) -> tuple[RequestSpec, ...]:
    return tuple(RequestSpec(index=i, prompt=f"prompt {i}", seed=100 + i) for i in range(n))


class Recorder:
    """A RequestFunc that records which spec it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[RequestSpec, bool]] = []

    async def __call__(self, session: object, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
                       ) -> RequestRecord:  # fmt: skip
        self.sent.append((spec, warmup))
        await asyncio.sleep(0)
        return RequestRecord(spec.index, scheduled_s, scheduled_s, scheduled_s + 0.001, warmup=warmup)


@pytest.mark.parametrize("concurrency", [1, 2, 4])
@pytest.mark.parametrize("warmup", [0, 2, 3, 4, 8, 13])
def test_a_block_sends_its_items_and_warmup_the_workloads_first_items(concurrency: int, warmup: int) -> None:
    workload = items(10)
    block = workload[6:8]  # a two-URL block at concurrency 1: 2 requests, warmup may be more than that
    rec = Recorder()
    records: list[RequestRecord] = []
    cfg = LoadConfig(concurrency=concurrency, num_prompts=len(block), warmup=warmup)
    asyncio.run(run_load(block, _BlockRequest(rec, block, workload), None, cfg, on_record=records.append))  # type: ignore[arg-type]
    warm = [s for s, w in rec.sent if w]
    measured = [s for s, w in rec.sent if not w]
    assert sorted(s.index for s in warm) == sorted(i % 10 for i in range(warmup))
    assert all(s == workload[s.index] for s in warm)  # the item itself (prompt, seed), not a renumbered copy
    assert sorted(measured, key=lambda s: s.index) == list(block)
    assert sorted(r.index for r in records if not r.warmup) == [6, 7]


def test_launch_mode_warmup_larger_than_the_workload_cycles_it() -> None:
    """Launch mode's block is the whole workload; warmup_requests above num_prompts used to index past it too."""
    workload = items(3)
    rec = Recorder()
    cfg = LoadConfig(concurrency=1, num_prompts=3, warmup=5)
    asyncio.run(run_load(workload, _BlockRequest(rec, workload, workload), None, cfg, on_record=lambda r: None))  # type: ignore[arg-type]
    assert [s.index for s, w in rec.sent if w] == [0, 1, 2, 0, 1]
    assert [s for s, w in rec.sent if not w] == list(workload)
