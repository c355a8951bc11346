"""ServerProcess.watch: the event fires when the launched process exits, and not before."""

from __future__ import annotations

import asyncio
import platform
import sys
import time
from pathlib import Path

import pytest

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


_SYS_EXIT = {"x86_64": 60, "aarch64": 93}  # exit(2): ends the calling thread only


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in _SYS_EXIT, reason="Linux's /proc and exit(2)"
)
def test_exiting_sees_a_process_on_its_way_out_before_its_exit(tmp_path: Path) -> None:
    """A process whose main thread has exited while another runs on: the leader carries PF_EXITING in
    /proc/PID/stat and the process has not exited, the state a killed server is in while the kernel closes its
    sockets and before it reports the exit."""
    code = (
        "import ctypes, threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,)).start()\n"
        "time.sleep(0.3)\n"
        f"ctypes.CDLL(None).syscall({_SYS_EXIT[platform.machine()]}, 0)\n"
    )
    server = _server(tmp_path, "import time; time.sleep(600)")
    leaving = _server(tmp_path, code)
    try:
        assert not server.exiting()  # alive
        deadline = time.monotonic() + 10
        while not leaving.exiting() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert leaving.exiting() and leaving.returncode() is None  # on its way out, not exited
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait(10)
        assert server.exiting()  # exited
    finally:
        server.stop(1.0)
        leaving.stop(1.0)
