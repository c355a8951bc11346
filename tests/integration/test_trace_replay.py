"""Trace replay end to end against the mock server: `speculab bench --workload trace:PATH`, a `speculab run`
level {trace_speed: S} in two-URL mode, and `speculab diagnose` with a trace as its operating point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.cli_runner import one_line_error, run_main
from integration.mock_process import mock_process
from speculab.commands.diagnose.config import DiagnoseConfig
from speculab.commands.diagnose.run import run_diagnosis
from speculab.commands.run.plan import plan_experiment
from speculab.config import parse_experiment
from speculab.errors import UserError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.results.requests_file import read_records

FAST = dict(ttft_s=0.003, gap_s=0.001, output_tokens=4)


def write_trace(path: Path, n: int = 40, gap_ms: float = 10.0) -> list[float]:
    """Known timestamps: bursts of three 1 ms apart, then a gap."""
    ts, t = [], 1000.0
    for i in range(n):
        ts.append(round(t, 3))
        t += 1.0 if i % 3 < 2 else gap_ms
    rows = [
        {"timestamp": x, "input_length": 20 + i % 7, "output_length": 4, "hash_ids": [1, i % 2]}
        for i, x in enumerate(ts)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [(x - ts[0]) / 1000 for x in ts]


def test_bench_replays_the_trace_at_its_times_scaled(capsys, tmp_path: Path) -> None:
    offsets = write_trace(tmp_path / "trace.jsonl")
    with mock_process(**FAST) as url:
        out = tmp_path / "run"
        code, stdout, _ = run_main(capsys, "bench", "--url", url, "--workload", f"trace:{tmp_path / 'trace.jsonl'}",
                                   "--trace-speed", "2", "--output", str(out))  # fmt: skip
        assert code == 0, stdout
        code, _, err = run_main(capsys, "bench", "--url", url, "--workload", "builtin:math", "--trace-speed", "2",
                                "--output", str(tmp_path / "x"))  # fmt: skip
        assert code == 2 and "--trace-speed scales a trace's arrival times" in one_line_error(err)
        code, _, err = run_main(capsys, "bench", "--url", url, "--workload", f"trace:{tmp_path / 'trace.jsonl'}",
                                "--rate", "5", "--output", str(tmp_path / "y"))  # fmt: skip
        assert code == 2 and "a trace sets its own arrival times: drop --rate" in one_line_error(err)
    recs = sorted((r for r in read_records(out / "requests.jsonl") if not r.warmup), key=lambda r: r.index)
    assert len(recs) == len(offsets) and all(r.ok for r in recs)
    t0 = recs[0].scheduled_s
    assert [round(r.scheduled_s - t0, 9) for r in recs] == [round(x / 2, 9) for x in offsets]
    s = json.loads((out / "summary.json").read_text())
    assert s["load"]["mode"] == "trace" and s["load"]["trace_speed"] == 2.0
    assert s["load"]["scheduled_rate_rps"] > 0 and s["load"]["achieved_rate_rps"] > 0
    assert "trace replay ×2" in stdout


def test_a_trace_level_needs_a_trace_workload(tmp_path: Path) -> None:
    wl = tmp_path / "w.jsonl"
    wl.write_text('{"prompt": "hi"}\n')
    y = f"""
workload: {{spec: "jsonl:{wl}"}}
loads: {{operating: {{trace_speed: 1}}}}
baseline: {{url: "http://127.0.0.1:9"}}
candidate: {{url: "http://127.0.0.1:10"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""
    with pytest.raises(UserError, match="replay a trace's arrival times, but the workload"):
        plan_experiment(parse_experiment(y))


async def test_diagnose_replays_the_trace_as_its_operating_point(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.jsonl", n=30, gap_ms=5.0)
    with mock_process(**FAST, max_model_len=1024) as url:
        cfg = DiagnoseConfig(
            endpoint=EndpointConfig(base_url=url, model=""),
            output_dir=tmp_path / "d",
            workload=f"trace:{tmp_path / 'trace.jsonl'}",
            num_prompts=4,
            sampling=RequestSampling(max_tokens=4),
            sweep_points=3, sweep_repeats=1, prefix_tokens=64, prefix_repeats=2, warm_probes=2, probe_seed=3,
        )  # fmt: skip
        res = await run_diagnosis(cfg)
    doc = res.document
    assert doc["options"]["trace_speed"] == 1.0
    q = res.diagnosis.queueing
    assert q.measured and q.at.startswith("trace ×1, ") and "in flight on average" in q.at
    load = [r for r in read_records(tmp_path / "d" / "requests.jsonl") if r.extra.get("phase") == "workload-load"]
    assert len(load) == 30


async def test_diagnose_offers_its_operating_point_from_two_worker_processes(tmp_path: Path) -> None:
    with mock_process(**FAST, max_model_len=1024) as url:
        cfg = DiagnoseConfig(
            endpoint=EndpointConfig(base_url=url, model=""),
            output_dir=tmp_path / "d",
            workload="synthetic:input=20,output=4",
            num_prompts=8,
            concurrency=4,
            workers=2,
            sampling=RequestSampling(max_tokens=4),
            sweep_points=3, sweep_repeats=1, prefix_tokens=64, prefix_repeats=2, warm_probes=2, probe_seed=3,
        )  # fmt: skip
        res = await run_diagnosis(cfg)
    assert res.document["options"]["workers"] == 2
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert [(w["phase"], w["worker"], w["requests"]) for w in manifest["workers"]] == [
        ("workload-load", 0, 4),
        ("workload-load", 1, 4),
    ]
    assert all(w["start_lag_s"] is not None and w["clock"]["kind"] == "same host" for w in manifest["workers"])
    load = [r for r in read_records(tmp_path / "d" / "requests.jsonl") if r.extra.get("phase") == "workload-load"]
    assert sorted(r.index for r in load) == list(range(8)) and all(r.ok for r in load)
    assert res.diagnosis.queueing.measured
