"""One incremental Server-Sent Events decoder: bytes in, events out.

Follows the WHATWG event-stream rules that matter for OpenAI-style streams: lines end in "\\n", "\\r\\n" or
"\\r" (a "\\r" at the end of one network chunk and a "\\n" at the start of the next are one line ending);
lines starting with ":" are comments; "data" lines of one event are joined with "\\n"; one leading space after
the colon is dropped; a blank line dispatches the event. Network chunks may split the stream anywhere,
including inside a UTF-8 character: lines are cut on bytes ("\\r" and "\\n" never occur inside a multi-byte
UTF-8 sequence) and decoded only when complete.

`[DONE]` is not special here: it is an event whose data is "[DONE]"; `SSEEvent.is_done` names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

DONE = "[DONE]"

# The longest line, and the most data one event may gather, that a decoder buffers. An OpenAI chunk is a few
# hundred bytes (a few KB with top logprobs); a server that sends one endless line (or data lines without the
# blank line that ends an event) would otherwise grow the client until the request timed out (~300 MB seen).
MAX_LINE_BYTES = 4 * 1024 * 1024


class LineTooLong(ValueError):
    """A line (or one event's data) grew past the decoder's cap: the stream is malformed."""

    def __init__(self, cap: int, what: str = "line"):
        super().__init__(f"{what} over {cap / 2**20:g} MB")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str | None = None  # the "event:" field; OpenAI streams never set it, some servers use "error"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data.strip() == DONE


class SSEDecoder:
    """Feed bytes as they arrive; get back the events they complete. One decoder per response."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._data_bytes = 0  # bytes gathered in self._data, against the same cap
        self._buf = bytearray()
        self._skip_lf = False  # the previous chunk ended in "\r": a leading "\n" belongs to that line ending
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._has_fields = False  # a field line was seen since the last dispatch

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume one network chunk; return the events completed by it, in order. Raises `LineTooLong` when a
        line, or one event's data, passes `max_line_bytes`."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        self._buf += chunk
        # a piece that ends no line completes nothing: skip the drain, which copies the buffer (an endless line would
        # be copied once per read)
        events = list(self._drain()) if b"\n" in chunk or b"\r" in chunk else []
        if len(self._buf) > self.max_line_bytes:  # what is left is one unfinished line
            raise LineTooLong(self.max_line_bytes)
        return events

    def _drain(self) -> Iterator[SSEEvent]:
        buf = self._buf
        if b"\r" not in buf:
            # fast path (nearly every server): "\n" line endings only
            *lines, rest = bytes(buf).split(b"\n")
            self._buf = bytearray(rest)
            for raw in lines:
                event = self._line(raw.decode("utf-8", errors="replace"))
                if event is not None:
                    yield event
            return
        start = 0
        n = len(buf)
        while start < n:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if lf < 0 or (0 <= cr < lf):
                end = cr
                if cr + 1 < n:
                    nxt = cr + 2 if buf[cr + 1 : cr + 2] == b"\n" else cr + 1
                else:  # "\r" is the last byte we have: the "\n" may come in the next chunk
                    nxt = cr + 1
                    self._skip_lf = True
            else:
                end, nxt = lf, lf + 1
            line = bytes(buf[start:end]).decode("utf-8", errors="replace")
            start = nxt
            event = self._line(line)
            if event is not None:
                yield event
        del buf[:start]

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment (keep-alive pings)
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        self._has_fields = True
        if name == "data":
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_line_bytes:
                raise LineTooLong(self.max_line_bytes, "one event's data")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        # "retry" and unknown fields are ignored, as the spec says
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            # an event with no data lines is not dispatched (spec); reset the other fields
            self._event = None
            self._has_fields = False
            self._data_bytes = 0
            return None
        ev = SSEEvent(data="\n".join(self._data), event=self._event, id=self._id)
        self._data = []
        self._data_bytes = 0
        self._event = None
        self._has_fields = False
        return ev

    @property
    def pending(self) -> bool:
        """True if bytes or fields of an unfinished event are buffered: the stream was cut mid-event."""
        return bool(self._buf.strip()) or self._has_fields

    def close(self) -> list[SSEEvent]:
        """End of stream. Per the spec an unterminated event is discarded, so nothing is returned; callers
        check `pending` first to tell a clean end from a cut one."""
        self._buf.clear()
        self._data = []
        self._data_bytes = 0
        self._has_fields = False
        return []


def decode_all(payload: bytes) -> list[SSEEvent]:
    """Decode a complete stream held in memory (tests, non-streaming fallbacks)."""
    dec = SSEDecoder()
    return dec.feed(payload)
