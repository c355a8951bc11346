"""The event-loop lag of an idle client on this machine: the floor the "client fell behind" warning is measured
against (harness/load/client_health.py, LOOP_LAG_WARN_S).

Runs the client's own probe (`HealthProbe`: a ticker waking every 10 ms records how late it woke) on an asyncio loop
that does nothing else, for `--seconds` per round, `--rounds` times; then the same with `--busy N` processes spinning
on the CPU beside it (what a server computing on the same cores does to the client: the loop wakes late though the
client itself is idle). Prints each round's lag p50 / p99 / max and the client's CPU share, and the load average.

Usage: `PYTHONPATH=src python bench/loop_lag_floor.py [--seconds 20] [--rounds 3] [--busy 2] [--json out.json]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import time
from typing import Any

from speculab.harness.load.client_health import HealthProbe


def _spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


async def _idle_round(seconds: float) -> dict[str, float]:
    probe = HealthProbe()
    probe.start()
    await asyncio.sleep(seconds)
    h = await probe.stop()
    return {"p50_ms": h.loop_lag_s.p50 * 1e3, "p99_ms": h.loop_lag_s.p99 * 1e3, "max_ms": h.loop_lag_s.max * 1e3,
            "cpu_share": h.cpu_share}  # fmt: skip


def _round(seconds: float, busy: int) -> dict[str, float]:
    stop_at = time.monotonic() + seconds + 1.0
    spinners = [mp.Process(target=_spin, args=(stop_at,)) for _ in range(busy)]
    for p in spinners:
        p.start()
    try:
        return asyncio.run(_idle_round(seconds))
    finally:
        for p in spinners:
            p.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=2, help="CPU-bound neighbour processes in the second series (0: none)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    out: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average_before": os.getloadavg(),
        "series": {},
    }
    for busy in sorted({0, args.busy}):
        rows = [_round(args.seconds, busy) for _ in range(args.rounds)]
        out["series"][f"busy={busy}"] = rows
        for r in rows:
            print(f"busy={busy}: lag p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  max {r['max_ms']:.1f} ms  "
                  f"client CPU {r['cpu_share']:.1%} of a core")  # fmt: skip
    out["load_average_after"] = os.getloadavg()
    print(f"{out['machine']}; {out['utc']} UTC; load average {out['load_average_before'][0]:.2f} before, "
          f"{out['load_average_after'][0]:.2f} after")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
