"""A server speculab launches: its own process group, logs to a file, readiness, cold start, and a stop that always
ends every process it started (SIGTERM to the group, then SIGKILL).

Engines fork workers (vLLM's engine core, tokenizer pools), so signals go to the whole process group, which
`start_new_session=True` makes the server's own: a Ctrl-C in the terminal reaches speculab only, and speculab
decides when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import aiohttp

from speculab.errors import EndpointError, UserError
from speculab.harness.client.body import MAX_ERROR_BODY_BYTES, read_body
from speculab.harness.servers.adapters.flags import redact_command

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """How to start one arm's server: argument list (no shell), extra environment, where it listens."""

    command: tuple[str, ...]
    port: int
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    health_path: str = "/health"
    ready_timeout_s: float = 600.0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def port_in_use(host: str, port: int) -> bool:
    """True when something already accepts connections there (we would measure the wrong server)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """One launched server. `start()` records the process start on `clock`; `stop()` is idempotent."""

    def __init__(self, cmd: ServerCommand, log_path: Path, *, name: str = "server", clock: Clock = time.perf_counter):
        self.cmd, self.log_path, self.name, self.clock = cmd, log_path, name, clock
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s: float | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> ServerProcess:
        if port_in_use(self.cmd.host, self.cmd.port):
            raise UserError(
                f"{self.name}: port {self.cmd.port} on {self.cmd.host} is already in use; stop whatever listens "
                "there (speculab starts and stops the server itself) or choose another port"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"$ {' '.join(redact_command(self.cmd.command))}\n".encode())
        self._log.flush()
        env = {**os.environ, **self.cmd.env}
        self.started_s = self.clock()
        try:
            self.proc = subprocess.Popen(
                list(self.cmd.command),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: we signal the group, the terminal's Ctrl-C does not
            )
        except (FileNotFoundError, PermissionError) as e:
            self._close_log()
            raise UserError(
                f"{self.name}: cannot start {self.cmd.command[0]!r} ({e.strerror}); check the command's first "
                "argument (an executable on PATH or a path)"
            ) from None
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def _died(self, when: str = "before it was ready") -> EndpointError:
        code = self.returncode()
        tail = self.log_tail(1).strip()
        last = f": {tail[:300]}" if tail else ""
        return EndpointError(f"{self.name} server exited with code {code} {when} (log: {self.log_path}){last}")

    def died_error(self, when: str) -> EndpointError:
        """The one-line error for a server that exited `when` (e.g. "during level c4, repeat 1")."""
        return self._died(when)

    async def watch(self, on_exit: asyncio.Event, interval_s: float = 0.05) -> None:
        """Set `on_exit` as soon as the process has exited (run as a task; cancel it when done). On Linux a pidfd
        wakes the loop the moment it exits (at concurrency 1 a dead server refuses a request per millisecond, so
        a polling delay would be paid in failed requests); elsewhere it polls every `interval_s`."""
        if self.proc is None:
            return
        fd = None
        with contextlib.suppress(AttributeError, OSError):
            fd = os.pidfd_open(self.proc.pid)
        if fd is None:
            while self.returncode() is None:
                await asyncio.sleep(interval_s)
            on_exit.set()
            return
        loop = asyncio.get_running_loop()
        exited = asyncio.Event()
        try:
            loop.add_reader(fd, exited.set)
            if self.returncode() is None:
                await exited.wait()
            on_exit.set()
        finally:
            loop.remove_reader(fd)
            os.close(fd)

    async def wait_ready(self, session: aiohttp.ClientSession, stop: asyncio.Event | None = None) -> float | None:
        """Poll the health endpoint until it answers 200; seconds from process start, None if stopped first."""
        assert self.started_s is not None, "start() first"
        url = self.cmd.url + self.cmd.health_path
        deadline = self.started_s + self.cmd.ready_timeout_s
        while True:
            if stop is not None and stop.is_set():
                return None
            if self.returncode() is not None:
                raise self._died()
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2.0)) as resp:
                    await read_body(resp, MAX_ERROR_BODY_BYTES, truncate=True)  # only its status matters
                    if resp.status == 200:
                        return self.clock() - self.started_s
            if self.clock() > deadline:
                raise EndpointError(
                    f"{self.name} server not ready within {self.cmd.ready_timeout_s:g} s ({url} never answered 200; "
                    f"log: {self.log_path}); raise launch.ready_timeout_s or fix the command"
                )
            await asyncio.sleep(0.2)

    def process_tree(self) -> list[object]:
        """psutil.Process objects of the server and all its descendants (empty when gone or psutil missing)."""
        if self.proc is None or self.returncode() is not None:
            return []
        try:
            import psutil

            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except Exception:  # psutil.NoSuchProcess / AccessDenied / ImportError: no reading, not a failure
            return []

    def rss_bytes(self) -> float | None:
        """Resident set size of the whole server process tree, bytes."""
        total, seen = 0.0, False
        for p in self.process_tree():
            with contextlib.suppress(Exception):
                total += p.memory_info().rss  # type: ignore[attr-defined]
                seen = True
        return total if seen else None

    def pids(self) -> set[int]:
        return {p.pid for p in self.process_tree()}  # type: ignore[attr-defined]

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM to the process group, wait up to grace_s, then SIGKILL the group. Always safe to call."""
        if self.proc is None:
            return None
        pgid = self.proc.pid  # start_new_session: the group id is the leader's pid
        tree = self.process_tree()  # before signalling: children re-parent once the leader is gone
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        # workers that outlive the leader (or a leader that ignored SIGTERM) are killed too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for p in tree[1:]:  # a descendant that left the group (setsid) gets its own SIGKILL
            with contextlib.suppress(Exception):
                p.kill()  # type: ignore[attr-defined]
        if len(tree) > 1:
            with contextlib.suppress(Exception):
                import psutil

                psutil.wait_procs(tree[1:], timeout=5)  # type: ignore[arg-type]
        self._close_log()
        return self.proc.returncode

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
