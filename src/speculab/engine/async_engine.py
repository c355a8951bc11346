"""The engine in one background thread, talking to asyncio through thread-safe queues.

Model forwards are blocking torch work, so the engine loop runs in its own thread: requests and aborts
go in through a `queue.SimpleQueue`; each step's outputs come back to the event loop with
`loop.call_soon_threadsafe` into the request's own `asyncio.Queue`. Admission (validation and the
queue bound) is decided on the caller's side before anything is queued, so a refused request never
touches the engine and an accepted one always gets a final event.

No exception ends the loop. A request that fails inside a step (`FinishReason.ERROR`, see recovery.py) gets a
`RequestFailed` and the others carry on; a step that fails outside any one request (a scheduler bug) fails the
requests in flight and resets the engine, which then serves new requests. Only a failed reset stops the loop
for good (`error` is set, and /health answers 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from dataclasses import dataclass

from speculab.engine.engine import Engine
from speculab.engine.recovery import describe
from speculab.engine.scheduler import QueueFull
from speculab.engine.sequence import FinishReason, SamplingParams, SequenceOutput

log = logging.getLogger(__name__)


class EngineDeadError(RuntimeError):
    """The engine loop stopped (shutdown, or a failure it could not recover from); the request cannot complete."""


class RequestFailed(RuntimeError):
    """The engine failed while running this request (a bug, reported as HTTP 500); other requests are unaffected."""


@dataclass(frozen=True, slots=True)
class _Add:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams


@dataclass(frozen=True, slots=True)
class _Abort:
    request_id: str


_STOP = object()


class AsyncEngine:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._commands: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # request id -> (event loop, queue of SequenceOutput | Exception); owned jointly, guarded by _lock
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue[SequenceOutput | Exception]]] = {}
        self._thread: threading.Thread | None = None
        self._capacity = engine.cfg.max_num_seqs + engine.cfg.max_waiting
        self.error: BaseException | None = None
        self._stopping = False

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="speculab-engine", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.begin_shutdown()
            self._thread.join(timeout=30)
            self._thread = None

    @property
    def shutting_down(self) -> bool:
        return self._stopping

    def begin_shutdown(self) -> None:
        """Refuse new requests and end every in-flight one with an error, without waiting (signal-handler safe)."""
        if not self._stopping:
            self._stopping = True
            self._commands.put(_STOP)

    # --- the caller's side (event loop thread) -----------------------------------------------------
    @property
    def num_in_flight(self) -> int:
        with self._lock:
            return len(self._streams)

    def submit(
        self, request_id: str, prompt_ids: list[int], params: SamplingParams
    ) -> asyncio.Queue[SequenceOutput | Exception]:
        """Admit a request or raise: ValueError (bad request), QueueFull (retry later), EngineDeadError."""
        if self.error is not None:
            raise EngineDeadError(f"the engine stopped after an internal error: {self.error}")
        if self._stopping:
            raise EngineDeadError("the server is shutting down")
        self.engine.validate(prompt_ids, params)
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[SequenceOutput | Exception] = asyncio.Queue()
        with self._lock:
            if request_id in self._streams:
                raise ValueError(f"request id {request_id!r} is already in flight")
            # running + waiting may not exceed slots + queue bound (the scheduler's own rule, decided here)
            if len(self._streams) >= self._capacity:
                raise QueueFull(f"{len(self._streams)} requests in flight")
            self._streams[request_id] = (loop, q)
        self._commands.put(_Add(request_id, list(prompt_ids), params))
        return q

    def abort(self, request_id: str) -> None:
        """Cancel a request (thread-safe, idempotent); its slot is freed before the next step."""
        self._commands.put(_Abort(request_id))

    # --- the engine thread -------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            block = not self.engine.has_unfinished()
            try:
                cmd = self._commands.get(block=block)
            except queue.Empty:
                cmd = None
            while cmd is not None:
                if cmd is _STOP:
                    self._fail_all(EngineDeadError("the server is shutting down"))
                    return
                self._apply(cmd)
                try:
                    cmd = self._commands.get_nowait()
                except queue.Empty:
                    cmd = None
            if not self.engine.has_unfinished():
                continue
            try:
                outputs = self.engine.step()
            except Exception as e:  # no request to blame (those are failed inside step): start over
                if not self._recover(e):
                    return
                continue
            for out in outputs:
                self._deliver(out)

    def _recover(self, err: Exception) -> bool:
        """Fail the engine's requests and empty it; False (and `error` set) if even that failed."""
        log.exception("engine step failed outside any one request; failing the requests in flight and resetting")
        failure = RequestFailed(f"engine step failed: {describe(err)}")
        try:
            dropped = self.engine.reset()
        except Exception as e:
            log.exception("resetting the engine failed; it stops serving")
            self.error = e
            self._fail_all(EngineDeadError(f"the engine stopped after an internal error: {describe(e)}"), abort=False)
            return False
        for rid in dropped:  # requests still queued as commands were not in the engine: they run as usual
            self._deliver_error(rid, failure)
        return True

    def _apply(self, cmd: object) -> None:
        if isinstance(cmd, _Add):
            try:
                self.engine.add_request(cmd.request_id, cmd.prompt_ids, cmd.params)
            except Exception as e:
                self._deliver_error(cmd.request_id, e)
        elif isinstance(cmd, _Abort):
            try:
                out = self.engine.abort(cmd.request_id)
            except Exception as e:
                log.exception("aborting request %s failed", cmd.request_id)
                self._deliver_error(cmd.request_id, RequestFailed(describe(e)))
                return
            if out is not None:
                self._deliver(out)

    def _deliver(self, out: SequenceOutput) -> None:
        if out.finish_reason is FinishReason.ERROR:
            self._deliver_error(out.request_id, RequestFailed(out.error or "the engine failed on this request"))
            return
        with self._lock:
            target = self._streams.get(out.request_id)
            if out.finished:
                self._streams.pop(out.request_id, None)
        if target is not None:
            loop, q = target
            with contextlib.suppress(RuntimeError):  # the loop closed (shutdown): nobody is listening
                loop.call_soon_threadsafe(q.put_nowait, out)

    def _deliver_error(self, request_id: str, err: Exception) -> None:
        with self._lock:
            target = self._streams.pop(request_id, None)
        if target is not None:
            loop, q = target
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(q.put_nowait, err)

    def _fail_all(self, err: Exception, *, abort: bool = True) -> None:
        with self._lock:
            ids = list(self._streams)
        for rid in ids:
            if abort:
                with contextlib.suppress(Exception):  # shutting down: the error reaches the client regardless
                    self.engine.abort(rid)
            self._deliver_error(rid, err)
