"""ServerProcess.watch: the event fires when the launched process exits, and not before."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from speculab.harness.servers.process import ServerCommand, ServerProcess, free_port


def _server(tmp_path: Path, code: str) -> ServerProcess:
    return ServerProcess(ServerCommand((sys.executable, "-c", code), free_port()), tmp_path / "s.log", name="x").start()


async def test_watch_fires_promptly_when_the_process_is_killed(tmp_path: Path) -> None:
    server = _server(tmp_path, "import time; time.sleep(600)")
    try:
        exited = asyncio.Event()
        task = asyncio.create_task(server.watch(exited))
        await asyncio.sleep(0.3)
        assert not exited.is_set()
        assert server.proc is not None
        server.proc.kill()
        t = time.perf_counter()
        await asyncio.wait_for(exited.wait(), 5)
        assert time.perf_counter() - t < 1.0
        await task
        err = server.died_error("during level c1, repeat 1")
        assert "x server exited with code -9 during level c1, repeat 1 (log:" in str(err)
    finally:
        server.stop(1.0)


async def test_watch_of_a_process_that_already_exited_returns_at_once(tmp_path: Path) -> None:
    server = _server(tmp_path, "pass")
    try:
        assert server.proc is not None
        server.proc.wait(10)
        exited = asyncio.Event()
        await asyncio.wait_for(server.watch(exited), 5)
        assert exited.is_set()
    finally:
        server.stop(1.0)
