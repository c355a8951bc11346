"""The blocks of an A/B directory as a resumed run finds them: which repeats finished, which were interrupted, and
the one way an interrupted one is set aside (renamed, never deleted) so it can be run again from the start.

A block is one arm at one level, one repeat (`DIR/runs/<arm>/<level>/r<n>/`). It finished when its run.json says so
(written atomically after its last record); records without a run.json, or a run.json marked interrupted, are a
block that stopped part way (killed, Ctrl-C, a server that died). The directory is held by one run at a time
(`held_by_one_run`), so a resume can never rename the blocks of a run that is still writing them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.results.ab_dir import REQUESTS_FILE, RUN_FILE, repeat_dir

LOCK_FILE = ".lock"  # flock'ed by the run writing DIR; the kernel drops it when that process dies (kill -9 too)
ASIDE = ".interrupted-"  # r<n>.interrupted-<k>: not r<digits>, so `load_inputs` (and the report) skips it


class BlockState(Enum):
    MISSING = "missing"  # never started
    INTERRUPTED = "interrupted"  # started, stopped part way: to be run again from the start
    COMPLETE = "complete"  # run.json written at its end, not marked interrupted


def block_state(root: Path, arm: str, level: str, repeat: int) -> BlockState:
    """What DIR holds of one block (a pure reading of the directory; nothing is changed)."""
    d = repeat_dir(root, arm, level, repeat)
    meta, records = d / RUN_FILE, d / REQUESTS_FILE
    if not meta.is_file():
        return BlockState.INTERRUPTED if records.is_file() else BlockState.MISSING
    try:
        interrupted = json.loads(meta.read_text(encoding="utf-8")).get("interrupted", True)
    except (OSError, ValueError, AttributeError):
        return BlockState.INTERRUPTED  # run.json is written atomically; unreadable means not ours to trust
    return BlockState.INTERRUPTED if interrupted else BlockState.COMPLETE


def set_aside(root: Path, arm: str, level: str, repeat: int) -> Path | None:
    """Rename a started block's directory to r<n>.interrupted-<k> (the first k free), so the block can run again
    from the start while everything it recorded stays on disk; None when there was nothing to keep."""
    d = repeat_dir(root, arm, level, repeat)
    if not d.is_dir():
        return None
    if not any(d.iterdir()):
        d.rmdir()  # an empty directory holds nothing a user ran
        return None
    k = 1
    while (aside := d.with_name(f"{d.name}{ASIDE}{k}")).exists():
        k += 1
    d.rename(aside)
    return aside


@contextlib.contextmanager
def held_by_one_run(root: Path) -> Iterator[None]:
    """Hold DIR for this run (an advisory lock on DIR/.lock): a second run or resume of the same directory while
    this one is alive is refused in one line. A killed run holds nothing: the kernel releases its lock."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"{root} is being written by another speculab run that is still alive; wait for it to end (or stop "
                "it), then resume with `speculab run --resume DIR`"
            ) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
