"""The suite's rule for sharing the machine (tests/sharing.py): which files are held, the held lane's scheduling, the
idle background cgroup, and the lock that stands in for it where no cgroup can be made."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests import sharing


class Item:
    """What the rule reads of a pytest item: its file and its markers."""

    def __init__(self, path: str, *markers: str):
        self.path, self.markers = Path(path), set(markers)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_a_file_holding_a_timed_test_is_held_whole() -> None:
    items = [Item("a.py"), Item("s.py"), Item("s.py", "serial"), Item("p.py", "paced"), Item("p.py")]
    held = sharing.held_files(items)
    assert held == {Path("s.py"), Path("p.py")}
    assert [sharing.kind(it, held) for it in items] == ["ordinary", "paced", "serial", "paced", "paced"]


class Node:
    """A pytest-xdist worker as the scheduler drives it: what it was sent, and whether it was told to stop."""

    def __init__(self, name: str) -> None:
        self.name, self.sent, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


class Config:
    class option:
        loadscopereorder = False

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> list[str]:
        assert name == "tx"
        return [f"{self.workers}*popen"]


def _drive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, int], held: list[str], workers: int):
    """Run a collection through the scheduler, ending tests in a random order across the workers; return the
    workers, the collection, and the most workers that held a held file's test at once."""
    monkeypatch.setenv(sharing.ENV_DIR, str(tmp_path))
    (tmp_path / "held.json").write_text(json.dumps(held))
    collection = [f"{f}::t{i}" for f, n in files.items() for i in range(n)]
    sched = sharing.make_scheduler(Config(workers), None)
    nodes = [Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    sched.schedule()
    rng, done, most = random.Random(7), {n: 0 for n in nodes}, 0
    while not sched.tests_finished:
        busy = [n for n in nodes if done[n] < len(n.sent)]
        assert busy, "no worker has a test to run, and the run has not finished: it would hang"
        lane = {n for n in nodes if any(collection[i].split("::")[0] in held for i in n.sent[done[n] :])}
        most = max(most, len(lane))
        node = rng.choice(busy)
        sched.mark_test_complete(node, node.sent[done[node]])
        done[node] += 1
    return nodes, collection, most


def test_the_held_files_go_to_one_worker_at_a_time_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"h1.py": 3, "h2.py": 2, "h3.py": 1, **{f"o{i}.py": 4 for i in range(8)}}
    held = ["h1.py", "h2.py", "h3.py"]
    nodes, collection, most = _drive(tmp_path, monkeypatch, files, held, workers=3)
    assert most == 1
    ran = sorted(i for n in nodes for i in n.sent)
    assert ran == list(range(len(collection)))  # every test once
    first = nodes[0].sent[:3]
    assert [collection[i].split("::")[0] for i in first] == ["h1.py"] * 3  # the lane starts at once
    assert all(n.shutting_down for n in nodes)


def test_a_worker_that_may_take_nothing_waits_and_is_stopped_when_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, collection, most = _drive(tmp_path, monkeypatch, {"h1.py": 5, "h2.py": 5}, ["h1.py", "h2.py"], workers=2)
    assert most == 1 and sorted(nodes[0].sent + nodes[1].sent) == list(range(len(collection)))
    assert all(n.shutting_down for n in nodes)


def _background_or_skip() -> sharing.Background:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root (CI runs as root)")
    background = sharing.Background.make(f"speculab-test-{os.getpid()}-{threading.get_ident()}")
    if background is None:
        pytest.skip("no cgroup-v1 cpu controller with cpu.idle here: the suite falls back on its lock")
    return background


# on the held lane: a process in an idle group inside the suite's busy background would wait minutes for a core
@pytest.mark.serial
def test_the_background_is_an_idle_cgroup_that_counts_its_cpu_and_stops_what_is_left_in_it() -> None:
    background = _background_or_skip()
    work = "import sys\nsys.stdin.readline()\nsum(range(3_000_000))\nsys.stdin.readline()"
    child = subprocess.Popen([sys.executable, "-c", work], stdin=subprocess.PIPE, text=True)
    try:
        assert (background.groups[0] / "cpu.idle").read_text().strip() == "1"
        before = background.cpu_s()
        background.enter(child.pid, True)
        assert background.holds(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        deadline = time.monotonic() + 60
        while background.cpu_s() - before < 0.02 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert background.cpu_s() - before >= 0.02  # the child's sum, counted in the group
        background.enter(child.pid, False)
        assert not background.holds(child.pid)
        background.enter(child.pid, True)
    finally:
        background.remove()  # the child was left in it, waiting for its second line
    assert child.wait(10) == -9
    assert not any(g.exists() for g in background.groups)


def test_a_held_test_falls_back_on_a_lock_that_keeps_the_others_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sharing.ENV_DIR, str(tmp_path))
    monkeypatch.delenv(sharing.ENV_BACKGROUND, raising=False)
    inside, release = [], threading.Event()

    def run(kind: str, name: str) -> None:
        with sharing.hold(kind):
            inside.append(name)
            release.wait(10)
            inside.remove(name)

    ordinary = [threading.Thread(target=run, args=("ordinary", f"o{i}")) for i in range(2)]
    for t in ordinary:
        t.start()
    deadline = time.monotonic() + 5
    while len(inside) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(inside) == ["o0", "o1"]  # ordinary tests share it
    held = threading.Thread(target=run, args=("serial", "s"))
    held.start()
    time.sleep(0.3)
    assert "s" not in inside  # the held test waits for them
    release.set()
    for t in [*ordinary, held]:
        t.join(10)
    assert not inside


def test_outside_a_run_there_is_no_background_to_leave_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sharing.ENV_BACKGROUND, raising=False)
    assert sharing.background_cpu_s() == 0.0


@pytest.mark.serial  # beside the test above, in the file's held lane
def test_a_background_whose_run_was_killed_is_removed_by_the_next_run() -> None:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root (CI runs as root)")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a controller pid that no longer runs
    background = sharing.Background.make(f"{sharing.PREFIX}{gone.pid}")
    if background is None:
        pytest.skip("no cgroup-v1 cpu controller with cpu.idle here: the suite falls back on its lock")
    mine = sharing.Background.make(f"{sharing.PREFIX}{os.getpid()}-not-a-pid")  # a name that is no pid: kept
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        background.enter(left.pid, True)
        sharing._remove_abandoned()
        assert left.wait(10) == -9
        assert not any(g.exists() for g in background.groups)
        assert mine is not None and all(g.exists() for g in mine.groups)
    finally:
        left.kill()
        background.remove()
        if mine is not None:
            mine.remove()
