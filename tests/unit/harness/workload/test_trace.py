"""trace:PATH workloads: timestamped requests, with prompts given or synthesised (hash_ids share prefixes)."""

from __future__ import annotations

import json

import pytest

from speculab.errors import UserError
from speculab.harness.workload.items import approx_tokens
from speculab.harness.workload.sources import load_workload, workload_overview


def write(tmp_path, rows, name="trace.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_timestamps_become_arrival_offsets_in_ms_or_s_and_out_of_order_lines_are_sorted(tmp_path):
    rows = [
        {"timestamp": 1000, "prompt": "first"},
        {"timestamp": 1500, "prompt": "third", "max_tokens": 9},
        {"timestamp": 1250, "prompt": "second", "output_length": 7},
    ]
    path = write(tmp_path, rows)
    w = load_workload(f"trace:{path}", seed=0)
    assert [i.prompt for i in w.items] == ["first", "second", "third"]
    assert [i.arrival_s for i in w.items] == [0.0, 0.25, 0.5]
    assert [i.index for i in w.items] == [0, 1, 2] and [i.max_tokens for i in w.items] == [None, 7, 9]
    assert w.items[1].expected_output_tokens == 7
    assert "3 requests over 0.500 s" in w.source
    assert "1 lines earlier than the line before them, sorted by timestamp" in w.source
    secs = load_workload(f"trace:{path}?unit=s", seed=0)
    assert [i.arrival_s for i in secs.items] == [0.0, 250.0, 500.0]
    o = workload_overview(w)
    assert o["trace"]["requests"] == 3 and o["trace"]["span_s"] == 0.5 and o["trace"]["rate_rps"] == 4.0


def test_input_lengths_are_synthesised_and_shared_hash_ids_share_their_prefix(tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 1200, "output_length": 5, "hash_ids": [7, 8, 9]},
        {"timestamp": 10, "input_length": 700, "output_length": 5, "hash_ids": [7, 3]},
        {"timestamp": 20, "input_length": 300, "output_length": 5},
    ]
    path = write(tmp_path, rows)
    a, b, c = load_workload(f"trace:{path}", seed=0).items
    assert [approx_tokens(x.prompt) for x in (a, b, c)] == [1200, 700, 300]
    shared = a.prompt[: len(a.prompt) // 3]
    assert b.prompt.startswith(shared[:500])  # block 7: the same 512 tokens open both prompts
    block7 = a.prompt.split(" ")[:200]
    assert b.prompt.split(" ")[:200] == block7
    assert a.prompt.split(" ")[600:700] != b.prompt.split(" ")[600:700]  # blocks 8 and 3 differ
    small = load_workload(f"trace:{path}?block=16", seed=0).items[0]
    assert approx_tokens(small.prompt) == 1200
    again = load_workload(f"trace:{path}", seed=0).items
    assert [x.prompt for x in again] == [a.prompt, b.prompt, c.prompt]  # seeded: the same text every run
    assert load_workload(f"trace:{path}", seed=1).items[0].prompt != a.prompt


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "x"}', ":1: 'timestamp' must be a non-negative number"),
        ('{"timestamp": -1, "prompt": "x"}', ":1: 'timestamp' must be a non-negative number"),
        ('{"timestamp": 0}', ":1: each line needs exactly one of 'prompt', 'messages' or 'input_length'"),
        ('{"timestamp": 0, "prompt": "x", "input_length": 3}', ":1: each line needs exactly one of"),
        ('{"timestamp": 0, "input_length": 0}', ":1: 'input_length' must be a positive integer"),
        ('{"timestamp": 0, "prompt": "x", "hash_ids": [1]}', ":1: 'hash_ids' name the blocks"),
        ('{"timestamp": 0, "input_length": 5, "hash_ids": ["a"]}', ":1: 'hash_ids' must be a list of integers"),
        ('{"timestamp": 0, "prompt": "x", "ts": 1}', ":1: unknown key 'ts'"),
    ],
)
def test_malformed_trace_lines_name_the_line_and_the_fix(tmp_path, line, message):
    path = write(tmp_path, [line])
    with pytest.raises(UserError, match=re_escape(message)):
        load_workload(f"trace:{path}", seed=0)


def re_escape(s):
    import re

    return re.escape(s)


def test_options_and_num_prompts(tmp_path):
    path = write(tmp_path, [{"timestamp": t, "prompt": f"p{t}"} for t in range(5)])
    assert len(load_workload(f"trace:{path}", seed=0, num_prompts=3).items) == 3
    with pytest.raises(UserError, match="the trace has 5 requests; --num-prompts can take fewer, not 6"):
        load_workload(f"trace:{path}", seed=0, num_prompts=6)
    with pytest.raises(UserError, match="unit must be ms or s"):
        load_workload(f"trace:{path}?unit=min", seed=0)
    with pytest.raises(UserError, match="block must be a positive number of tokens"):
        load_workload(f"trace:{path}?block=0", seed=0)
