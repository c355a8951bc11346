"""What a reader looks for to claim a file: the keys its tool writes near the file's start, read from the head alone
(a per-request file of hundreds of megabytes is asked too, and must not be parsed to be refused)."""

from __future__ import annotations

from pathlib import Path

# how much of a file's start its marks must lie in: every tool here writes them in its first object or line
HEAD_BYTES = 4096


def head(path: Path) -> str:
    """The start of the file `path`, stripped ("" where it is no file or cannot be read)."""
    try:
        if not path.is_file():
            return ""
        with path.open("rb") as f:
            return f.read(HEAD_BYTES).decode("utf-8", "replace").lstrip()
    except OSError:
        return ""


def has_keys(text: str, keys: tuple[str, ...]) -> bool:
    """Whether every one of `keys` is in `text` as a JSON key (`"key":`, spaces aside)."""
    flat = text.replace(" ", "")
    return all(f'"{k}":' in flat for k in keys)
