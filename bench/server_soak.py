"""`speculab serve` under hostile traffic: how fast it refuses what it must, whether others wait, whether RSS grows.

Starts `python -m speculab serve MODEL` (default: the shipped demo model) on a free loopback port and measures,
over raw sockets (exactly the bytes chosen go out):
1. `one_token_alone_s`: a 1-token completion with nothing else running (median of --rounds);
2. `refuse_10mb`: a 10 MB prompt sent whole with its Content-Length: seconds from the first byte sent to the
   status line read, and the slowest of the 1-token completions sent back to back while it is in flight (the
   issue: 29 s to refuse, 28 s for a bystander); the same for a prompt just under --max-request-bytes that
   cannot fit the context (`refuse_long_prompt`, the cheap token bound) and for a 1 MB header
   (`refuse_1mb_header`);
3. `soak`: for --soak-s seconds, a loop of 10 MB bodies, long prompts, 1 MB headers, the issue's three engine
   killers, invalid bodies (a lone surrogate, malformed JSON) and valid requests, while the server's RSS is
   sampled every 0.5 s: RSS after warm-up vs at the end, statuses seen, any 5xx, /health at the end.
4. with `--abuse-s S`, the abuse soak (`abuse_soak.py`): --streams valid streams throughout, clean and abuse
   windows alternating (fuzzed bodies, dropped streams, connections sending headers a byte a second), S seconds of
   each: valid-request p99 abuse vs clean, 5xx, the engine alive, gauges back to 0, RSS flat within 5 %.
Prints one JSON object. `--src DIR` serves another checkout's `src` (e.g. main's, to compare).

    python bench/server_soak.py [--model demo] [--rounds 5] [--soak-s 60] [--src ../main/src]
    python bench/server_soak.py --rounds 0 --soak-s 0 --abuse-s 600 --max-num-seqs 32   # 20 min: 10 clean, 10 abuse
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from abuse_soak import AbuseConfig, gauges, run_abuse_soak
from rss_timeline import RssTimeline, rss_summary

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]  # run from a checkout (the server runs --src; the client only needs free_port)

from speculab.harness.servers.process import free_port  # noqa: E402

TEN_MB = 10_000_000


def request(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    head += [f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def exchange(port: int, data: bytes, timeout_s: float = 600) -> tuple[int, float]:
    """(status, seconds from the first byte sent to the status line); status 0 if the connection broke."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(data)
            f = sock.makefile("rb")
            line = f.readline()
            elapsed = time.perf_counter() - t0
            status = int(line.split()[1]) if line else 0
            headers = {}
            while (h := f.readline()) not in (b"\r\n", b""):
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            f.read(int(headers.get("content-length", 0)))
            return status, elapsed
    except OSError:
        return 0, time.perf_counter() - t0


def body(model: str, **fields: Any) -> bytes:
    return json.dumps({"model": model, "max_tokens": 1, "temperature": 0, **fields}).encode()


