"""`speculab bench` for minutes on end against a fast mock server: does the client's memory stay flat?

Starts `speculab mock-server` (tiny TTFT and gaps, so the client handles as many requests per second as the machine
allows) and `python -m speculab bench ... --duration S` against it, each in its own process, exactly as a user would
run them, and samples both processes' RSS every --interval-s seconds from this one, together with the number of
records in requests.jsonl. At the end: RSS over time for client and server, requests per second, the client's RSS
growth per request after warm-up, how long the summary took once the load ended (and the RSS peak meanwhile), and
the verdict: is every client sample after warm-up within +-10% (--band) of the warmed-up value?
`--src DIR` runs another checkout's client (e.g. a commit before a fix); the mock always runs this tree's code.
Prints one JSON object (last line); --json also writes it to a file.

    python bench/client_soak.py                     # 10 minutes, concurrency 16, 16-token responses
    python bench/client_soak.py --minutes 1 --src /tmp/base/src --json before.json
    python bench/client_soak.py --minutes 0.1 --interval-s 0.5      # a smoke run (the CI test)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mock_child
import psutil
from rss_timeline import MB, RssTimeline, rss_summary

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="measured load duration (speculab bench --duration)")
    p.add_argument("--interval-s", type=float, default=5.0, help="seconds between RSS samples")
    p.add_argument("--warmup-s", type=float, default=None, help="RSS warm-up; default min(60 s, 10%% of the run)")
    p.add_argument("--band", type=float, default=0.10, help="flat: every sample after warm-up within +-this")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--warmup-requests", type=int, default=64, help="speculab bench --warmup")
    p.add_argument("--output-tokens", type=int, default=16)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--ttft-ms", type=float, default=1.0)
    p.add_argument("--gap-ms", type=float, default=1.0)
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the speculab tree the client runs")
    p.add_argument("--keep", type=Path, default=None, help="write the bench run directory here (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the result here")
    return p.parse_args(argv)


class RecordCount:
    """Lines in a growing requests.jsonl, counted from where the last call stopped reading."""

    def __init__(self, path: Path):
        self.path, self.offset, self.lines = path, 0, 0

    def __call__(self) -> dict[str, Any]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return {"records": 0}
        self.offset += len(data)
        self.lines += data.count(b"\n")
        return {"records": self.lines}


def bench_argv(args: argparse.Namespace, url: str, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "speculab", "bench", "--url", url, "--output", str(out)]
    argv += ["--concurrency", str(args.concurrency), "--duration", str(args.minutes * 60)]
    argv += ["--warmup", str(args.warmup_requests), "--max-tokens", str(args.output_tokens)]
    return argv


def run_soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    mock_flags = ["--ttft-ms", str(args.ttft_ms), "--gap-ms", str(args.gap_ms)]
    mock_flags += ["--output-tokens", str(args.output_tokens), "--tokens-per-chunk", str(args.tokens_per_chunk)]
    mock, url = mock_child.start_mock(mock_flags)
    try:
        env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
        client = subprocess.Popen(
            bench_argv(args, url, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        procs = {"client": psutil.Process(client.pid), "server": psutil.Process(mock.pid)}
        with RssTimeline(procs, args.interval_s, probe=RecordCount(out / "requests.jsonl")) as timeline:
            _, stderr = client.communicate()
            exited_s = time.monotonic() - timeline.t0
        if client.returncode != 0:
            raise SystemExit(f"speculab bench exited with {client.returncode}: {stderr[-2000:]}")
    finally:
        mock.terminate()
        mock.wait(timeout=30)
    # the load ended when the last record was written; the client then computed and wrote the summary
    load_end_s = (out / "requests.jsonl").stat().st_mtime - timeline.t0_wall
    return describe_soak(args, timeline, load_end_s, exited_s, json.loads((out / "summary.json").read_text()))


def describe_soak(
    args: argparse.Namespace, timeline: RssTimeline, load_end_s: float, exited_s: float, summary: dict[str, Any]
) -> dict[str, Any]:
    samples = timeline.samples
    counts = [s.extra["records"] for s in samples]
    duration_s = args.minutes * 60
    warmup_s = args.warmup_s if args.warmup_s is not None else min(60.0, 0.1 * duration_s)
    client = rss_summary(timeline.series("client", until_s=load_end_s), warmup_s, band=args.band)
    server = rss_summary(timeline.series("server"), warmup_s, band=args.band)
    during_load = [s for s in samples if warmup_s <= s.t_s <= load_end_s and s.rss["client"] is not None]
    per_request = None
    if len(during_load) > 1 and during_load[-1].extra["records"] > during_load[0].extra["records"]:
        first, last = during_load[0], during_load[-1]
        grown = (last.rss["client"] or 0) - (first.rss["client"] or 0)
        per_request = round(grown / (last.extra["records"] - first.extra["records"]), 1)
    after_load = [r for s in samples if s.t_s > load_end_s and (r := s.rss["client"]) is not None]
    c = summary["counts"]
    step = max(1, len(samples) // 20)
    return {
        "script": "bench/client_soak.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
        "src": str(args.src),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "json"},
        "requests": {"sent": c["sent"], "ok": c["ok"], "error": c["error"], "warmup": c["warmup"]},
        "requests_per_s": summary["throughput"]["requests_per_s"],
        "records_timeline": [(s.t_s, n) for s, n in zip(samples[::step], counts[::step], strict=True)],
        "load_end_s": round(load_end_s, 2),
        "summary_s": round(exited_s - load_end_s, 1),
        "client_rss_after_load_max_mb": round(max(after_load) / MB, 1) if after_load else None,
        "client_growth_per_request_bytes": per_request,
        "client": client,
        "server": server,
        "verdict": (
            f"client RSS {'flat' if client.get('flat') else 'NOT flat'} within +-{100 * args.band:g}% after "
            f"{warmup_s:g} s of warm-up ({client.get('rss_after_warmup_mb')} -> {client.get('rss_end_mb')} MB, "
            f"range {client.get('rss_after_warmup_range_pct')} %)"
        ),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.keep is not None:
        res = run_soak(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="client_soak-") as tmp:
            res = run_soak(args, Path(tmp) / "run")
    print(json.dumps(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
