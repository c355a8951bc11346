"""A small file system that fills up: a 256 KB tmpfs mounted for the test (root, as here and on CI), or, where
mounting is refused, a byte budget on every `os.write` to a file under the directory, past which the write raises
ENOSPC as a full disk does (what fits is written first, then the error: a short write, then ENOSPC).

speculab writes its files with `os.write` (results.atomic_file, results.requests_file), so both ways reach the same
code; `injected_full_disk` forces the second way, so that it is exercised where mounting works too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SIZE = 256 * 1024


def _mount(directory: Path) -> bool:
    if os.name != "posix" or shutil.which("mount") is None or os.geteuid() != 0:
        return False
    cmd = ["mount", "-t", "tmpfs", "-o", f"size={SIZE // 1024}k", "tmpfs", str(directory)]
    return subprocess.run(cmd, capture_output=True, check=False).returncode == 0


@contextlib.contextmanager
def injected_full_disk(directory: Path, monkeypatch: pytest.MonkeyPatch, size: int = SIZE) -> Iterator[Path]:
    """`directory` holds at most `size` bytes written through `os.write` (Linux: the descriptor's path is read
    from /proc/self/fd); created if missing."""
    directory.mkdir(parents=True, exist_ok=True)
    real_write, used = os.write, [0]
    root = str(directory.resolve())

    def write(fd: int, data: bytes | memoryview) -> int:
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = ""
        if not where.startswith(root + os.sep):
            return real_write(fd, data)
        room = size - used[0]
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[:room]))
        used[0] += n
        return n

    monkeypatch.setattr(os, "write", write)
    yield directory


@contextlib.contextmanager
def small_disk(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`directory` (created) on a 256 KB file system: a mounted tmpfs, or the injected budget where mounting is
    refused. Unmounted at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    if _mount(directory):
        try:
            yield directory
        finally:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)
        return
    with injected_full_disk(directory, monkeypatch) as d:
        yield d
