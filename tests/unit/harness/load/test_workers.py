"""Planning load over worker processes: a partition that keeps conversations whole and the global schedule."""

from __future__ import annotations

import numpy as np
import pytest

from speculab.errors import UserError
from speculab.harness.load.arrivals import ArrivalConfig, send_offsets
from speculab.harness.load.runner import LoadConfig
from speculab.harness.load.worker_plan import plan_workers, split
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
        (
            LoadConfig(concurrency=None, arrival=ArrivalConfig(rate_rps=1.0), duration_s=0.001),
            2,
            "the schedule has only 1 arrivals, fewer than the workers",
        ),
        (LoadConfig(concurrency=4), 0, "--workers must be at least 1"),
    ],
)
def test_mistakes_are_one_line(load, n, message):
    items = tuple(RequestSpec(index=i, prompt="p") for i in range(4))
    with pytest.raises(UserError, match=message):
        plan_workers(items, load, n)


def test_a_duration_closed_loop_cycles_each_share_and_shares_out_a_cap():
    items = tuple(RequestSpec(index=i, prompt=f"p{i}") for i in range(10))
    plans = plan_workers(items, LoadConfig(concurrency=4, duration_s=5.0), 2)
    assert [p.load.num_prompts for p in plans] == [None, None] and {p.load.duration_s for p in plans} == {5.0}
    assert [[i.index for i in p.items] for p in plans] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    capped = plan_workers(items, LoadConfig(concurrency=4, duration_s=5.0, num_prompts=7), 2)
    assert [p.load.num_prompts for p in capped] == [4, 3] and all(p.total == 10 for p in capped)


def test_a_duration_open_loop_draws_the_global_schedule_up_to_the_duration_and_numbers_repeats_like_one_process():
    items = tuple(RequestSpec(index=i, prompt=f"p{i}") for i in range(4))
    arrival = ArrivalConfig(rate_rps=20.0)
    plans = plan_workers(items, LoadConfig(concurrency=None, arrival=arrival, seed=3, duration_s=1.0), 2)
    gen = send_offsets(arrival, np.random.default_rng(3))
    want = []
    while (t := next(gen)) < 1.0:
        want.append(t)
    assert len(want) > len(items)  # the workload is cycled
    got = sorted((it.arrival_s, it.index) for p in plans for it in p.items)
    # arrival k sends item k mod 4, numbered k (pass c over item i: c * 4 + i), as the single-process run does
    assert got == [(t, k) for k, t in enumerate(want)]
    for p in plans:
        assert {it.index % 4 % 2 for it in p.items} == {p.worker}  # each item stays with its worker
        assert p.load.duration_s == 1.0 and p.load.num_prompts == len(p.items)


def test_a_worker_cycling_its_share_numbers_each_repeat_as_one_process_would():
    import asyncio

    from speculab.harness.load.worker import _Positional

    sent = []

    async def inner(session, spec, *, scheduled_s, warmup=False):
        sent.append((spec.index, spec.prompt, warmup))

    share = (RequestSpec(index=1, prompt="p1"), RequestSpec(index=3, prompt="p3"))
    request = _Positional(inner, share, total=4)
    for pos in range(5):
        asyncio.run(request(None, RequestSpec(index=pos, prompt="runner's"), scheduled_s=0.0))
    asyncio.run(request(None, RequestSpec(index=2, prompt="runner's"), scheduled_s=0.0, warmup=True))
    assert sent == [(1, "p1", False), (3, "p3", False), (5, "p1", False), (7, "p3", False), (9, "p1", False),
                    (1, "p1", True)]  # fmt: skip


def test_a_crashed_worker_is_named_with_what_is_known_of_its_end():
    from speculab.harness.load.coordinator import worker_warnings

    got = worker_warnings([
        {"worker": 0, "crashed": True, "exitcode": -9},
        {"worker": 1, "crashed": True, "error": "RayActorError: The actor died unexpectedly"},
        {"worker": 2, "start_lag_s": 0.0004, "start_uncertainty_s": 0.0008},
    ])  # fmt: skip
    lost = {"host": None, "node_ip": None}
    assert [(w.kind.value, w.fields) for w in got] == [
        ("worker_lost", {"worker": 0, **lost, "error": "", "exitcode": -9}),
        ("worker_lost", {"worker": 1, **lost, "error": "RayActorError: The actor died unexpectedly", "exitcode": None}),
        ("worker_late", {"worker": 2, "start_lag_s": 0.0004, "uncertainty_s": 0.0008}),
    ]


def test_a_worker_lost_mid_run_is_one_line_naming_its_host_with_rays_long_error_cut():
    from speculab.harness.load.coordinator import lost_workers, worker_warnings

    ray_error = "ActorUnavailableError: The actor 550f is unavailable: " + "RpcError: failed to connect " * 20
    lost = {"worker": 0, "crashed": True, "error": ray_error, "ray": True, "host": "b", "node_ip": "10.213.41.2"}
    fine = {"worker": 1, "ray": True, "host": "a", "node_ip": "10.213.41.1", "start_lag_s": 0.0}
    line = lost_workers([lost, fine])
    assert line == (
        f"client worker 0 on host b (10.213.41.2) failed ({ray_error[:100]}...) mid-run, before its share was done; "
        "every record it sent is kept"
    )
    assert "\n" not in line and lost_workers([fine]) is None
    # the warning keeps the whole error (the report cuts it where it words it)
    assert worker_warnings([lost])[0].fields == {
        "worker": 0, "host": "b", "node_ip": "10.213.41.2", "error": ray_error, "exitcode": None
    }  # fmt: skip
    died = lost_workers([{"worker": 3, "crashed": True, "exitcode": -9}, {**lost, "worker": 2}])
    assert died is not None and died.startswith("client worker 3 exited (code -9); client worker 2 on host b")
