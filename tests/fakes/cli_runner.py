"""Run the `speculab` CLI in-process and read what a user would see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.cli import main


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """`speculab ARGV...` -> (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    return e.value.code, out, err


def one_line_error(err: str) -> str:
    """The single `error: ...` line a user mistake must produce (no traceback); returns it."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("error:"), err
    return lines[0]


def summary_tpot(out: Path) -> dict:
    """The first load's first comparison's TPOT, as `speculab compare`/`run` wrote it to OUT/summary.json."""
    s = json.loads((out / "summary.json").read_text())
    return next(m for m in s["levels"][0]["comparisons"][0]["metrics"] if m["metric"] == "tpot_s")
