"""bench/suite_durations.py tells a waiting test from a computing one: wall and CPU per test, per file, in all."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from fakes.bench_scripts import load_bench_script

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
    # the machine's own CPU seconds over the run (/proc/stat: this suite's machines are Linux)
    cpu = d["machine_cpu_s"]
    assert set(cpu) == {"busy", "idle", "stolen"} and cpu["busy"] >= 0.35 and min(cpu.values()) >= 0
    assert cpu["busy"] + cpu["idle"] + cpu["stolen"] <= (d["machine"]["cores"] + 0.5) * d["run_wall_s"] + 1
    assert "the machine's CPUs (/proc/stat, every process): busy " in proc.stdout


def test_machine_cpu_reads_busy_idle_and_stolen_seconds_from_proc_stat() -> None:
    s = load_bench_script("suite_durations")
    before = s.proc_stat_cpu("cpu  1000 50 200 5000 30 5 15 40 0 0\ncpu0 500 25 100 2500 15 2 7 20 0 0\nintr 1\n")
    after = s.proc_stat_cpu("cpu  1300 60 260 5100 50 9 21 140 0 0\ncpu0 650 30 130 2550 25 3 8 70 0 0\n")
    assert before == [1000, 50, 200, 5000, 30, 5, 15, 40, 0, 0]
    # ticks at 100 a second: busy 300 + 10 + 60 + 4 + 6 (user, nice, system, irq, softirq), idle 100 + 20 (idle,
    # iowait), stolen 100
    assert s.machine_cpu(before, after, 100) == {"busy": 3.8, "idle": 1.2, "stolen": 1.0}
    assert s.machine_cpu(None, after, 100) is None and s.machine_cpu(before, None, 100) is None
    # a kernel older than steal accounting (7 fields), or no aggregate line: not read, never a guess
    assert s.proc_stat_cpu("cpu  1 2 3 4 5 6 7\n") is None
    assert s.proc_stat_cpu("intr 1 2\n") is None and s.proc_stat_cpu("") is None
