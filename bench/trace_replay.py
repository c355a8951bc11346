"""How close to a trace's recorded arrival times does `speculab bench --workload trace:PATH` send its requests?

Writes a trace with known timestamps (Poisson arrivals at `--rate`, with a burst of `--burst` requests 1 ms apart
in the middle), replays it through the harness client (`load.runner` + `client.request`, the code `speculab
bench` runs) against the mock server in its own process, and reports, per request,

    send error = sent_s - (t0 + (timestamp_i - timestamp_0) / speed)

(`RequestRecord.queue_s`: the time from the request's place in the trace to its leaving the client; no
concurrency cap, so no slot wait is in it). Two pacing modes side by side, alternating rounds in one run:
`spin` (the default: sleep to 1.5 ms before each send, then yield until it: serving.pacing) and `sleep` (a plain
asyncio sleep to the send time, what the runner did before). The client's CPU seconds per mode are reported too:
spinning costs CPU.

Usage (from the repository root):
    python bench/trace_replay.py                          # 400 requests at 50 req/s, 3 rounds per mode
    python bench/trace_replay.py --rate 200 --requests 1000 --rounds 2 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mock_child
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speculab.harness.client.endpoint import EndpointConfig, RequestSampling  # noqa: E402
from speculab.harness.client.request import make_session, request_func  # noqa: E402
from speculab.harness.load.runner import LoadConfig, run_load  # noqa: E402
from speculab.harness.workload.sources import load_workload  # noqa: E402
from speculab.serving.pacing import SEND_SPIN_S  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=400)
    p.add_argument("--rate", type=float, default=50.0, help="mean arrival rate of the trace, requests/s")
    p.add_argument("--burst", type=int, default=20, help="requests 1 ms apart in the middle of the trace")
    p.add_argument("--speed", type=float, default=1.0, help="--trace-speed")
    p.add_argument("--rounds", type=int, default=3, help="rounds per pacing mode, alternating")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    return p.parse_args(argv)


def write_trace(path: Path, args: argparse.Namespace) -> list[float]:
    """Timestamps in ms (Mooncake's unit), rounded to the microsecond as a trace file would hold them."""
    rng = np.random.default_rng(args.seed)
    gaps = rng.exponential(1000.0 / args.rate, args.requests - 1)
    mid = (args.requests - args.burst) // 2
    gaps[mid : mid + args.burst] = 1.0
    ts = np.concatenate([[0.0], np.cumsum(gaps)]).round(3)
    with path.open("w") as f:
        for i, t in enumerate(ts):
            f.write(json.dumps({"timestamp": float(t), "input_length": 20 + i % 50, "output_length": 4}) + "\n")
    return [float(t) for t in ts]


def pcts_ms(x: np.ndarray) -> dict[str, float]:
    return {k: round(float(np.percentile(x, q)) * 1000, 3) for k, q in (("p50", 50), ("p90", 90), ("p99", 99))} | {
        "max": round(float(x.max()) * 1000, 3),
        "mean": round(float(x.mean()) * 1000, 3),
    }


async def one_round(url: str, items: Any, speed: float, spin_s: float) -> dict[str, Any]:
    ep = EndpointConfig(base_url=url, model="speculab-mock", api="completions", stream=True)
    request = request_func(ep, RequestSampling(max_tokens=4))
    records = []
    async with make_session() as session:
        load = LoadConfig(concurrency=None, trace_speed=speed, warmup=8, send_spin_s=spin_s)
        cpu0 = time.process_time()
        out = await run_load(items, request, session, load, on_record=records.append)
        cpu = time.process_time() - cpu0
    measured = [r for r in records if not r.warmup]
    assert all(r.ok for r in measured), [r.error for r in measured if not r.ok][:3]
    err = np.array([r.queue_s for r in measured])
    # the schedule itself: each scheduled time is t0 + (recorded offset) / speed, by construction
    sched = np.array(sorted(r.scheduled_s - out.started_s for r in measured))
    expected = np.array(sorted(it.arrival_s / speed for it in items))
    return {
        "send_error_ms": pcts_ms(err),
        "schedule_max_abs_error_ms": round(float(np.abs(sched - expected).max()) * 1000, 6),
        "client_cpu_s": round(cpu, 3),
        "wall_s": round(out.ended_s - out.started_s, 3),
    }


def machine() -> dict[str, Any]:
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    proc, url = mock_child.start_mock(["--ttft-ms", "5", "--gap-ms", "2", "--output-tokens", "4"])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.jsonl"
            write_trace(path, args)
            items = load_workload(f"trace:{path}", seed=args.seed).items
        rounds: dict[str, list[dict[str, Any]]] = {"spin": [], "sleep": []}
        for r in range(args.rounds):
            for mode in ("spin", "sleep") if r % 2 == 0 else ("sleep", "spin"):
                res = await one_round(url, items, args.speed, SEND_SPIN_S if mode == "spin" else 0.0)
                rounds[mode].append(res)
                e = res["send_error_ms"]
                print(
                    f"round {r + 1} {mode:5s}: send error p50 {e['p50']:.3f} ms, p99 {e['p99']:.3f} ms, "
                    f"max {e['max']:.3f} ms; client CPU {res['client_cpu_s']:.2f} s over {res['wall_s']:.1f} s",
                    flush=True,
                )
    finally:
        proc.terminate()
        proc.wait()
    summary = {
        mode: {
            "send_error_p99_ms_worst_round": max(x["send_error_ms"]["p99"] for x in rs),
            "send_error_p50_ms_median_round": float(np.median([x["send_error_ms"]["p50"] for x in rs])),
            "client_cpu_s_mean": round(float(np.mean([x["client_cpu_s"] for x in rs])), 3),
        }
        for mode, rs in rounds.items()
    }
    return {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds,
            "summary": summary}  # fmt: skip


if __name__ == "__main__":
    a = parse_args()
    result = asyncio.run(main(a))
    print(json.dumps(result["summary"], indent=1))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
