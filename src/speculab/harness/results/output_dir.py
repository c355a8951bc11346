"""The output directory every command writes to, checked before any request is sent."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from speculab.errors import UserError


def check_output_dir(path: Path, result_names: Iterable[str], *, flag: str = "--output") -> None:
    """Refuse, with one line naming the fix, a directory that is a file, already holds a result (any of
    `result_names` inside it), or cannot be created or written."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; give a directory")
    if path.is_dir() and any((path / n).exists() for n in result_names):
        raise UserError(f"{flag} {path} already holds a run; choose a new directory or remove it")
    parent = path if path.is_dir() else path.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise UserError(f"{flag} {path}: {parent} is not writable; choose another directory")
