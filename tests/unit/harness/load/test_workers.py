"""Planning load over worker processes: a partition that keeps conversations whole and the global schedule."""

from __future__ import annotations

import numpy as np
import pytest

from speculab.errors import UserError
from speculab.harness.load.arrivals import ArrivalConfig, send_offsets
from speculab.harness.load.runner import LoadConfig
from speculab.harness.load.workers import plan_workers, split
from speculab.harness.records import RequestSpec
from speculab.harness.workload.items import SourceItem, finalize


def test_split_spreads_the_remainder_over_the_first_workers():
    assert split(10, 4) == [3, 3, 2, 2] and split(64, 2) == [32, 32] and split(0, 3) == [0, 0, 0]


def test_closed_loop_splits_streams_and_keeps_each_conversation_in_one_worker():
    src = [SourceItem(f"c{j}", prompt=f"q{j}", later_turns=("again",) if j % 2 else ()) for j in range(6)]
    items = finalize(src, 0, None, "chat")  # 9 requests: 6 conversations, three of them two turns
    plans = plan_workers(items, LoadConfig(concurrency=5, warmup=3), 2)
    assert [p.load.concurrency for p in plans] == [3, 2] and [p.load.warmup for p in plans] == [2, 1]
    assert sorted(i.index for p in plans for i in p.items) == list(range(9))  # every request, once
    for p in plans:
        convs = {i.conversation_id for i in p.items if i.conversation_id}
        for c in convs:  # both turns of a conversation in the same worker, in order
            assert [i.turn for i in p.items if i.conversation_id == c] == [1, 2]
        assert p.load.num_prompts == len(p.items)


def test_open_loop_hands_each_worker_the_global_schedule():
    items = tuple(RequestSpec(index=i, prompt=f"p{i}") for i in range(20))
    arrival = ArrivalConfig(rate_rps=50.0)
    plans = plan_workers(items, LoadConfig(concurrency=None, arrival=arrival, seed=7), 3)
    gen = send_offsets(arrival, np.random.default_rng(7))
    want = {i: next(gen) for i in range(20)}  # the single-process schedule
    got = {it.index: it.arrival_s for p in plans for it in p.items}
    assert got == want
    assert all(p.load.trace_speed == 1.0 and p.load.trace_origin_s == 0.0 for p in plans)


@pytest.mark.parametrize(
    ("load", "n", "message"),
    [
        (LoadConfig(concurrency=1), 2, "--workers 2 needs --concurrency of at least 2"),
        (LoadConfig(concurrency=4, duration_s=5.0), 2, "--duration with --workers is not supported yet"),
        (LoadConfig(concurrency=4), 0, "--workers must be at least 1"),
    ],
)
def test_mistakes_are_one_line(load, n, message):
    items = tuple(RequestSpec(index=i, prompt="p") for i in range(4))
    with pytest.raises(UserError, match=message):
        plan_workers(items, load, n)
