"""bench/suite_durations.py tells a waiting test from a computing one: wall and CPU per test, per file, in all."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
import time


def test_waits():
    time.sleep(0.4)


def test_computes():
    t = time.process_time()
    while time.process_time() - t < 0.4:
        pass
"""


def test_suite_durations_records_wall_and_cpu_per_test(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(TESTS, encoding="utf-8")
    out = tmp_path / "durations.json"
    cmd = [sys.executable, "bench/suite_durations.py", "--out", str(out), "--", "-n", "0", "-p", "no:cacheprovider"]
    proc = subprocess.run([*cmd, str(tmp_path / "test_two.py")], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    d = json.loads(out.read_text())
    rows = {r["test"].split("::")[-1]: r for r in d["rows"]}
    assert set(rows) == {"test_waits", "test_computes"} and d["tests"] == 2 and d["pytest_exit"] == 0
    assert rows["test_waits"]["wall_s"] >= 0.4 and rows["test_waits"]["cpu_s"] < 0.2  # a sleep costs no CPU
    assert rows["test_computes"]["cpu_s"] >= 0.35
    assert d["sum_test_cpu_s"] >= 0.35 and d["run_wall_s"] >= d["sum_test_wall_s"] >= 0.8
    assert d["machine"]["cores"] and d["load_average_before"] and len(d["files"]) == 1
    assert "2 tests in" in proc.stdout and "slowest tests (wall s, CPU s):" in proc.stdout
    # the machine's speed just before and after, as the demo model's decode step (torch: the [engine] extra)
    speed = d["machine_speed"]
    if importlib.util.find_spec("torch") is None:
        assert speed == {"before": None, "after": None} and "not measured before" in proc.stdout
    else:
        for moment in ("before", "after"):
            assert set(speed[moment]) == {"batch_1_step_ms", "batch_4_step_ms"}
            assert all(0 < ms < 1000 for ms in speed[moment].values())
        assert " ms before, " in proc.stdout
