"""`--truth-log PATH`: what the mock actually did with each streamed request, for judging a client's timestamps.

A client's TTFT is the server's own (first chunk written - request received) plus what the client adds: the time
from its "sent" stamp to the request's arrival at the server, and from the server's write of the first chunk to the
client's "received" stamp. The script says when the mock *meant* to write; this log says when it did, so a benchmark
(bench/burst_ttft.py) can split a client's TTFT error into those two delays.

The file is JSON lines. The first line is a header (`schema`, `clock`); then one line per streamed request, written
when the request ends (so memory holds only the requests in flight), with:
- `received_ns`: when the bytes that completed the request's head and body reached the server: the kernel's receive
  stamp of them under `speculab mock-server` (serving.receive_stamps), before the server polled, parsed or queued
  them; elsewhere (a mock in a test's loop, a system without the stamps) the entry to the connection's
  `data_received` (mock.connection); `received_by` says which ("kernel", "data_received", or "handler" where the
  connection is not the mock's own);
- `handler_ns`: when its handler began (`received_ns` + the server's own queueing of a burst);
- `chunks_ns`: when each text chunk's write began, `chunks_done_ns` when it returned: the bytes went to the kernel
  between the two (on a busy machine the server can lose the CPU on either side of the send, and a client may read
  the bytes before the write returns);
- `prompt`, `request_id` (an `X-Request-Id` header, if the client sent one) and `id` (the mock's response id), to
  join a line with the client's record of the same request.
Times are integers of nanoseconds on CLOCK_REALTIME (`time.time_ns`), which any process on the same machine reads
too. Lines are flushed whenever no logged request is in flight, so a benchmark can read a burst's lines between
bursts without stopping the server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

TRUTH_LOG_SCHEMA = "speculab.mock.truth_log/1"
TRUTH_LOG_CLOCK = "CLOCK_REALTIME"


@dataclass(slots=True)
class TruthEntry:
    """One streamed request's line, filled as the request goes (its chunk times grow); written when it ends."""

    id: str
    prompt: str
    request_id: str | None
    received_ns: int
    handler_ns: int
    chunks_ns: list[int] = field(default_factory=list)
    chunks_done_ns: list[int] = field(default_factory=list)
    received_by: str = "handler"  # whose time `received_ns` is: "kernel", "data_received" or "handler"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "request_id": self.request_id,
            "prompt": self.prompt,
            "received_ns": self.received_ns,
            "received_by": self.received_by,
            "handler_ns": self.handler_ns,
            "chunks_ns": self.chunks_ns,
            "chunks_done_ns": self.chunks_done_ns,
        }


class TruthLog:
    """The open log of one mock server. `clock_ns` is injected (tests); the server's is `time.time_ns`."""

    def __init__(self, out: IO[str], clock_ns: Callable[[], int] = time.time_ns):
        self.out, self.clock_ns = out, clock_ns
        self.in_flight = 0
        out.write(json.dumps({"schema": TRUTH_LOG_SCHEMA, "clock": TRUTH_LOG_CLOCK, "unit": "ns"}) + "\n")
        out.flush()

    @classmethod
    def open(cls, path: str | Path) -> TruthLog:
        return cls(open(path, "w", encoding="utf-8"))  # closed by close(), at the server's cleanup

    def begin(self, entry: TruthEntry) -> TruthEntry:
        self.in_flight += 1
        return entry

    def end(self, entry: TruthEntry) -> None:
        """The request ended (however): its line goes out; the file is flushed when nothing logged is in flight,
        never mid-burst, where a write system call would delay other requests' chunks."""
        self.in_flight -= 1
        self.out.write(json.dumps(entry.to_dict()) + "\n")
        if self.in_flight == 0:
            self.out.flush()

    def close(self) -> None:
        if not self.out.closed:
            self.out.close()


def read_truth_log(path: str | Path) -> list[dict[str, Any]]:
    """The request lines of a truth log (the header checked and left out); a line cut off by a server killed
    mid-write is left out too."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines:
        return []
    header = json.loads(lines[0])
    if header.get("schema") != TRUTH_LOG_SCHEMA:
        raise ValueError(f"{path} is not a mock truth log (schema {header.get('schema')!r})")
    out = []
    for line in lines[1:]:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
