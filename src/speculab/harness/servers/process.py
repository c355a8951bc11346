"""A server speculab launches: its own process group, logs to a file, readiness, cold start, and a stop that always
ends every process it started (SIGTERM to the group, then SIGKILL).

Engines fork workers (vLLM's engine core, tokenizer pools), so signals go to the whole process group, which
`start_new_session=True` makes the server's own: a Ctrl-C in the terminal reaches speculab only, and speculab
decides when the server stops.

A port can be taken between the moment speculab chooses it and the moment the server binds it (free_port releases
the port it found; a Ray cluster or any client's connect may grab it in between). `launch_server` moves a server
whose port speculab chose (`ServerCommand.port_chosen`) to another free port and relaunches it, a bounded number of
times, when the port is taken before the launch or when the server dies saying it could not bind; a port the user
pinned is one line naming the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

import aiohttp

from speculab.errors import EndpointError, UserError
from speculab.harness.client.body import MAX_ERROR_BODY_BYTES, read_body
from speculab.harness.servers.adapters.flags import redact_command

Clock = Callable[[], float]

PF_EXITING = 0x4  # include/linux/sched.h: the task is exiting (the 9th field of /proc/PID/stat)


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """How to start one arm's server: argument list (no shell), extra environment, where it listens."""

    command: tuple[str, ...]
    port: int
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    health_path: str = "/health"
    ready_timeout_s: float = 600.0
    # speculab chose the port (no one pinned it): it may move the server to another when that one is taken
    port_chosen: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


PORT_FLAG = "--port"  # how every engine speculab launches takes its port (vLLM, SGLang, llama.cpp, TGI, speculab)
PORT_TRIES = 3  # relaunches on another port before the launch fails: each try is a new free port
# What a server's log says when another process holds its port: the OS's EADDRINUSE as Python prints it (uvicorn's
# "[Errno 98] error while attempting to bind on address (...): address already in use" in vLLM, SGLang and
# speculab's engine; vLLM's own socket's "OSError: [Errno 98] Address already in use"; the mock's "cannot listen on
# ...(Address already in use)"), as Rust prints it (TGI: "Address already in use (os error 98)"), and by name. An
# engine's own words beyond these are its adapter's `port_taken_signs` (llama.cpp: "couldn't bind HTTP server socket").
PORT_TAKEN_SIGNS = ("address already in use", "eaddrinuse", "errno 98", "os error 98")


def with_port(cmd: ServerCommand, port: int) -> ServerCommand:
    """The same command listening on `port`: the value of its --port flag (`--port N` or `--port=N`) and its URL; a
    UserError when the command names no --port (speculab cannot tell it where to listen)."""
    args, found = list(cmd.command), False
    for i, a in enumerate(args):
        if a == PORT_FLAG and i + 1 < len(args):
            args[i + 1], found = str(port), True
        elif a.startswith(PORT_FLAG + "="):
            args[i], found = f"{PORT_FLAG}={port}", True
    if not found:
        raise UserError(
            f"cannot choose a port for {' '.join(redact_command(cmd.command))[:200]}: the command takes no "
            f"{PORT_FLAG}; add {PORT_FLAG} to it, or pin the port it listens on"
        )
    return replace(cmd, command=tuple(args), port=port)


def chosen_port_command(cmd: ServerCommand) -> ServerCommand:
    """`cmd` on a free port speculab chose (an experiment's `port: auto`), written as its --port value; it may be
    moved again if another process takes that port first."""
    return with_port(replace(cmd, port_chosen=True), free_port(cmd.host))


