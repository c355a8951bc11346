"""requests.jsonl: one `RequestRecord` per line, appended and flushed as each request finishes.

The one writer and the one reader of every run's records (`speculab bench`, `diagnose`, and each repeat of an A/B
run), so a crash or a full disk loses nothing that finished, and a torn last line (the process died mid-write) is
skipped on reading.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from speculab.errors import UserError
from speculab.harness.records import RequestRecord
from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.results.strict_json import dumps


def write_error(path: Path, e: OSError) -> UserError:
    """One line for a write that failed mid-run (disk full, a removed mount): what was kept and what to do."""
    return UserError(
        f"cannot write {path} ({e.strerror or e}); the run stopped. Records written before "
        "are in requests.jsonl; free space or choose another --output (an A/B then finishes with `speculab run "
        "--resume DIR`, the directory copied elsewhere too)"
    )


class RequestsFile:
    """An open requests.jsonl: `append` writes one record and flushes it; errors become one-line `UserError`s.

    The file always ends on a whole record: a write cut short (a full disk) is cut back to the record before, and
    the file takes no more records after (the run is stopping; a later, smaller record could still fit and leave a
    gap no reader could see)."""

    def __init__(self, path: Path):
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # unbuffered bytes: what the kernel took is exactly what `_end` counts, nothing waits in a buffer that
            # a later flush (at close, on a full disk) could half-write
            self._f: IO[bytes] | None = path.open("a+b", buffering=0)  # a+: read, to find the last whole record
            self._end = _whole_end(self._f)
        except OSError as e:  # os.access cannot predict everything (root, read-only or virtual file systems)
            raise UserError(
                f"--output {path.parent}: cannot create it ({e.strerror}); choose another directory"
            ) from None
        self._failed: UserError | None = None

    def append(self, rec: RequestRecord) -> None:
        assert self._f is not None, "closed"
        if self._failed is not None:
            raise self._failed
        line = (dumps(rec.to_dict()) + "\n").encode("utf-8")
        try:
            view = memoryview(line)
            while view:  # a raw write may take less than asked
                view = view[os.write(self._f.fileno(), view) :]
        except OSError as e:
            self._cut_back()
            self._failed = write_error(self.path, e)
            raise self._failed from None
        self._end += len(line)

    def _cut_back(self) -> None:
        """Drop the part of a record a failed write left (a reader would skip it, but `--resume` appends after it)."""
        assert self._f is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._f.fileno(), self._end)

    def close(self) -> None:
        """Each record reached the kernel when it was appended (a killed process loses none of them); at the end of
        a block they are also synced to the disk, so a host that goes down keeps the blocks that finished."""
        if self._f is not None:
            with contextlib.suppress(OSError):  # a sync that fails loses nothing a kill could: the kernel has it
                os.fsync(self._f.fileno())
            self._f.close()
            self._f = None


def _whole_end(f: IO[bytes]) -> int:
    """Where the last whole record of an existing file ends; a torn last line (a kill mid-write, or a release that
    did not cut back) is cut off, so that a resumed run's first record starts on a line of its own."""
    end = pos = f.seek(0, os.SEEK_END)
    while pos > 0:
        step = min(pos, 1 << 16)
        f.seek(pos - step)
        nl = f.read(step).rfind(b"\n")
        if nl >= 0:
            pos = pos - step + nl + 1
            break
        pos -= step
    if pos != end:
        os.ftruncate(f.fileno(), pos)
    return pos


def write_records(path: Path, records: list[RequestRecord] | tuple[RequestRecord, ...]) -> None:
    """A whole file in one go, atomically (`compare` saving imported runs, tests); runs append as requests finish."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(dumps(r.to_dict()) + "\n" for r in records))


def iter_records(path: Path) -> Iterator[RequestRecord]:
    """requests.jsonl -> records, one line at a time (a long run's file is never held whole); a torn last line (the
    process died mid-write) is skipped. Lines end at "\\n" only: model output may hold U+2028 or U+0085, which JSON
    leaves unescaped and `str.splitlines` would take for line ends."""
    bad: UserError | None = None  # a line that did not parse: fatal unless it turns out to be the last one
    with path.open("rb") as f:  # bytes, decoded per line: a damaged byte is that line's error, not a traceback
        for i, line in enumerate(f, start=1):
            if bad is not None:
                raise bad
            if not line.strip():
                continue
            try:
                rec = RequestRecord.from_dict(json.loads(line.decode("utf-8")))
            except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError and JSONDecodeError among them
                bad = UserError(f"{path}:{i}: not a request record ({str(e)[:200]})")
                continue
            except RecursionError:
                bad = UserError(f"{path}:{i}: not a request record (nested too deeply)")
                continue
            yield rec


def read_records(path: Path) -> list[RequestRecord]:
    """requests.jsonl -> records, all in memory (see `iter_records`)."""
    return list(iter_records(path))
