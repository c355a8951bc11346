"""`speculab mock-server` in a child process (its own CPU and event loop, as a real server would have), for the
client benchmarks: started with the given flags on a free port, its URL read from the line it prints when ready."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_mock(flags: list[str], src: Path = ROOT / "src") -> tuple[subprocess.Popen[str], str]:
    """(the process, its base URL); `src` is the speculab tree it runs. Stop it with terminate()."""
    argv = [sys.executable, "-m", "speculab", "mock-server", "--port", "0", *flags]
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline() if proc.stdout else ""
    m = re.search(r"(http://\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"the mock server did not start: {line!r}")
    return proc, m.group(1)
