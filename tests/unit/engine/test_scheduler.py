"""Scheduling decisions: decodes first, prompt chunks within the token budget, FCFS slots, the queue bound."""

from __future__ import annotations

import pytest

from speculab.engine.scheduler import QueueFull, Scheduler, SchedulerConfig
from speculab.engine.sequence import FinishReason, SamplingParams, Sequence, SequenceStatus


def seq(rid: str, n_prompt: int) -> Sequence:
    return Sequence(rid, list(range(1, n_prompt + 1)), SamplingParams(max_tokens=4))


def run_prefill(plan) -> None:
    """What the engine does after a forward: advance caches; finished prompts get their first token."""
    for c in plan.prefill:
        c.seq.num_cached += c.length
        if c.completes_prompt:
            c.seq.append([7])
    for s in plan.decode:
        s.num_cached += 1
        s.append([7])


def test_budget_chunks_long_prompts_and_decodes_go_first():
    sch = Scheduler(SchedulerConfig(max_num_seqs=3, max_model_len=64, max_num_batched_tokens=10, max_waiting=8))
    a, b, c = seq("a", 4), seq("b", 15), seq("c", 3)
    for s in (a, b, c):
        sch.add(s)
    p1 = sch.schedule()
    assert [(x.seq.request_id, x.start, x.length) for x in p1.prefill] == [("a", 0, 4), ("b", 0, 6)]
    assert p1.decode == [] and c.status is SequenceStatus.WAITING  # budget spent before c
    run_prefill(p1)
    p2 = sch.schedule()
    # a decodes (1 token), b continues its prompt with what is left, c is admitted with the rest
    assert p2.decode == [a]
    assert [(x.seq.request_id, x.start, x.length) for x in p2.prefill] == [("b", 6, 9)]
    run_prefill(p2)
    p3 = sch.schedule()
    assert p3.decode == [a, b] and [(x.seq.request_id, x.length) for x in p3.prefill] == [("c", 3)]
    assert sorted(s.slot for s in (a, b, c)) == [0, 1, 2]


def test_decode_width_reserves_room_for_draft_tokens():
    sch = Scheduler(SchedulerConfig(max_num_seqs=2, max_model_len=64, max_num_batched_tokens=8, max_waiting=8))
    a = seq("a", 2)
    sch.add(a)
    run_prefill(sch.schedule())
    sch.add(seq("b", 20))
    plan = sch.schedule(decode_width=5)  # 1 + 4 drafts for a: 3 tokens left for b's prompt
    assert plan.decode == [a] and plan.prefill[0].length == 3


def test_slots_are_reused_in_arrival_order_and_abort_frees_them():
    sch = Scheduler(SchedulerConfig(max_num_seqs=1, max_model_len=64, max_num_batched_tokens=64, max_waiting=4))
    a, b = seq("a", 2), seq("b", 2)
    sch.add(a)
    sch.add(b)
    sch.schedule()
    assert a.slot == 0 and b.slot is None and sch.num_waiting == 1
    assert sch.abort("a") is a and a.finish_reason is FinishReason.ABORT and a.slot is None
    sch.schedule()
    assert b.slot == 0 and sch.num_running == 1
    assert sch.abort("b") is b and sch.free_slots == [0]
    assert sch.abort("nobody") is None


def test_abort_while_waiting_never_takes_a_slot():
    sch = Scheduler(SchedulerConfig(max_num_seqs=1, max_model_len=64, max_num_batched_tokens=64, max_waiting=4))
    a = seq("a", 2)
    sch.add(a)
    sch.abort("a")
    assert sch.schedule().empty and sch.free_slots == [0] and not sch.has_unfinished()


def test_queue_bound_counts_only_requests_that_must_wait():
    sch = Scheduler(SchedulerConfig(max_num_seqs=2, max_model_len=64, max_num_batched_tokens=64, max_waiting=1))
    for i in range(3):  # two take the free slots at the next step, one waits
        sch.add(seq(f"r{i}", 2))
    with pytest.raises(QueueFull):
        sch.add(seq("r3", 2))


def test_kv_usage_counts_cached_tokens():
    sch = Scheduler(SchedulerConfig(max_num_seqs=2, max_model_len=10, max_num_batched_tokens=64, max_waiting=1))
    sch.add(seq("a", 5))
    run_prefill(sch.schedule())
    assert sch.kv_usage() == pytest.approx(5 / 20)


@pytest.mark.parametrize(
    "kw",
    [{"max_num_seqs": 0}, {"max_model_len": 1}, {"max_num_seqs": 8, "max_num_batched_tokens": 4}, {"max_waiting": -1}],
)
def test_config_rejects_nonsense(kw):
    with pytest.raises(ValueError):
        SchedulerConfig(**kw)
