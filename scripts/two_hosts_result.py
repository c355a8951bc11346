"""OUTDIR/result.json for scripts/two_hosts.sh: what the run shows, measured from its files (issue 41).

Reads OUTDIR/bench (speculab's run directory: manifest.json, summary.json, requests.jsonl), OUTDIR/mock_send_times.json
(the mock's arrival and write times, on host A's CLOCK_MONOTONIC: the coordinator's clock) and OUTDIR/logs.

- Each worker's clock error: host B's monotonic clock runs exactly `--offset` seconds ahead of host A's (a time
  namespace offsets CLOCK_MONOTONIC by that constant, by the kernel's definition), so a record moved onto the
  coordinator's clock with speculab's estimate is off by |estimate - offset| (0 for a worker on A).
  `max_time_error_s` is the largest over the workers, `bound_s` the largest uncertainty speculab reported.
- An independent check of the same, from the mock: on one clock a request reaches the server after it was sent,
  and a chunk reaches the client after its deadline (the mock never writes before it); with the correction those
  hold within the bound
  (`timeline`: the smallest margins per host, which a wrong offset makes negative by the error).
- TTFT error against the mock's schedule, per host: the client's TTFT (first chunk - send, one worker's own clock)
  minus the mock's scheduled TTFT for that request (first-chunk deadline - arrival).
- Every request accounted for: sent = ok = planned, and the mock saw each one.

Exit 0 when every check holds, 1 (one line per failed check) otherwise. With --drop-after (host B killed
mid-run) the checks are the drop-out's: speculab ended with its one-line error (exit 6) and every record it
received is on disk.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speculab.harness.workload.sources import load_workload  # noqa: E402

WORKER_LOST_EXIT = 6  # speculab.errors.WorkerLost
HEAD_HOST = "slth-a"  # two_hosts.sh's host A, on the coordinator's clock


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--offset", type=float, required=True, help="host B's monotonic offset, seconds")
    p.add_argument("--hosts", type=int, required=True, help="how many hosts the script made (1 or 2)")
    p.add_argument("--bench-exit", type=int, required=True)
    p.add_argument("--streams", type=int, required=True)
    p.add_argument("--prompts", type=int, required=True)
    p.add_argument("--dropped", action="store_true", help="host B was killed mid-run (--drop-after)")
    return p.parse_args()


def stats(xs: list[float]) -> dict[str, float | int | None]:
    if not xs:
        return {"n": 0, "min": None, "p50": None, "p99": None, "max": None}
    a = np.asarray(xs)
    q = np.percentile(a, [50, 99])
    return {"n": len(xs), "min": float(a.min()), "p50": float(q[0]), "p99": float(q[1]), "max": float(a.max())}


def worker_clocks(workers: list[dict[str, Any]], offset_s: float) -> list[dict[str, Any]]:
    """Each worker's applied offset against the true one: host B (any host but the head's) is `offset_s` ahead."""
    out = []
    for w in workers:
        clock = w["clock"]
        true = offset_s if w["host"] != HEAD_HOST else 0.0
        out.append({
            "worker": w["worker"],
            "host": w["host"],
            "node_ip": w.get("node_ip"),
            "clock_kind": clock["kind"],
            "offset_s": clock["offset_s"],
            "uncertainty_s": clock["uncertainty_s"],
            "true_offset_s": true,
            "error_s": abs(clock["offset_s"] - true),
            "start_lag_s": w.get("start_lag_s"),
            "crashed": bool(w.get("crashed")),
        })  # fmt: skip
    return out


def match_mock(records: list[dict[str, Any]], mock: list[dict[str, Any]], prompts: dict[int, str]) -> list[tuple]:
    """(record, mock entry) per measured record: the entry of its prompt that arrived nearest its send."""
    by_prompt: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in mock:
        by_prompt[m["prompt"]].append(m)
    pairs = []
    for r in records:
        cands = by_prompt.get(prompts.get(r["index"], ""), [])
        if cands and r["chunks"]:
            pairs.append((r, min(cands, key=lambda m: abs(m["arrival_s"] - r["sent_s"]))))
    return pairs


def per_host(pairs: list[tuple], host_of: dict[int, str], n_workers: int) -> dict[str, dict[str, Any]]:
    """Per host: TTFT error against the mock's schedule, and the timeline's margins on the coordinator's clock."""
    ttft: dict[str, list[float]] = defaultdict(list)
    receipt: dict[str, list[float]] = defaultdict(list)
    arrival: dict[str, list[float]] = defaultdict(list)
    late: dict[str, list[float]] = defaultdict(list)
    for r, m in pairs:
        host = host_of[r["index"] % n_workers]  # conversation j runs on worker j mod N (load.worker_plan)
        ttft[host].append((r["chunks"][0]["t_s"] - r["sent_s"]) - (m["first_deadline_s"] - m["arrival_s"]))
        receipt[host].append(m["arrival_s"] - r["sent_s"])  # server got it after it was sent: >= 0 on one clock
        # the mock stamps a write after it returns (the client may read it first), but never writes before the
        # chunk's deadline: so the client's first read comes after the deadline, on one clock
        arrival[host].append(r["chunks"][0]["t_s"] - m["first_deadline_s"])
        late[host].append(m["chunks_s"][0] - m["first_deadline_s"])  # the mock's own part of the TTFT error
    return {
        h: {
            "ttft_error_s": stats(ttft[h]),
            "server_arrival_minus_send_s": stats(receipt[h]),
            "client_arrival_minus_deadline_s": stats(arrival[h]),
            "mock_first_write_late_s": stats(late[h]),
        }
        for h in sorted(ttft)
    }


