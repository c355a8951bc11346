"""Where the test suite's time goes: each test's wall and CPU seconds, per test and per file, and the whole run's.

    python bench/suite_durations.py                       # the README's command (pyproject's -n 4), measured
    python bench/suite_durations.py --out d.json -- -n 0  # one process, for a before/after; pytest args after --

Runs pytest in a subprocess with this file loaded as a plugin (`-p suite_durations`): around each test's whole
protocol (setup, call, teardown) it records the wall time and the CPU time of the worker process and of the children
it reaped (the servers a test launches and waits for), one JSON line per test. CPU time says what parallel workers
can gain: a test whose CPU is a fraction of its wall waits (sleeps, sockets, a server starting) and overlaps well with
another; the sum of CPU over the cores is a floor no worker count beats. The summary names the machine (CPU model,
cores), the date, the load average before and after, and how fast the machine was just before and just after
(`machine_speed`: the demo model's decode step, bench/weight_layout.py; `--no-speed` skips it) and the whole machine's
CPU seconds during the run, stolen ones apart (`machine_cpu_s`, from /proc/stat), because a 2-core VM's figures mean
nothing without them: the same VM has run the suite in 598 s and in 976 s hours apart, its decode
step 4.1 ms and 6.7 ms at batch 1 (bench/README.md).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_OUT = "SUITE_DURATIONS_OUT"


# ---------------------------------------------------------------------------------------------------------------
# The plugin half: loaded by pytest (and by each pytest-xdist worker) through -p suite_durations.
# ---------------------------------------------------------------------------------------------------------------


def _cpu_s() -> float:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def _hookwrapper(fn):
    import pytest

    # tryfirst: the outermost wrapper, so that a test's wall includes the time it waited for the machine
    # (tests/conftest.py's lock, which it reports as the user property `machine_wait_s`); the summary takes it out
    return pytest.hookimpl(hookwrapper=True, tryfirst=True)(fn)


if ENV_OUT in os.environ:  # imported as the plugin

    @_hookwrapper
    def pytest_runtest_protocol(item, nextitem):
        started, wall0, cpu0 = time.time(), time.perf_counter(), _cpu_s()
        yield
        props = dict(item.user_properties)
        row = {
            "test": item.nodeid,
            "wall_s": time.perf_counter() - wall0 - props.get("machine_wait_s", 0.0),
            "cpu_s": _cpu_s() - cpu0,
            "started": started,  # epoch seconds: with the worker, the run's timeline
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "kind": props.get("machine_kind", "ordinary"),
            "wait_s": props.get("machine_wait_s", 0.0),
        }
        with open(os.environ[ENV_OUT], "a", encoding="utf-8") as f:  # one short append per test: workers interleave
            f.write(json.dumps(row) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# The command half.
# ---------------------------------------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_speed(steps: int = 30) -> dict[str, float] | None:
    """How fast this machine is now: the demo model's decode step on one thread, column-major as the engine lays its
    weights out, in ms at batch 1 and 4 (bench/weight_layout.py, one round, in a process of its own: ~5 s). The figure
    bench/README.md compares the VM's moments by: 4.1 / 6.9 ms at the 2-core AMD EPYC VM's quick end, 6.7 / 12.9 ms at
    its slow end (2026-12-07). None where it cannot run (no torch: the [engine] extra)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "speed.json"
        cmd = [sys.executable, str(ROOT / "bench" / "weight_layout.py"), "--batch", "1", "4", "--rounds", "1"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([*cmd, "--steps", str(steps), "--json", str(out)], cwd=ROOT, env=env, capture_output=True)
        if done.returncode != 0 or not out.is_file():
            return None
        results = json.loads(out.read_text(encoding="utf-8"))["results"]
    return {f"batch_{r['batch']}_step_ms": r["step_ms"]["column-major"] for r in results}


def proc_stat_cpu(text: str) -> list[int] | None:
    """The first line of /proc/stat: every CPU's time summed, in clock ticks, in the kernel's order (user, nice,
    system, idle, iowait, irq, softirq, steal, ...). None where the text holds no such line."""
    name, *fields = text.split("\n", 1)[0].split() or [""]
    return [int(x) for x in fields] if name == "cpu" and len(fields) >= 8 else None


def machine_cpu(before: list[int] | None, after: list[int] | None, ticks_per_s: float) -> dict[str, float] | None:
    """The whole machine's CPU seconds between two /proc/stat readings, all CPUs summed: `busy` (user, nice, system,
    irq, softirq: every process, reaped or not, the daemons Ray and the servers leave running included, which the
    tests' CPU column misses), `idle` (idle and iowait) and `stolen` (steal: the hypervisor ran another guest while
    this VM had work). A 2-core VM whose speed halves within an hour either loses its CPUs to other guests, which
    `stolen` shows, or runs them slower, which it does not. None where /proc/stat was not read."""
    if before is None or after is None:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (b - a for a, b in zip(before[:8], after[:8], strict=True))
    busy = user + nice + system + irq + softirq
    return {k: round(v / ticks_per_s, 1) for k, v in (("busy", busy), ("idle", idle + iowait), ("stolen", steal))}


def _read_proc_stat() -> list[int] | None:
    try:
        return proc_stat_cpu(Path("/proc/stat").read_text(encoding="ascii"))
    except OSError:
        return None


def _speed_text(speed: dict[str, float] | None) -> str:
    return " / ".join(f"{v:.2f}" for v in speed.values()) + " ms" if speed else "not measured"


def summarise(rows: list[dict], wall_s: float, top: int) -> dict:
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f[0] += r["wall_s"]
        f[1] += r["cpu_s"]
        f[2] += 1
    by_wall = sorted(rows, key=lambda r: -r["wall_s"])
    workers = {r.get("worker", "main") for r in rows}
    held = {kind: round(sum(r["wall_s"] for r in rows if r.get("kind") == kind), 1) for kind in ("serial", "paced")}
    return {
        "tests": len(rows),
        "run_wall_s": round(wall_s, 1),
        "sum_test_wall_s": round(sum(r["wall_s"] for r in rows), 1),
        "sum_test_cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
        # waiting for the machine (tests/conftest.py): a worker idle while a serial test, or the other kind, runs
        "sum_wait_s": round(sum(r.get("wait_s", 0.0) for r in rows), 1),
        "held_wall_s": held,  # the tests' own wall by how they hold the machine (serial: alone)
        # the workers' time in no test at all (collection, start-up, a worker done before the others)
        "workers": len(workers),
        "worker_idle_s": round(len(workers) * wall_s - sum(r["wall_s"] + r.get("wait_s", 0.0) for r in rows), 1),
        "slowest": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()} for r in by_wall[:top]],
        "files": [
            {"file": name, "wall_s": round(w, 1), "cpu_s": round(c, 1), "tests": n}
            for name, (w, c, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]
        ],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write the summary (and every test's row) as JSON here")
    p.add_argument("--top", type=int, default=25, help="how many tests and files to list (default 25)")
    p.add_argument("--no-speed", action="store_true", help="skip the machine-speed probe before and after (~5 s each)")
    p.add_argument("pytest_args", nargs="*", help="arguments for pytest, after --")
    args = p.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as tmp:
        rows_path = Path(tmp.name)
    env = {
        **os.environ,
        ENV_OUT: str(rows_path),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")]),
    }
    speed0 = None if args.no_speed else machine_speed()
    load0, stat0 = os.getloadavg(), _read_proc_stat()
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "suite_durations", *args.pytest_args], cwd=ROOT, env=env
    )
    wall = time.perf_counter() - t0
    load1, stat1 = os.getloadavg(), _read_proc_stat()
    speed1 = None if args.no_speed else machine_speed()
    rows = [json.loads(line) for line in rows_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows_path.unlink()
    summary = {
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
        "started_utc": started.isoformat(timespec="seconds"),
        "load_average_before": [round(x, 2) for x in load0],
        "load_average_after": [round(x, 2) for x in load1],
        # the demo model's decode step just before and just after the run (machine_speed); null: not measured
        "machine_speed": {"before": speed0, "after": speed1},
        # the machine's CPU seconds during the run, every process's, from /proc/stat (machine_cpu); null: not read
        "machine_cpu_s": machine_cpu(stat0, stat1, os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else None,
        "pytest_args": args.pytest_args,
        "pytest_exit": proc.returncode,
        **summarise(rows, wall, args.top),
    }
    print(
        f"\n{summary['machine']['cpu']}, {summary['machine']['cores']} cores, {summary['started_utc']}, "
        f"load {summary['load_average_before'][0]} -> {summary['load_average_after'][0]}; the demo model's decode "
        f"step at batch 1 / 4 (bench/weight_layout.py): {_speed_text(speed0)} before, {_speed_text(speed1)} after"
    )
    print(
        f"{summary['tests']} tests in {summary['run_wall_s']:.0f} s wall; the tests' own wall "
        f"{summary['sum_test_wall_s']:.0f} s, CPU {summary['sum_test_cpu_s']:.0f} s; waiting for the machine "
        f"{summary['sum_wait_s']:.0f} s; serial tests {summary['held_wall_s']['serial']:.0f} s, paced "
        f"{summary['held_wall_s']['paced']:.0f} s; {summary['workers']} workers idle {summary['worker_idle_s']:.0f} s"
    )
    m = summary["machine_cpu_s"]
    print(
        f"the machine's CPUs (/proc/stat, every process): busy {m['busy']:.0f} s, idle {m['idle']:.0f} s, stolen by "
        f"the hypervisor {m['stolen']:.0f} s"
        if m
        else "the machine's CPUs: not read (no /proc/stat)"
    )
    print("slowest tests (wall s, CPU s):")
    for r in summary["slowest"]:
        print(f"  {r['wall_s']:7.1f} {r['cpu_s']:7.1f}  {re.sub(r'^tests/', '', r['test'])}")
    print("slowest files (wall s, CPU s, tests):")
    for f in summary["files"]:
        print(f"  {f['wall_s']:7.1f} {f['cpu_s']:7.1f} {f['tests']:4d}  {f['file']}")
    if args.out:
        args.out.write_text(json.dumps({**summary, "rows": rows}, indent=1), encoding="utf-8")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