def port_taken(log_text: str, signs: Sequence[str] = ()) -> bool:
    """True when a server's log says it could not bind its port (PORT_TAKEN_SIGNS, and the engine's own `signs`)."""
    text = log_text.lower()
    return any(sign.lower() in text for sign in (*PORT_TAKEN_SIGNS, *signs))


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
        self._log_from = 0  # where this launch's lines begin in the log (a relaunch appends to the same file)

    def start(self) -> ServerProcess:
        if port_in_use(self.cmd.host, self.cmd.port):
            raise UserError(
                f"{self.name}: port {self.cmd.port} on {self.cmd.host} is already in use; stop whatever listens "
                "there (speculab starts and stops the server itself) or choose another port"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log_from = self._log.tell()
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

    def exiting(self) -> bool:
        """Whether the process has exited or is on its way out. Linux marks an exiting task (PF_EXITING in
        /proc/PID/stat's flags) before the kernel closes its sockets, and the exit itself (`returncode`, the pidfd
        `watch` reads) only after: on a busy machine a run at concurrency 1 recorded 82 refused connections in that
        gap (a clean-clone rehearsal, 2026-12-06). Off Linux, only the exit is seen."""
        if self.proc is None:
            return False
        if self.returncode() is not None:
            return True
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            return False
        fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces: state, ppid, ...
        return len(fields) > 6 and fields[6].isdigit() and bool(int(fields[6]) & PF_EXITING)

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def port_taken(self, signs: Sequence[str] = ()) -> bool:
        """This launch's log (its last 64 KB) says the server could not bind its port (`port_taken`)."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(max(self._log_from, f.seek(0, os.SEEK_END) - 65536))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return False
        return port_taken(text, signs)

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


@dataclass(frozen=True, slots=True)
class Launched:
    """A started server, when it was ready, and the ports other processes took before it could bind them."""

    server: ServerProcess  # server.cmd: the command as it was last launched (on its final port)
    ready_s: float | None  # process start -> health 200 (of the launch that stayed up); None: stopped while waiting
    ports_taken: tuple[int, ...] = ()  # each port it was moved off, in order (empty: it started where it was told)


async def launch_server(
    cmd: ServerCommand,
    log_path: Path,
    session: aiohttp.ClientSession,
    stop: asyncio.Event | None = None,
    *,
    name: str = "server",
    clock: Clock = time.perf_counter,
    signs: Sequence[str] = (),  # the engine's own words for a port it could not bind (its adapter's)
    tries: int = PORT_TRIES,
) -> Launched:
    """Start the server and wait until it is ready; a chosen port that is taken (before the launch, or by the time
    the server binds it: it dies and its log says so) moves it to another free port, at most `tries` times. A
    server that fails otherwise is stopped and its error raised."""
    taken: list[int] = []
    while True:
        if cmd.port_chosen and port_in_use(cmd.host, cmd.port) and len(taken) < tries:
            taken.append(cmd.port)
            cmd = with_port(cmd, free_port(cmd.host))
            continue
        server = ServerProcess(cmd, log_path, name=name, clock=clock).start()
        try:
            ready_s = await server.wait_ready(session, stop)
        except EndpointError:
            died = server.returncode() is not None  # else it never answered in time
            await asyncio.to_thread(server.stop)
            if not died or not server.port_taken(signs):
                raise  # it did not die of its port (a timeout, a crash)
            if not cmd.port_chosen:
                raise UserError(
                    f"{name}: port {cmd.port} on {cmd.host} was taken by another process before the server could "
                    f"bind it (log: {log_path}); stop whatever holds it, or choose another port"
                ) from None
            if len(taken) >= tries:
                raise EndpointError(
                    f"{name}: {len(taken) + 1} free ports in a row were taken before the server could bind them "
                    f"({', '.join(map(str, [*taken, cmd.port]))}; log: {log_path}); something on this host takes "
                    "ports as fast as they free up: stop it, or pin a port outside its range"
                ) from None
            taken.append(cmd.port)
            cmd = with_port(cmd, free_port(cmd.host))
            continue
        except BaseException:
            await asyncio.to_thread(server.stop)  # interrupted while waiting: no server left behind
            raise
        return Launched(server, ready_s, tuple(taken))
