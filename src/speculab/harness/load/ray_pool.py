"""Client workers as Ray actors (`speculab bench --workers N --ray ADDRESS`, `workers: {n: N, ray: auto}`): past one
load machine, the same worker that load.pools spawns runs on the nodes of a Ray cluster.

Each actor runs load.worker's entry point (the existing runner and client, on its own event loop in a thread of the
actor) over the share plan_workers gave it; the coordinator here starts, releases and drains them exactly as it
does local processes (load.coordinator.run_workers). Ray places the actors with the SPREAD strategy, one CPU each, so
N workers land on as many nodes as the cluster has. What differs from one host is the clock:
- TTFT, TPOT and gaps are differences of one worker's own readings and need no sync;
- the common start and the records' absolute times are put on the coordinator's clock with each worker's offset
  (load.clock_sync): exact when the actor reads this process's own clock (the same boot and time namespace, and
  every round trip agreeing: a local cluster), otherwise estimated from the tightest of ROUND_TRIPS round trips,
  and the manifest records the offset and its uncertainty.
Records come back in batches (`poll`, every ~0.1 s) and are written as they arrive, so a node that dies keeps
what it had sent.

`ADDRESS`: "auto" (the cluster this machine belongs to: RAY_ADDRESS, or a `ray start` here), "local" (start a
private single-node cluster in this process: tests, and trying it out), or a cluster address (host:port, or
ray://host:10001 through Ray Client). Every node needs the same speculab version, and the endpoint's URL must be
reachable from every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

from speculab import __version__
from speculab.errors import UserError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.clock_sync import SAME_CLOCK, ClockOffset, clock_id, offset_from_round_trips, one_clock
from speculab.harness.load.worker import drain, endpoint_fields, worker_main
from speculab.harness.load.worker_plan import WorkerPlan
from speculab.harness.records import RequestRecord

T = TypeVar("T")
INSTALL_HINT = "pip install 'speculab[ray]'"
CONNECT_TIMEOUT_S = 5.0  # a TCP connect to the cluster's address, before Ray's own (much longer) retries
CONNECT_WAIT_S = 120.0  # ray.init: a local cluster starts in ~5 s on 2 cores; a remote one answers sooner
PLACE_TIMEOUT_S = 120.0  # placing and starting every actor (Ray starts a worker process per actor)
ROUND_TRIPS = 16
START_MARGIN_S = 0.5  # "go" crosses the network to every actor: more room than local processes need
POLL_WAIT_S = 0.1
START_HINT = "start one with `ray start --head` on the head node, or use --ray local for one on this machine"


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray on this machine: {INSTALL_HINT}") from None
    return ray


def connect(address: str) -> Any:
    """Join (or, for "local", start) the cluster once per process; later calls reuse the connection."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    _reachable(address)
    opts: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address == "local":
            # a new private cluster even when RAY_ADDRESS names one; actors mostly wait on sockets: room for a
            # worker per core, and at least for two
            ray.init(address="local", num_cpus=max(2, os.cpu_count() or 1), **opts)
        else:
            ray.init(address=address, **opts)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UserError(
            f"cannot join the Ray cluster at {address!r} ({str(e).splitlines()[0] if str(e) else type(e).__name__}); "
            f"{START_HINT}"
        ) from None
    return ray


def check_address(address: str) -> None:
    """Before anything is written: Ray is installed and something answers at `address`."""
    require_ray()
    _reachable(address)


