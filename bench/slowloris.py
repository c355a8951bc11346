"""Slowloris against `speculab serve` (issue 44): does it close slow connections, keep answering, keep its log small?

Starts `python -m speculab serve MODEL` (default: the shipped demo model, one torch thread; `--server mock-server`:
the mock serving the name MODEL, 1 ms TTFT and gaps) on a free loopback port,
its stdout and stderr going to a file, then runs --attackers processes that together hold --connections
connections to it. Each connection sends a request line and `Host`, then one header byte every --byte-every-s
seconds, and never finishes its head; when the server closes it (the receive deadline), the attacker opens a new
one, so the attack keeps its size for --duration-s. Connections leave from 127.0.0.2-127.0.0.9 in turn (all
loopback, to 127.0.0.1) so that the server-side TIME_WAIT of closed ones does not exhaust one source address's
ephemeral ports. Every --probe-every-s seconds, and once at --probe-at-s, a normal 4-token completion is sent with a
--probe-timeout-s timeout. At the end: the probes, the attackers' counts, the server's peak descriptors and RSS,
its log growth over the attack, its /metrics counters and whether it is still up.

Needs root only to raise limits: every process raises its soft RLIMIT_NOFILE to its hard limit; --server-nofile N
sets the server's limits (soft and hard) to N, which needs root to go above the hard limit. Prints one JSON line;
--out writes it to a file too.

    python bench/slowloris.py                          # 22,040 connections, 60 s, probe at 45 s
    python bench/slowloris.py --connections 300 --duration-s 8 --probe-at-s 5 --receive-timeout-s 2   # smoke
    python bench/slowloris.py --server mock-server                     # the same attack on the mock
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]

from speculab.harness.servers.process import free_port  # noqa: E402

SOURCES = [f"127.0.0.{i}" for i in range(2, 10)]


def raise_nofile(n: int | None = None) -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    target = n if n is not None else hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(hard, target) if n is None else target))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- one attacker process ------------------------------------------------------------------------------------


async def hold(k: int, port: int, until: float, byte_every_s: float, counts: dict[str, int]) -> None:
    """Keep one slow connection open until `until`, reopening it whenever the server closes it."""
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-{k}: ".encode()
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, local_addr=(SOURCES[k % len(SOURCES)], 0)), 10
            )
        except (OSError, asyncio.TimeoutError):
            counts["connect_failures"] += 1
            await asyncio.sleep(1.0)
            continue
        counts["opened"] += 1
        counts["open"] += 1
        try:
            writer.write(head)
            while time.monotonic() < until:
                try:
                    data = await asyncio.wait_for(reader.read(4096), byte_every_s)
                except asyncio.TimeoutError:
                    writer.write(b"a")
                    continue
                counts["answered_408" if data.startswith(b"HTTP/1.1 408") else "closed_by_server"] += 1
                break
        except OSError:
            counts["closed_by_server"] += 1
        finally:
            counts["open"] -= 1
            writer.close()


async def attack(n: int, port: int, duration_s: float, byte_every_s: float, report: Path) -> None:
    counts = dict.fromkeys(("opened", "open", "connect_failures", "answered_408", "closed_by_server"), 0)
    counts["peak_open"] = 0
    until = time.monotonic() + duration_s
    tasks = []
    for k in range(n):
        tasks.append(asyncio.create_task(hold(k, port, until, byte_every_s, counts)))
        if k % 200 == 199:
            await asyncio.sleep(0.05)  # let the opened ones send their heads
            counts["peak_open"] = max(counts["peak_open"], counts["open"])
    while time.monotonic() < until:
        counts["peak_open"] = max(counts["peak_open"], counts["open"])
        await asyncio.sleep(0.5)
    await asyncio.gather(*tasks, return_exceptions=True)
    report.write_text(json.dumps(counts))


# --- the run -------------------------------------------------------------------------------------------------


def probe(port: int, timeout_s: float) -> dict[str, Any]:
    body = json.dumps({"model": "demo", "prompt": "Once upon a time", "max_tokens": 4}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            r.read()
            return {"status": r.status, "latency_s": round(time.monotonic() - start, 3)}
    except Exception as e:  # a timeout or a refused connection is the finding, not a crash
        return {
            "status": None,
            "error": f"{type(e).__name__}: {e}"[:200],
            "after_s": round(time.monotonic() - start, 3),
        }


def cpu_model() -> str:
    try:
        return next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def metrics(port: int) -> dict[str, float]:
    names = ("request_receive_timeouts_total", "connections_shed_total", "accept_failures_total")
    names += ("log_lines_suppressed_total",)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            lines = r.read().decode().splitlines()
    except OSError:
        return {}
    prefixes = ("speculab:", "speculab_mock:")  # serve's, the mock's (speculab.mock.state.MOCK_PREFIX)
    return {
        n: float(line.rsplit(" ", 1)[1])
        for line in lines
        for n in names
        for p in prefixes
        if line.startswith(f"{p}{n}{{")
    }


def start_server(args: argparse.Namespace, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(args.src).resolve()), "OMP_NUM_THREADS": "1"}
    if args.server == "mock-server":
        cmd = [sys.executable, "-m", "speculab", "mock-server", "--model", args.model, "--port", str(port)]
        cmd += ["--ttft-ms", "1", "--gap-ms", "1"]
    else:
        cmd = [sys.executable, "-m", "speculab", "serve", args.model, "--port", str(port), "--threads", "1"]
    if args.receive_timeout_s is not None:
        cmd += ["--request-receive-timeout", str(args.receive_timeout_s)]
    limit = (lambda: raise_nofile(args.server_nofile)) if args.server_nofile else None
    with log.open("wb") as out:
        server = subprocess.Popen(cmd, env=env, stdout=out, stderr=out, preexec_fn=limit)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and server.poll() is None:
        if b"ready" in log.read_bytes():
            return server
        time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"server not ready: {log.read_text()[-2000:]}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    port, log = free_port(), Path(args.log)
    server = start_server(args, port, log)
    proc = psutil.Process(server.pid)
    log_before = log.stat().st_size
    reports = [Path(f"{args.log}.attacker{i}.json") for i in range(args.attackers)]
    per = -(-args.connections // args.attackers)
    attack_args = [str(per), str(port), str(args.duration_s), str(args.byte_every_s)]
    attackers = [subprocess.Popen([sys.executable, __file__, "--attacker", *attack_args, str(r)]) for r in reports]
    start, probes, peak_fds, peak_rss = time.monotonic(), [], 0, 0
    next_probe, probed_at = args.probe_every_s, False
    while any(a.poll() is None for a in attackers) and time.monotonic() - start < args.duration_s + 60:
        t = time.monotonic() - start
        if server.poll() is None:
            peak_fds, peak_rss = max(peak_fds, proc.num_fds()), max(peak_rss, proc.memory_info().rss)
        if not probed_at and t >= args.probe_at_s:
            probes.append({"t_s": round(t, 1), "at": True, **probe(port, args.probe_timeout_s)})
            probed_at = True
        elif t >= next_probe:
            probes.append({"t_s": round(t, 1), **probe(port, args.probe_timeout_s)})
            next_probe += args.probe_every_s
        time.sleep(0.25)
    for a in attackers:
        a.wait(timeout=120)
    alive = server.poll() is None
    result = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "load_avg_at_end": os.getloadavg()},
        "config": vars(args),
        "server_alive": alive,
        "server_open_files_limit": [ln for ln in log.read_text(errors="replace").splitlines() if "ready" in ln][:1],
        "probe_at": next((p for p in probes if p.get("at")), None),
        "probes": probes,
        "attackers": [json.loads(r.read_text()) if r.exists() else None for r in reports],
        "server_peak_fds": peak_fds,
        "server_peak_rss_mb": round(peak_rss / 2**20, 1),
        "log_growth_bytes": log.stat().st_size - log_before,
        "metrics": metrics(port) if alive else {},
        "health_after": probe(port, 10) if alive else None,
    }
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    for r in reports:
        r.unlink(missing_ok=True)
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--attacker":
        n, port, duration_s, every_s, report = sys.argv[2:7]
        raise_nofile()
        asyncio.run(attack(int(n), int(port), float(duration_s), float(every_s), Path(report)))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", choices=("serve", "mock-server"), default="serve", help="the command attacked")
    ap.add_argument("--model", default="demo")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the speculab source tree to serve")
    ap.add_argument("--connections", type=int, default=22_040)
    ap.add_argument("--attackers", type=int, default=2, help="processes sharing the connections")
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--byte-every-s", type=float, default=2.0)
    ap.add_argument("--probe-at-s", type=float, default=45.0)
    ap.add_argument("--probe-every-s", type=float, default=10.0)
    ap.add_argument("--probe-timeout-s", type=float, default=5.0)
    ap.add_argument("--receive-timeout-s", type=float, default=None, help="the server's deadline (default: its own)")
    ap.add_argument("--server-nofile", type=int, default=None, help="the server's RLIMIT_NOFILE (root to raise)")
    ap.add_argument("--log", default="/tmp/speculab-slowloris-server.log")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    raise_nofile()
    result = run(args)
    line = json.dumps(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(line)


if __name__ == "__main__":
    main()