def with_bystander(port: int, model: str, hostile: bytes) -> dict[str, Any]:
    """Send `hostile`; meanwhile, 1-token completions back to back on other connections (at least one, the first
    10 ms in), so that one of them is in flight whenever the server stalls. Times in seconds."""
    one_token = request("POST", "/v1/completions", body(model, prompt="Hello"))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        big = pool.submit(exchange, port, hostile)
        time.sleep(0.01)
        bystanders = [exchange(port, one_token)]
        while not big.done():
            bystanders.append(exchange(port, one_token))
        big_status, big_s = big.result()
    return {
        "status": big_status,
        "refused_s": big_s,
        "bystander_statuses": {status for status, _ in bystanders},
        "bystander_max_s": max(t for _, t in bystanders),
        "bystanders": len(bystanders),
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    refused = [r["refused_s"] for r in runs]
    slowest = [r["bystander_max_s"] for r in runs]
    return {
        "statuses": sorted({r["status"] for r in runs}),
        "refused_s": {"median": round(statistics.median(refused), 4), "max": round(max(refused), 4)},
        "slowest_bystander_s": {"median": round(statistics.median(slowest), 4), "max": round(max(slowest), 4)},
        "bystanders": sum(r["bystanders"] for r in runs),
        "bystander_statuses": sorted(set().union(*(r["bystander_statuses"] for r in runs))),
    }


def hostile_requests(model: str, max_request_bytes: int) -> dict[str, bytes]:
    ten_mb = json.dumps({"model": model, "prompt": "a" * TEN_MB}).encode()
    long_prompt = json.dumps({"model": model, "prompt": "The quick brown fox. " * ((max_request_bytes - 200) // 21)})
    return {
        "refuse_10mb": request("POST", "/v1/completions", ten_mb),
        "refuse_long_prompt": request("POST", "/v1/completions", long_prompt.encode()),
        "refuse_1mb_header": request("GET", "/health", headers={"X-Big": "a" * 1_000_000}),
    }


def soak_mix(model: str, hostile: dict[str, bytes]) -> list[tuple[str, bytes]]:
    killers = [  # the three: each used to disable the engine until a restart (1e-38 is now greedy: 200)
        body(model, prompt="hi", max_tokens=4, min_tokens=2, stop_token_ids=[8192]),
        body(model, prompt="hi", max_tokens=4, temperature=1e-38),
        body(model, prompt="hi", max_tokens=4, top_k=2**63),
    ]
    invalid = [body(model, prompt="\ud800"), b'{"model": "' + model.encode() + b'", "prompt": [[[']
    chat = json.dumps({"model": model, "messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 4}).encode()
    return [
        *hostile.items(),
        *(("killer", request("POST", "/v1/completions", b)) for b in killers),
        *(("invalid", request("POST", "/v1/completions", b)) for b in invalid),
        ("valid", request("POST", "/v1/completions", body(model, prompt="Once upon a time", max_tokens=4))),
        ("valid", request("POST", "/v1/chat/completions", chat)),
    ]


def soak(port: int, proc: psutil.Process, mix: list[tuple[str, bytes]], seconds: float) -> dict[str, Any]:
    statuses: collections.Counter[str] = collections.Counter()
    rounds = 0
    with RssTimeline({"server": proc}, interval_s=0.5) as timeline:
        while time.monotonic() - timeline.t0 < seconds:
            for kind, data in mix:
                statuses[f"{kind} {exchange(port, data)[0]}"] += 1
            rounds += 1
    rss = rss_summary(timeline.series("server"), warmup_s=min(10.0, seconds / 4))
    return {
        "seconds": round(time.monotonic() - timeline.t0, 1),
        "rounds": rounds,
        "requests": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "server_errors_5xx": sum(n for k, n in statuses.items() if k.split()[-1].startswith("5")),
        **{k: v for k, v in rss.items() if k != "samples"},
    }


def abuse(port: int, proc: psutil.Process, args: argparse.Namespace) -> dict[str, Any]:
    """`abuse_soak` against the server, its RSS sampled throughout; then, once the load has stopped, the gauges
    (back to 0?), whether the process is alive and /health answers."""
    cfg = AbuseConfig(
        port, args.model, args.abuse_s, args.window_s, args.warmup_s, args.streams, args.max_tokens,
        args.fuzz_share, args.disconnect_share, args.slow_headers, args.seed,
    )  # fmt: skip
    with RssTimeline({"server": proc}, interval_s=1.0) as timeline:
        res: dict[str, Any] = {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__ if k != "port"}}
        res |= run_abuse_soak(cfg)
    time.sleep(2.0)  # let aborted and finished sequences leave the engine
    res["gauges_after"] = gauges(port)
    res["gauges_back_to_0"] = all(v == 0 for v in res["gauges_after"].values())
    res["server_alive"] = proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    res["health_after"] = exchange(port, request("GET", "/health"), timeout_s=10)[0]
    res["rss"] = rss_summary(timeline.series("server"), warmup_s=args.warmup_s, band=0.05)
    return res


def start_server(args: argparse.Namespace, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(args.src).resolve()), "OMP_NUM_THREADS": str(args.threads)}
    cmd = [sys.executable, "-m", "speculab", "serve", args.model, "--port", str(port), "--threads", str(args.threads)]
    if args.max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(args.max_num_seqs)]
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"server exited with {server.returncode}: {server.stderr.read()[-2000:]}")
        if exchange(port, request("GET", "/health"), timeout_s=2)[0] == 200:
            return server
        time.sleep(0.2)
    server.kill()
    raise TimeoutError("server not healthy after 180 s")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="demo")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the speculab source tree to serve")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--soak-s", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-request-bytes", type=int, default=4 * 1024 * 1024, help="the server's limit (default)")
    ap.add_argument("--max-num-seqs", type=int, default=None, help="the server's KV slots (default: its own, 8)")
    ab = ap.add_argument_group("abuse soak (bench/abuse_soak.py)")
    ab.add_argument("--abuse-s", type=float, default=0.0, help="seconds of abuse windows in all (0: no abuse soak)")
    ab.add_argument("--window-s", type=float, default=60.0, help="length of each clean and abuse window")
    ab.add_argument("--warmup-s", type=float, default=20.0, help="valid streams before the first window")
    ab.add_argument("--streams", type=int, default=32, help="client loops, one request at a time each")
    ab.add_argument("--max-tokens", type=int, default=16, help="output tokens of each valid stream")
    ab.add_argument("--fuzz-share", type=float, default=0.10, help="abuse windows: share of fuzzed bodies")
    ab.add_argument("--disconnect-share", type=float, default=0.05, help="abuse windows: share of dropped streams")
    ab.add_argument("--slow-headers", type=int, default=50, help="abuse windows: connections sending 1 byte/s")
    ab.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    port = free_port()
    t0 = time.monotonic()
    server = start_server(args, port)
    res: dict[str, Any] = {
        "script": "bench/server_soak.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
        "src": args.src,
        "model": args.model,
        "startup_s": round(time.monotonic() - t0, 1),
    }
    try:
        proc = psutil.Process(server.pid)
        model = args.model
        alone = [exchange(port, request("POST", "/v1/completions", body(model, prompt="Hello")))[1] for _ in range(5)]
        res["one_token_alone_s"] = round(statistics.median(alone), 4)
        res["rss_idle_mb"] = round(proc.memory_info().rss / 2**20, 1)
        hostile = hostile_requests(model, args.max_request_bytes)
        for name, data in hostile.items() if args.rounds > 0 else ():
            res[name] = summarize([with_bystander(port, model, data) for _ in range(args.rounds)])
            res[name]["rss_after_mb"] = round(proc.memory_info().rss / 2**20, 1)
        if args.soak_s > 0:
            res["soak"] = soak(port, proc, soak_mix(model, hostile), args.soak_s)
        if args.abuse_s > 0:
            res["abuse_soak"] = abuse(port, proc, args)
        res["health_at_end"] = exchange(port, request("GET", "/health"))[0]
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