def _reachable(address: str) -> None:
    """A cluster address that nothing answers on is refused at once: Ray itself retries it for minutes."""
    if address in ("local", "auto"):
        return
    u = urlparse(address if "://" in address else f"gcs://{address}")
    try:
        port = u.port
    except ValueError:
        port = None
    if not u.hostname or port is None:
        raise UserError(f"--ray {address!r} is not a cluster address: give HOST:PORT, ray://HOST:PORT, auto or local")
    try:
        socket.create_connection((u.hostname, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise UserError(
            f"nothing answers at the Ray cluster address {address!r} ({e.strerror or e}); {START_HINT}"
        ) from None


async def _off_loop(fn: Callable[[], T], stop: asyncio.Event | None, timeout_s: float, what: str) -> T | None:
    """`fn()` on a daemon thread, given up on at `stop` (None back) or after `timeout_s` (an error): Ray's calls
    block without a deadline, and a thread left behind must not keep the process from exiting. Called once per
    process (connect), so the parked thread is one."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not fut.done():
            fut.set_result(result) if error is None else fut.set_exception(error)

    def run() -> None:
        try:
            r = fn()
        except BaseException as e:  # handed to the waiting coroutine
            loop.call_soon_threadsafe(settle, None, e)
        else:
            loop.call_soon_threadsafe(settle, r, None)
        # and then the thread stays: a local cluster's processes (GCS, raylet) are started from it with a
        # parent-death signal, which the kernel sends when this *thread* exits, so they would go with it
        threading.Event().wait()

    threading.Thread(target=run, name="speculab-ray-connect", daemon=True).start()
    if await _finished_first(fut, stop, timeout_s):
        return fut.result()
    if stop is not None and stop.is_set():
        return None
    raise UserError(f"{what} took longer than {timeout_s:g} s; {START_HINT}")


async def _finished_first(fut: asyncio.Future[Any], stop: asyncio.Event | None, timeout_s: float) -> bool:
    """Wait for `fut`, but no longer than `timeout_s` nor past `stop`: True when it finished (else it is cancelled;
    a thread behind it cannot be, and is left parked)."""
    waits = [fut] if stop is None else [fut, asyncio.ensure_future(stop.wait())]
    finished, _ = await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        if w not in finished:
            w.cancel()
    return fut in finished


class Worker:
    """The actor: one load.worker worker on a thread, its messages buffered until the coordinator polls."""

    def __init__(self) -> None:
        self.out: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.go_q: queue.Queue[float] = queue.Queue()
        self.stop_event = threading.Event()

    def info(self) -> dict[str, Any]:
        ray = require_ray()
        return {
            "host": socket.gethostname(),
            "node_ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "clock_id": clock_id(),
            "version": __version__,
        }

    def clock(self) -> float:
        return time.perf_counter()

    def start(
        self, plan: WorkerPlan, endpoint: dict[str, Any], sampling: RequestSampling, tokenizer: str | None
    ) -> None:
        def run() -> None:
            try:
                worker_main(plan, endpoint, sampling, tokenizer, self.out, self.go_q, self.stop_event)
            except BaseException as e:  # the coordinator hears of it, and keeps what was sent
                self.out.put(
                    ("done", plan.worker, {"interrupted": True, "crashed": True, "error": f"{type(e).__name__}: {e}"})
                )

        threading.Thread(target=run, name=f"speculab-worker-{plan.worker}", daemon=True).start()

    def go(self, at: float) -> None:
        self.go_q.put(at)

    def stop(self) -> None:
        self.stop_event.set()

    def poll(self, wait_s: float) -> list[tuple[Any, ...]]:
        return drain(self.out, wait_s)


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RayPool:
    """load.pools.WorkerPool over Ray actors."""

    start_margin_s = START_MARGIN_S

    def __init__(
        self,
        ray: Any,
        actors: dict[int, Any],
        infos: dict[int, dict[str, Any]],
        clocks: dict[int, ClockOffset],
        measured: dict[int, ClockOffset],
    ):
        self.ray, self.actors, self.infos, self.clocks, self.measured = ray, actors, infos, clocks, measured
        self.dead: dict[int, dict[str, Any]] = {}
        self.finished: set[int] = set()

    @classmethod
    async def start(
        cls,
        address: str,
        plans: Sequence[WorkerPlan],
        endpoint: EndpointConfig,
        sampling: RequestSampling,
        tokenizer: str | None,
        stop: asyncio.Event | None = None,
    ) -> RayPool | None:
        """The pool with every actor placed, checked and started; None when `stop` came first."""
        ray = require_ray()
        if (
            not ray.is_initialized()
            and await _off_loop(lambda: connect(address), stop, CONNECT_WAIT_S, f"joining the Ray cluster {address!r}")
            is None
        ):
            return None
        cls_remote = ray.remote(num_cpus=1, max_concurrency=4)(Worker)
        actors = {p.worker: cls_remote.options(scheduling_strategy="SPREAD").remote() for p in plans}
        try:
            infos = await _placed(ray, actors, address, stop)
            if infos is None:
                raise asyncio.CancelledError  # stopped while Ray placed them: the actors go, nothing ran
            here = {"node_ip": ray.util.get_node_ip_address(), "clock_id": clock_id()}
            _check_workers(infos, here, endpoint.base_url)
            trips = {w: await _round_trips(a) for w, a in actors.items()}
            measured = {w: offset_from_round_trips(t) for w, t in trips.items()}
            # a time namespace keeps the boot id: one clock needs the same clock_id and round trips that agree
            clocks = {
                w: SAME_CLOCK if one_clock(here["clock_id"], infos[w]["clock_id"], trips[w]) else measured[w]
                for w in actors
            }
            ep = endpoint_fields(endpoint)
            await asyncio.gather(*(_wait(actors[p.worker].start.remote(p, ep, sampling, tokenizer)) for p in plans))
        except BaseException as e:
            for a in actors.values():
                ray.kill(a)
            if isinstance(e, asyncio.CancelledError) and stop is not None and stop.is_set():
                return None
            raise
        return cls(ray, actors, infos, clocks, measured)

    async def messages(self) -> list[tuple[Any, ...]]:
        live = [w for w in self.actors if w not in self.dead and w not in self.finished]
        if not live:
            await asyncio.sleep(POLL_WAIT_S)
            return []
        got = await asyncio.gather(
            *(_wait(self.actors[w].poll.remote(POLL_WAIT_S)) for w in live), return_exceptions=True
        )
        out: list[tuple[Any, ...]] = []
        for w, msgs in zip(live, got, strict=True):
            if isinstance(msgs, BaseException):  # the actor, or its node, is gone
                first = str(msgs).strip().splitlines()[0] if str(msgs).strip() else ""
                self.dead[w] = {"interrupted": True, "crashed": True, "error": f"{type(msgs).__name__}: {first}"}
                continue
            out += [self._on_our_clock(w, m) for m in msgs]
        return out

    def _on_our_clock(self, worker: int, msg: tuple[Any, ...]) -> tuple[Any, ...]:
        clock = self.clocks[worker]
        if msg[0] == "rec" and clock.offset_s != 0.0:
            return ("rec", RequestRecord.from_dict(msg[1]).shifted(-clock.offset_s).to_dict())
        if msg[0] == "done":
            self.finished.add(worker)
            d = dict(msg[2])
            for key in ("started_s", "ended_s", "start_at_s"):
                if d.get(key) is not None:
                    d[key] = clock.to_coordinator(d[key])
            return ("done", msg[1], d)
        return msg

    def lost(self, done: set[int]) -> dict[int, dict[str, Any]]:
        return {w: d for w, d in self.dead.items() if w not in done}

    def go(self, at: float) -> None:
        for w, a in self.actors.items():
            a.go.remote(self.clocks[w].to_worker(at))

    def stop(self) -> None:
        for w, a in self.actors.items():
            if w not in self.dead:
                a.stop.remote()

    def close(self) -> None:
        self.stop()
        for a in self.actors.values():
            with contextlib.suppress(Exception):  # already gone with its node
                self.ray.kill(a)

    def describe(self, worker: int) -> dict[str, Any]:
        info = self.infos[worker]
        clock = self.clocks[worker].to_dict()
        clock["round_trip"] = self.measured[worker].to_dict()  # on one host, a check of the estimate: ~0 +- its bound
        return {"host": info["host"], "node_ip": info["node_ip"], "pid": info["pid"], "ray": True, "clock": clock}


async def _wait(ref: Any) -> Any:
    return await asyncio.wrap_future(ref.future())


async def _placed(
    ray: Any, actors: dict[int, Any], address: str, stop: asyncio.Event | None
) -> dict[int, dict[str, Any]] | None:
    refs = {w: a.info.remote() for w, a in actors.items()}
    got = asyncio.ensure_future(asyncio.gather(*(_wait(r) for r in refs.values())))
    if await _finished_first(got, stop, PLACE_TIMEOUT_S):
        return dict(zip(refs, got.result(), strict=True))
    if stop is not None and stop.is_set():
        return None
    cpus = ray.cluster_resources().get("CPU", 0)
    raise UserError(
        f"the Ray cluster at {address!r} did not start {len(actors)} client workers of 1 CPU each within "
        f"{PLACE_TIMEOUT_S:g} s (it has {cpus:g} CPUs in all); lower --workers or add nodes"
    )


def _check_workers(infos: dict[int, dict[str, Any]], here: dict[str, Any], url: str) -> None:
    versions = {i["version"] for i in infos.values()}
    if versions != {__version__}:
        other = sorted(versions - {__version__})
        raise UserError(
            f"Ray nodes run speculab {', '.join(other)}, this machine {__version__}: install the same version on "
            "every node"
        )
    remote = sorted({i["node_ip"] for i in infos.values() if i["node_ip"] != here["node_ip"]})
    if remote and is_loopback(url):
        raise UserError(
            f"--url {url} is this machine's loopback, which workers on other nodes ({', '.join(remote)}) cannot "
            "reach: give the server's network address"
        )


async def _round_trips(actor: Any) -> list[tuple[float, float, float]]:
    """(t0, tw, t1) per round trip: this clock before, the actor's, this clock after."""
    samples = []
    for _ in range(ROUND_TRIPS):
        t0 = time.perf_counter()
        tw = await _wait(actor.clock.remote())
        samples.append((t0, float(tw), time.perf_counter()))
    return samples
