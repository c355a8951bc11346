"""bench/burst_ttft.py's readers of the peers' own per-request output (AIPerf's profile_export.jsonl with its
inputs.json, GuideLLM's benchmarks.json), on tiny hand-written samples of each format: every request lands on its
prompt, its send and first token on CLOCK_REALTIME seconds, a failed one kept as failed."""

from __future__ import annotations

import json

import pytest

from fakes.bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def burst():
    return load_bench_script("burst_ttft")


def _aiperf_line(
    session: int, conversation: str, start_ns: int, ttft: dict | None, error: dict | None = None, issued_ns: int = 0
) -> str:
    """One record of aiperf 0.13's profile_export.jsonl (`--export-level records`), the fields the reader uses and a
    few it does not."""
    metrics = {"request_latency": {"value": 204.1, "unit": "ms"}} | ({"time_to_first_token": ttft} if ttft else {})
    meta = {"session_num": session, "x_request_id": f"req-{session}", "conversation_id": conversation, "turn_index": 0,
            "request_start_ns": start_ns, "request_end_ns": start_ns + 204_000_000, "worker_id": "worker_a",
            "benchmark_phase": "profiling"} | ({"credit_issued_ns": issued_ns} if issued_ns else {})  # fmt: skip
    return json.dumps({"metadata": meta, "metrics": metrics, "error": error})


def test_aiperf_records_join_each_record_to_its_prompt_through_inputs_json(burst):
    inputs = {"data": [
        {"session_id": "conv-a", "payloads": [{"prompt": "p0", "model": "m", "stream": True}]},
        {"session_id": "conv-b", "payloads": [{"prompt": "p1", "model": "m", "stream": True}]},
        {"session_id": "conv-c", "payloads": [{"prompt": "p2", "model": "m", "stream": True}]},
    ]}  # fmt: skip
    lines = [  # records arrive in completion order, not the file's
        _aiperf_line(
            1, "conv-b", 1_796_555_315_537_000_000, {"value": 63.5, "unit": "ms"}, None, 1_796_555_315_535_000_000
        ),
        "",
        _aiperf_line(0, "conv-a", 1_796_555_315_536_000_000, {"value": 52_000_000, "unit": "ns"}),
        _aiperf_line(2, "conv-c", 1_796_555_315_538_000_000, None, {"code": 500, "type": "HTTPError"}),
    ]
    records = {r["prompt"]: r for r in burst.aiperf_records(lines, inputs)}
    assert set(records) == {"p0", "p1", "p2"}
    b = records["p1"]
    assert b["index"] == 1 and b["ok"] and b["sent_s"] == pytest.approx(1_796_555_315.537)
    assert b["sent_s"] - b["scheduled_s"] == pytest.approx(0.002, abs=1e-6)  # its credit issued 2 ms before
    assert records["p0"]["scheduled_s"] == records["p0"]["sent_s"]  # no credit time kept: no client queue known
    assert b["first_s"] - b["sent_s"] == pytest.approx(0.0635, abs=1e-6)  # ms read as ms, on the start's clock
    assert records["p0"]["first_s"] - records["p0"]["sent_s"] == pytest.approx(0.052, abs=1e-6)  # ns read as ns
    assert not records["p2"]["ok"] and records["p2"]["first_s"] is None


def _guidellm_request(prompt: str, start: float | None, first: float | None) -> dict:
    """One request of guidellm 0.8's benchmarks.json (`--output kind=json`), trimmed to what the reader uses and a
    few fields it does not."""
    body = {"model": "m", "stream": True, "prompt": prompt}
    timings = {"queued": 100.0, "targeted_start": None if start is None else start - 0.003, "request_start": start,
               "first_request_iteration": first, "first_token_iteration": first,
               "request_end": None if first is None else first + 0.15}  # fmt: skip
    return {
        "type_": "generative_request_stats",
        "request_id": f"id-{prompt}",
        "request_args": json.dumps({"method": None, "stream": True, "body": body}),
        "info": {"timings": timings, "status": "completed" if first else "errored"},
        "time_to_first_token_ms": None if first is None or start is None else 1000 * (first - start),
    }


def test_guidellm_records_join_each_request_to_its_prompt_from_its_body(burst):
    report = {"benchmarks": [{"requests": {
        "successful": [_guidellm_request("p1", 1_796_555_398.40, 1_796_555_398.4515),
                       _guidellm_request("p0", 1_796_555_398.39, 1_796_555_398.442)],
        "errored": [_guidellm_request("p2", 1_796_555_398.41, None)],
        "incomplete": [_guidellm_request("p3", None, None)],
        "total": None,
    }}]}  # fmt: skip
    records = {r["prompt"]: r for r in burst.guidellm_records(report, ["p0", "p1", "p2", "p3"])}
    assert [records[p]["index"] for p in ("p0", "p1", "p2", "p3")] == [0, 1, 2, 3]  # the data file's order
    p1 = records["p1"]
    assert p1["ok"] and p1["sent_s"] == 1_796_555_398.40
    assert p1["sent_s"] - p1["scheduled_s"] == pytest.approx(0.003, abs=1e-6)  # from its targeted start
    assert p1["first_s"] - p1["sent_s"] == pytest.approx(0.0515, abs=1e-6)
    assert not records["p2"]["ok"] and records["p2"]["first_s"] is None
    assert not records["p3"]["ok"]
