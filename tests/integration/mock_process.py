"""Run the mock server in a child process (its own CPU and event loop, as a real server would have), so timing
tests measure the client, not contention between client and server on one event loop."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

_CHILD = """
import asyncio, json, sys
from speculab.mock.script import MockConfig
from speculab.mock.server import running_mock_server
async def main():
    async with running_mock_server(MockConfig(**json.loads(sys.argv[1]))) as url:
        print(url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
asyncio.run(main())
"""


@contextlib.contextmanager
def mock_process(**cfg: Any) -> Iterator[str]:
    """Start `MockConfig(**cfg)` on 127.0.0.1:free-port in a child process; yields its base URL."""
    with mock_child(**cfg) as (url, _):
        yield url


@contextlib.contextmanager
def mock_child(**cfg: Any) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`mock_process`, also yielding the child, for tests that kill the server mid-run."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(cfg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": ":".join(sys.path)},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"mock server did not start (exit {proc.poll()})")
        yield url, proc
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
