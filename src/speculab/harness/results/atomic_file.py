"""The one way speculab writes a file a reader trusts whole (summary.json, manifests, inputs.json, report.html,
recommended.*): to a temporary file in the same directory, synced, then renamed over the target.

A rename within one directory is atomic, so a reader (or a full disk, or a kill) sees the old file or the new one,
never half of one; the sync first makes the rename point at data that is on the disk. A write that fails removes
its temporary file (on a full disk it is what filled it) and raises OSError naming the target, which the CLI turns
into one line.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TMP_SUFFIX = ".tmp"


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` atomically; an OSError carries `path` as its filename."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # a name of our own (not path + ".tmp"): two writers of one target never write into each other's file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666: the umask decides, as for open()
        try:
            view = memoryview(raw)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(e.errno, e.strerror, str(path)) from None
    _sync_dir(path.parent)


def _sync_dir(directory: Path) -> None:
    """Make the rename itself durable; some file systems cannot sync a directory, and nothing is lost without it
    that a kill could lose (the kernel has the new name)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
