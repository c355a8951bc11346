"""How exactly does the harness client time streams, and how many concurrent streams can one process time?

The harness client (`speculab.harness.client.request` + `runner`, the code `speculab bench` runs) streams from the mock
server, which runs in a separate process with `--record-send-times`: it logs the moment each chunk was written
to its socket, on CLOCK_MONOTONIC, the clock `time.perf_counter()` reads in the client too. For every chunk,

    chunk timing error = client's recorded arrival - server's write time

which is the client's own error (event-loop delay, parsing, bookkeeping) plus loopback transit (tens of us),
free of the server's wake-up lateness (reported separately, as server lateness against its schedule). Also:

    TTFT overhead = client TTFT (first chunk - sent_s) - server TTFT (first write - request arrival)

what every TTFT the client reports carries beyond the server's own TTFT. It splits into the client's send delay
(sent_s -> request body handed to the socket, seen by an aiohttp trace hook), wire to server arrival (loopback
plus the server's HTTP parsing, which queues when many requests arrive at once) and the first chunk's timing
error.

Each concurrency level is a closed loop of N streams (N warmup requests first, to open the connections), then
`--rounds` x N measured requests. By default the mock adds a seeded jitter of up to one chunk gap to each TTFT,
so the streams' chunks arrive spread over the gap, as in real traffic; `--synchronized` makes every stream's
chunks arrive in the same instant instead (the worst case: a single-threaded client timestamps the k-th chunk of a
burst after handling the k-1 before it). A level is sustained when every request succeeded and the p99 chunk timing
error is <= 1 ms. The client's peak RSS (this process) is sampled during each level.

Streams are spread by a ramp (`speculab bench --ramp-up`, one request's duration by default) and chunk errors are
counted while all N run. `--client raw` measures the floor: a bare asyncio Protocol that only stamps socket reads.

`--workers 1,2` runs every level once per worker count, side by side (the same mock settings, one level after the
other): N > 1 spreads the streams over N client processes (`speculab bench --workers N`, harness.load.coordinator),
whose records come back to this process; the chunk timing error is measured the same way, since the workers and
the mock share this host's CLOCK_MONOTONIC. Client CPU and RSS then sum this process and its workers. The send
delay and wire-to-server columns need an in-process trace hook and are left empty for N > 1.

Usage (from the repository root):
    python bench/client_overhead.py                       # levels 64..1024, 50 ms between chunks
    python bench/client_overhead.py --workers 1,2 --levels 256,512,768,1024   # 1 vs 2 client processes
    python bench/client_overhead.py --levels 128,256,512 --client raw   # the machine's own floor
    python bench/client_overhead.py --levels 512 --gap-ms 20 --json out.json
    chrt -f 10 python bench/client_overhead.py            # real-time priority on a shared machine
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import mock_child
import numpy as np
import psutil
import yarl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speculab.harness.client.endpoint import EndpointConfig, RequestSampling, build_payload  # noqa: E402
from speculab.harness.client.request import StreamingRequest, request_func  # noqa: E402
from speculab.harness.client.socket_times import stamping_session  # noqa: E402
from speculab.harness.client.stream import StreamState  # noqa: E402
from speculab.harness.load.coordinator import run_workers  # noqa: E402
from speculab.harness.load.runner import LoadConfig, run_load  # noqa: E402
from speculab.harness.load.worker_plan import plan_workers  # noqa: E402
from speculab.harness.records import RequestRecord, RequestSpec  # noqa: E402
from speculab.harness.results.requests_file import RequestsFile, read_records  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--levels", default="64,128,256,512,768,1024", help="concurrent streams per level")
    p.add_argument("--ttft-ms", type=float, default=100.0)
    p.add_argument("--gap-ms", type=float, default=50.0, help="mock server's time between chunks")
    p.add_argument(
        "--synchronized",
        action="store_true",
        help="identical TTFTs, so all streams' chunks arrive in bursts at the same instants (the worst case); by "
        "default each TTFT gets a seeded jitter of up to one gap, spreading the streams' phases as real traffic does",
    )
    p.add_argument(
        "--ramp-up-s",
        type=float,
        default=None,
        help="spread the N streams' first requests over this long (speculab bench --ramp-up), so that request "
        "starts and chunk phases are spread as in steady traffic; default: one request's duration (0 with "
        "--synchronized). Chunks are counted once the ramp has ended, when all N streams are running",
    )
    p.add_argument("--tokens-per-chunk", type=int, default=2)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3, help="measured requests per stream")
    p.add_argument("--max-error-ms", type=float, default=1.0, help="p99 chunk timing error that counts as sustained")
    p.add_argument(
        "--client",
        choices=("harness", "deferred", "raw"),
        default="harness",
        help="harness: speculab's StreamingRequest as `speculab bench` runs it; deferred: the same parsing "
        "(StreamState), moved after the stream ends so that the read loop only timestamps bytes; raw: no aiohttp "
        "at all, one bare asyncio Protocol per request stamping each socket read (HTTP/1.0, parsed after the "
        "end): the floor this machine's scheduling sets for any Python client",
    )
    p.add_argument("--pin", action="store_true", help="pin the client to CPU 0 and the server to CPU 1")
    p.add_argument(
        "--gc",
        choices=("default", "freeze", "off"),
        default="default",
        help="the client's cyclic garbage collector during each level: as Python sets it (default); gc.freeze() "
        "first, so long-lived objects are no longer rescanned (freeze); or frozen and disabled, collecting only "
        "between levels (off)",
    )
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the client's event loop: asyncio's own, or uvloop (libuv; `pip install uvloop`)",
    )
    p.add_argument(
        "--workers",
        default="1",
        help="client processes, a comma list run side by side per level (1,2: each level with one process, then "
        "two); N > 1 needs --client harness",
    )
    p.add_argument("--json", type=Path, default=None, help="write the full results here")
    args = p.parse_args(argv)
    args.worker_counts = [int(x) for x in args.workers.split(",")]
    if any(n > 1 for n in args.worker_counts) and args.client != "harness":
        p.error("--workers above 1 runs speculab's own client in each process: use --client harness")
    return args


def ramp_up_s(args: argparse.Namespace) -> float:
    if args.ramp_up_s is not None:
        return args.ramp_up_s
    if args.synchronized:
        return 0.0
    chunks = -(-args.output_tokens // args.tokens_per_chunk)
    return (args.ttft_ms + (chunks - 1) * args.gap_ms) / 1e3


def start_mock(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    """The mock server in its own process, so its CPU time does not delay the client's reads."""
    flags = ["--record-send-times", "--ttft-ms", str(args.ttft_ms), "--gap-ms", str(args.gap_ms)]
    flags += ["--ttft-jitter-ms", "0" if args.synchronized else str(args.gap_ms)]
    flags += ["--tokens-per-chunk", str(args.tokens_per_chunk), "--output-tokens", str(args.output_tokens)]
    proc, url = mock_child.start_mock(flags)
    if args.pin and len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(proc.pid, {1})
    return proc, url


