"""Resident memory of `speculab serve` with a ~30M-parameter model: idle, peak under load, and after.

Writes a random ~32M-parameter checkpoint with a real tokenizer, starts `python -m speculab serve` on a free
loopback port, waits for /health, samples the server's RSS (process and children) every 20 ms while
--concurrency streaming-free completions of --max-tokens tokens run, and prints one JSON line.
Goal (issue 3): <= 1 GB.

python bench/server_rss.py [--concurrency 16] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # run from a checkout: the package and tests/fakes

from tests.fakes.tiny_checkpoint import make_tiny_checkpoint  # noqa: E402

from speculab.engine.model import ModelConfig  # noqa: E402
from speculab.harness.servers.process import free_port  # noqa: E402


def rss_bytes(proc: psutil.Process) -> int:
    """RSS of the process and its children (uvicorn may fork workers)."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def post_json(url: str, body: dict, timeout_s: float = 600) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.loads(r.read())


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"server not healthy after {timeout_s} s")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--tiny", action="store_true", help="tiny model (smoke test)")
    args = ap.parse_args(argv)
    dims = (
        {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2}
        if args.tiny
        else {"vocab_size": 8192, "hidden": 512, "layers": 8, "heads": 8, "kv_heads": 4, "intermediate": 1408}
    )
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = make_tiny_checkpoint(Path(tmp) / "model", max_position_embeddings=1024, **dims)
        hf_config = json.loads((ckpt / "config.json").read_text())
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        cmd = [sys.executable, "-m", "speculab", "serve", str(ckpt), "--port", str(port)]
        cmd += ["--max-num-seqs", str(args.concurrency), "--max-model-len", "1024"]
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            t0 = time.monotonic()
            wait_healthy(url, server, timeout_s=180)
            startup_s = time.monotonic() - t0
            proc = psutil.Process(server.pid)
            idle = rss_bytes(proc)
            peak, stop = [idle], threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], rss_bytes(proc))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            models = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=10).read())
            model_name = models["data"][0]["id"]
            body = {
                "model": model_name,
                "prompt": "The quick brown fox jumps over the lazy dog. " * 4,
                "max_tokens": args.max_tokens,
                "temperature": 0,
                "ignore_eos": True,
            }
            t1 = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
                replies = list(pool.map(lambda _: post_json(url + "/v1/completions", body), range(args.concurrency)))
            load_s = time.monotonic() - t1
            stop.set()
            sampler.join()
            after = rss_bytes(proc)
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    tokens = sum(r["usage"]["completion_tokens"] for r in replies)
    res = {
        "script": "bench/server_rss.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
        "num_parameters": ModelConfig.from_hf(hf_config).num_parameters,
        "concurrency": args.concurrency,
        "completion_tokens": tokens,
        "startup_s": round(startup_s, 1),
        "load_s": round(load_s, 2),
        "rss_idle_mb": round(idle / 2**20, 1),
        "rss_peak_mb": round(peak[0] / 2**20, 1),
        "rss_after_mb": round(after / 2**20, 1),
    }
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