def checks(res: dict[str, Any], a: argparse.Namespace, stderr: list[str]) -> list[str]:
    failed = []
    if a.dropped:
        if a.bench_exit != WORKER_LOST_EXIT or len(stderr) != 1 or "mid-run" not in stderr[0]:
            failed.append(f"a dropped host: exit {a.bench_exit} and stderr {stderr!r}, not one line and exit 6")
        if res["records_on_disk"] != res["requests_sent"] + res["cancelled"] + res["warmup"]:
            failed.append("records on disk differ from the summary's counts")
        return failed
    if a.bench_exit != 0:
        failed.append(f"speculab bench exited {a.bench_exit}: {' / '.join(stderr)}")
    if res["hosts"] != a.hosts:
        failed.append(f"workers on {res['hosts']} hosts, not {a.hosts}: {res['workers_by_host']}")
    if not res["max_time_error_s"] <= res["bound_s"]:
        failed.append(f"clock error {res['max_time_error_s']} s beyond the reported bound {res['bound_s']} s")
    for host, h in res["by_host"].items():
        for key in ("server_arrival_minus_send_s", "client_arrival_minus_deadline_s"):
            if h[key]["min"] is None or h[key]["min"] < -res["bound_s"]:
                failed.append(f"{host}: {key} min {h[key]['min']} s breaks causality beyond the bound")
    if not res["requests_sent"] == res["requests_ok"] == a.prompts or res["mock_received"] != a.prompts + 2:
        failed.append(
            f"requests: planned {a.prompts}, sent {res['requests_sent']}, ok {res['requests_ok']}, mock saw "
            f"{res['mock_received']} (2 warmup)"
        )
    return failed


def main() -> int:
    a = parse_args()
    bench = a.out / "bench"
    manifest = json.loads((bench / "manifest.json").read_text())
    summary = json.loads((bench / "summary.json").read_text())
    lines = [json.loads(x) for x in (bench / "requests.jsonl").read_text().splitlines() if x.strip()]
    mock = json.loads((a.out / "mock_send_times.json").read_text())["requests"]
    workers = worker_clocks(manifest["workers"], a.offset)
    host_of = {w["worker"]: w["host"] for w in workers}
    wl = manifest["workload"]
    prompts = {s.index: s.prompt for s in load_workload(wl["spec"], seed=0, num_prompts=wl["n_items"]).items}
    measured = [r for r in lines if not r["warmup"]]
    stderr = [x for x in (a.out / "logs" / "bench.err").read_text().splitlines() if x.strip()]
    res: dict[str, Any] = {
        "hosts": len(set(host_of.values())),
        "workers_by_host": dict(Counter(host_of.values())),
        "clock_offset_s": a.offset,
        "max_time_error_s": max(w["error_s"] for w in workers),
        "bound_s": max(w["uncertainty_s"] for w in workers),
        "requests_planned": a.prompts,
        "requests_sent": summary["counts"]["sent"],
        "requests_ok": summary["counts"]["ok"],
        "warmup": sum(bool(r["warmup"]) for r in lines),
        "cancelled": summary["counts"]["cancelled"],
        "records_on_disk": len(lines),
        "mock_received": len(mock),
        "streams": a.streams,
        "workers": workers,
        "by_host": per_host(match_mock(measured, mock, prompts), host_of, len(workers)),
        "bench_exit": a.bench_exit,
        "bench_stderr": stderr,
        "dropped": a.dropped,
        "machine": {
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(),
            "loadavg": list(os.getloadavg()),
            "kernel": platform.release(),
        },
    }
    failed = checks(res, a, stderr)
    res["checks_failed"] = failed
    (a.out / "result.json").write_text(json.dumps(res, indent=2) + "\n")
    for f in failed:
        print(f"two_hosts: check failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