class PeakRss:
    """Samples the RSS of this process, and with `workers` of its client workers too (children, less the mock
    server), every 20 ms. Only with workers: listing children scans /proc, milliseconds that would block the event
    loop of a single-process client, which is the one timing the chunks (with workers this process only waits)."""

    def __init__(self, exclude_pid: int, workers: bool) -> None:
        self.proc = psutil.Process()
        self.exclude_pid, self.workers = exclude_pid, workers
        self.peak_bytes = self._rss()
        self._task: asyncio.Task[None] | None = None

    def _rss(self) -> int:
        total = self.proc.memory_info().rss
        for child in self.proc.children(recursive=True) if self.workers else ():
            if child.pid != self.exclude_pid:
                with contextlib.suppress(psutil.Error):  # a worker that just exited
                    total += child.memory_info().rss
        return total

    async def _loop(self) -> None:
        while True:
            self.peak_bytes = max(self.peak_bytes, self._rss())
            await asyncio.sleep(0.02)

    def __enter__(self) -> PeakRss:
        self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        self.peak_bytes = max(self.peak_bytes, self._rss())


def _pcts_ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    a = np.asarray(values) * 1e3
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "p99": round(float(p99), 3),
        "max": round(float(a.max()), 3),
    }


class DeferredParseRequest(StreamingRequest):
    """The harness's streaming request with its parsing moved out of the read loop: arrivals are timestamped as
    the bytes come, and fed to the same `StreamState` (with those timestamps) once the stream has ended. Same
    record; it shows how much of the timing error is the per-chunk parsing inside the loop."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        ep, clock = self.endpoint, self.clock
        st = StreamState(ep.api, logprobs_requested=ep.logprobs is not None, count_tokens=self.count_tokens)
        pieces: list[tuple[float, bytes]] = []
        sent_s = clock()
        async with session.post(ep.url, json=build_payload(ep, self.sampling, spec)) as resp:
            resp.raise_for_status()
            async for piece in resp.content.iter_any():
                pieces.append((clock(), piece))
        end_s = clock()
        for t, piece in pieces:
            if st.feed(piece, t):
                break
        else:
            st.eof()
        return st.record(spec=spec, scheduled_s=scheduled_s, sent_s=sent_s, end_s=end_s, warmup=warmup, error=None)


class _Stamp(asyncio.Protocol):
    """Stamps every socket read the moment the event loop hands it over; nothing else."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.pieces: list[tuple[float, bytes]] = []
        self.done = done

    def data_received(self, data: bytes) -> None:
        self.pieces.append((time.perf_counter(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


class RawStampRequest(StreamingRequest):
    """The timing floor: a fresh connection per request, an HTTP/1.0 POST (so the response body is the bare SSE
    stream, ended by closing), each read stamped in `data_received`, and the same `StreamState` parsing run on
    the stamped reads after the stream has ended. Whatever error this shows comes from the machine (wake-ups,
    loopback, the event loop's own turn), not from aiohttp or speculab's parsing."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        ep, clock = self.endpoint, self.clock
        url = yarl.URL(ep.url)
        body = self._body(spec)
        head = (
            f"POST {url.raw_path} HTTP/1.0\r\nHost: {url.host}:{url.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        proto = _Stamp(done)
        sent_s = clock()
        transport, _ = await loop.create_connection(lambda: proto, url.host, url.port)
        transport.write(head + body)
        await done
        end_s = clock()
        st = StreamState(ep.api, logprobs_requested=ep.logprobs is not None, count_tokens=self.count_tokens)
        in_body, pending = False, b""
        for t, piece in proto.pieces:
            if not in_body:
                pending += piece
                if b"\r\n\r\n" not in pending:
                    continue
                status_line, _, piece = pending.partition(b"\r\n\r\n")
                if b" 200 " not in status_line.split(b"\r\n", 1)[0]:
                    raise SystemExit(f"raw client: {status_line[:200]!r}")
                in_body = True
            if piece and st.feed(piece, t):
                break
        else:
            st.eof()
        return st.record(spec=spec, scheduled_s=scheduled_s, sent_s=sent_s, end_s=end_s, warmup=warmup, error=None)


def _session(written: dict[str, float]) -> aiohttp.ClientSession:
    """`make_session()`'s settings (speculab.harness.client) plus a trace hook that fills `written`: prompt -> when
    its request body was handed to the socket (aiohttp writes headers and body together, from a task of its own)."""
    trace = aiohttp.TraceConfig()

    async def on_chunk_sent(_session: Any, _ctx: Any, params: aiohttp.TraceRequestChunkSentParams) -> None:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            written[json.loads(params.chunk)["prompt"]] = time.perf_counter()

    trace.on_request_chunk_sent.append(on_chunk_sent)
    # as make_session(): no connection cap, no session-wide timeout (each request has its own)
    connector = aiohttp.TCPConnector(limit=0)
    return stamping_session(
        connector, time.perf_counter, timeout=aiohttp.ClientTimeout(total=None), trace_configs=[trace]
    )


def compare(
    records: list[RequestRecord],
    items: list[RequestSpec],
    send_log: dict[str, Any],
    wire_sent: dict[str, float],
    gap_s: float,
    full_from_s: float = 0.0,
    full_until_s: float = float("inf"),
) -> dict[str, Any]:
    """Client arrivals vs server writes, request by request (matched by their unique prompts). Chunk errors count
    only chunks that arrived while all N streams were running: after the ramp (`full_from_s`) and before the last
    request was sent (`full_until_s`; from then on streams end one by one)."""
    by_prompt = {e["prompt"]: e for e in send_log["requests"]}  # measured requests came after the warmup ones
    chunk_err: list[float] = []
    matched_chunks = 0
    ttft_over: list[float] = []
    send_delay: list[float] = []
    to_server: list[float] = []
    server_late: list[float] = []
    mismatched = 0
    for rec in records:
        prompt = items[rec.index].prompt or ""
        entry = by_prompt.get(prompt)
        if entry is None or len(entry["chunks_s"]) != len(rec.chunks):
            mismatched += 1
            continue
        writes, got = entry["chunks_s"], [c.t_s for c in rec.chunks]
        matched_chunks += len(got)
        chunk_err += [g - w for g, w in zip(got, writes, strict=True) if full_from_s <= g <= full_until_s]
        ttft_over.append((got[0] - rec.sent_s) - (writes[0] - entry["arrival_s"]))
        if prompt in wire_sent:
            send_delay.append(wire_sent[prompt] - rec.sent_s)
            to_server.append(entry["arrival_s"] - wire_sent[prompt])
        # first_deadline_s already includes the TTFT jitter
        server_late += [w - (entry["first_deadline_s"] + i * gap_s) for i, w in enumerate(writes)]
    return {
        "chunks": len(chunk_err),  # counted: arrived while all N streams ran
        "chunks_matched": matched_chunks,  # every chunk of every measured request, matched to its write
        "requests_unmatched": mismatched,
        "chunk_error_ms": _pcts_ms(chunk_err),
        "ttft_overhead_ms": _pcts_ms(ttft_over),
        "client_send_delay_ms": _pcts_ms(send_delay),
        "wire_to_server_arrival_ms": _pcts_ms(to_server),
        "server_lateness_ms": _pcts_ms(server_late),
    }


def cpu_s(t: Any) -> float:
    """CPU seconds of this process and of its children that ended (the spawned workers; the mock still runs)."""
    return t.user + t.system + t.children_user + t.children_system


async def run_level(args: argparse.Namespace, concurrency: int, workers: int = 1) -> dict[str, Any]:
    proc, url = start_mock(args)
    gc_pauses_ms: list[float] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            gc_pauses_ms.append((time.perf_counter() - started.pop()) * 1e3)

    if args.gc in ("freeze", "off"):
        gc.collect()
        gc.freeze()
    if args.gc == "off":
        gc.disable()
    gc.callbacks.append(on_gc)
    tmp = tempfile.TemporaryDirectory(prefix="client_overhead-")
    try:
        n = concurrency * args.rounds
        ramp_s = ramp_up_s(args)
        items = [RequestSpec(index=i, prompt=f"client overhead probe {i}") for i in range(n)]
        endpoint = EndpointConfig(base_url=url, model="speculab-mock", api="completions", stream=True)
        sampling = RequestSampling(max_tokens=args.output_tokens, temperature=0.0, seed=0)
        # records go to disk as `speculab bench` writes them, and are read back after the level: kept in memory,
        # they would grow every full collection of the cyclic GC (pauses that show up as timing error)
        requests = RequestsFile(Path(tmp.name) / "requests.jsonl")
        me, server = psutil.Process(), psutil.Process(proc.pid)
        cpu0, server_cpu0 = me.cpu_times(), server.cpu_times()
        t0 = time.perf_counter()
        load = LoadConfig(concurrency=concurrency, num_prompts=n, warmup=concurrency, ramp_up_s=ramp_s)
        with PeakRss(exclude_pid=proc.pid, workers=workers > 1) as rss:
            wire_sent: dict[str, float] = {}
            async with _session(wire_sent) as session:
                if workers > 1:
                    done = await run_workers(plan_workers(items, load, workers), endpoint, sampling, tokenizer=None,
                                             on_record=requests.append)  # fmt: skip
                    outcome = done.outcome
                else:
                    request = {
                        "harness": lambda: request_func(endpoint, sampling),
                        "deferred": lambda: DeferredParseRequest(endpoint, sampling),
                        "raw": lambda: RawStampRequest(endpoint, sampling),
                    }[args.client]()
                    outcome = await run_load(items, request, session, load, on_record=requests.append)
                async with session.get(url + "/mock/send_times") as resp:
                    send_log = await resp.json()
        wall_s = time.perf_counter() - t0
        cpu1, server_cpu1 = me.cpu_times(), server.cpu_times()
        requests.close()
        measured = [r for r in read_records(requests.path) if not r.warmup]
        ok = [r for r in measured if r.ok]
        result: dict[str, Any] = {
            "concurrency": concurrency,
            "workers": workers,
            "requests": len(measured),
            "ok": len(ok),
            "errors": sorted({f"{r.error.category.value}: {r.error.message[:80]}" for r in measured if r.error}),
            "client_peak_rss_mb": round(rss.peak_bytes / 2**20, 1),
            "client_cpu_s_per_wall_s": round((cpu_s(cpu1) - cpu_s(cpu0)) / wall_s, 2),
            "server_cpu_s_per_wall_s": round(
                (server_cpu1.user + server_cpu1.system - server_cpu0.user - server_cpu0.system) / wall_s, 2
            ),
            "ramp_up_s": round(ramp_s, 3),
            **compare(
                ok,
                items,
                send_log,
                wire_sent,
                args.gap_ms / 1e3,
                full_from_s=outcome.started_s + ramp_s,
                full_until_s=max(r.sent_s for r in measured),
            ),
        }
        result["gc_pauses"] = len(gc_pauses_ms)
        result["gc_longest_pause_ms"] = round(max(gc_pauses_ms, default=0.0), 2)
        p99 = result["chunk_error_ms"]["p99"]
        result["sustained"] = bool(len(ok) == len(measured) and p99 is not None and p99 <= args.max_error_ms)
        return result
    finally:
        gc.callbacks.remove(on_gc)
        gc.enable()
        gc.unfreeze()
        gc.collect()
        tmp.cleanup()
        proc.terminate()
        proc.wait(timeout=10)


def machine() -> dict[str, Any]:
    model = platform.processor()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    if args.pin:
        os.sched_setaffinity(0, {0})
    info = machine()
    print(json.dumps(info))
    levels = []
    for c, w in ((int(x), w) for x in args.levels.split(",") for w in args.worker_counts):
        r = await run_level(args, c, w)
        levels.append(r)
        e, s = r["chunk_error_ms"], r["server_lateness_ms"]
        print(
            f"{c:5d} streams, {w} worker{'s' if w > 1 else ' '}: ok {r['ok']}/{r['requests']}  chunk error p50 "
            f"{e['p50']} p99 {e['p99']} max {e['max']} ms"
            f"  TTFT overhead p50 {r['ttft_overhead_ms']['p50']} ms (client send delay p50"
            f" {r['client_send_delay_ms']['p50']}, wire to server arrival p50 {r['wire_to_server_arrival_ms']['p50']})"
            f"  server lateness p99 {s['p99']} ms"
            f"  RSS {r['client_peak_rss_mb']} MB  CPU client {r['client_cpu_s_per_wall_s']}"
            f" server {r['server_cpu_s_per_wall_s']}"
            f"  longest GC {r['gc_longest_pause_ms']} ms  sustained {r['sustained']}",
            flush=True,
        )
    by_workers = {}
    for w in args.worker_counts:
        sustained = [r["concurrency"] for r in levels if r["workers"] == w and r["sustained"]]
        by_workers[str(w)] = max(sustained) if sustained else None
    summary = {
        "machine": info,
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "levels": levels,
        "max_sustained_streams": by_workers[str(args.worker_counts[0])],
        "max_sustained_streams_by_workers": by_workers,
    }
    for w, best in by_workers.items():
        print(f"{w} client process{'es' if w != '1' else ''}: most concurrent streams with p99 chunk timing error <= "
              f"{args.max_error_ms} ms: {best}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    _args = parse_args()
    if _args.loop == "uvloop":
        import uvloop

        uvloop.run(main(_args))
    else:
        asyncio.run(main(_args))
