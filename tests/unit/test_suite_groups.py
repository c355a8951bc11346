"""The suite's own rule for the held phase (tests/conftest.py): which group each file runs in, the groups as the
collection was ordered even after `-m` deselects, and a held test's wait for the groups before it to start."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest


def _suite_conftest():
    # by its path: under pytest-xdist the name `conftest` may be another directory's conftest.py
    spec = importlib.util.spec_from_file_location("suite_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


suite = _suite_conftest()


class Item:
    """What the rule reads of a pytest item: its file, its markers, its session."""

    def __init__(self, path: str, *markers: str, session: Session | None = None):
        self.path, self.markers, self.session = Path(path), set(markers), session

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


class Config:
    def __init__(self) -> None:
        self.stash = pytest.Stash()


class Session:
    def __init__(self, items: list[Item], config: Config) -> None:
        self.items, self.config, self.stash = items, config, pytest.Stash()
        for it in items:
            it.session = self


def test_each_file_runs_with_its_most_held_test_and_a_file_may_not_hold_both_kinds() -> None:
    items = [Item("a.py"), Item("s.py"), Item("s.py", "serial"), Item("p.py", "paced"), Item("p.py")]
    assert suite._file_groups(items) == {
        Path("a.py"): suite.ORDINARY_FILES,
        Path("s.py"): suite.SERIAL_FILES,
        Path("p.py"): suite.PACED_FILES,
    }
    with pytest.raises(pytest.UsageError, match=r"both\.py: a file holds serial and paced tests"):
        suite._file_groups([Item("both.py", "serial"), Item("both.py", "paced")])


def test_a_file_keeps_the_group_it_was_ordered_by_when_its_held_test_is_deselected() -> None:
    """`-m "not slow"` deselected a file's only paced test after the ordering: its other tests, queued last, counted as
    ordinary would have been waited for by every held test, for ever (the fast loop stalled)."""
    paced = Item("p.py", "paced")
    collected = [Item("a.py"), Item("a.py"), paced, Item("p.py"), Item("s.py", "serial")]
    config = Config()
    config.stash[suite.FILE_GROUPS] = suite._file_groups(collected)
    session = Session([it for it in collected if it is not paced], config)  # as pytest leaves them after -m
    groups, totals = suite._groups(session)
    assert groups[Path("p.py")] == suite.PACED_FILES and totals == [2, 1, 1]
    assert suite._kind(session.items[2]) == suite.PACED  # an ordinary test of a held file holds the machine as paced


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_held_test_waits_until_every_test_of_the_groups_before_it_has_started(run_dir: Path) -> None:
    items = [Item("a.py"), Item("a.py"), Item("s.py", "serial"), Item("p.py", "paced")]
    session = Session(items, Config())
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (suite._held_phase("r", items[3]), done.set()))
    suite._held_phase("r", items[0])  # ordinary: no wait, counted in
    waiter.start()
    assert not done.wait(0.5)  # one ordinary test and the serial one have not started
    suite._held_phase("r", items[1])
    assert not done.wait(0.5)  # the serial group has not started
    suite._held_phase("r", items[2])
    assert done.wait(5)
    waiter.join()
    assert [(run_dir / f"speculab-pytest-r.started{g}").stat().st_size for g in range(3)] == [2, 1, 1]
    assert session.stash[suite.GROUPS][1] == [2, 1, 1]


def test_an_empty_group_is_not_waited_for_and_a_lost_worker_is_waited_for_only_so_long(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [Item("a.py"), Item("p.py", "paced")]  # no serial file
    Session(items, Config())
    suite._held_phase("r", items[0])
    t0 = time.monotonic()
    suite._held_phase("r", items[1])
    assert time.monotonic() - t0 < 1.0
    # a worker lost mid-file leaves tests that never start: the guard ends the wait
    items = [Item("a.py"), Item("a.py"), Item("p.py", "paced")]
    Session(items, Config())
    monkeypatch.setattr(suite, "HELD_PHASE_WAIT_S", 0.3)
    suite._held_phase("q", items[0])
    suite._held_phase("q", items[2])  # returns, one ordinary test short
    assert (run_dir / "speculab-pytest-q.started2").stat().st_size == 1


def test_paced_tests_take_lanes_and_the_next_one_waits_for_a_lane_to_free(run_dir: Path) -> None:
    """At most PACED_LANES paced tests run at once (three or four at once failed on a slower 2-core VM); a test in a
    held file without the marker passes outside the lanes."""
    release = threading.Event()
    running = []

    def paced(name: str) -> None:
        with suite._machine("l", suite.PACED, lane=True):
            running.append(name)
            release.wait(10)

    holders = [threading.Thread(target=paced, args=(f"p{i}",)) for i in range(suite.PACED_LANES)]
    for t in holders:
        t.start()
    deadline = time.monotonic() + 5
    while len(running) < suite.PACED_LANES and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(running) == suite.PACED_LANES
    late = threading.Thread(target=paced, args=("late",))
    late.start()
    with suite._machine("l", suite.PACED):  # an ordinary test of a held file: no lane, no wait
        pass
    time.sleep(0.6)  # three polls of a lane
    assert "late" not in running
    release.set()
    for t in [*holders, late]:
        t.join(10)
    assert running[-1] == "late"


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering a priority again needs root (CI runs as root)")
def test_a_cpu_bound_file_runs_at_a_lower_priority_and_the_worker_gets_its_own_back() -> None:
    items = [Item("tests/integration/test_readme_examples.py"), Item("a.py")]
    Session(items, Config())
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with suite._priority(items[0], suite.ORDINARY):
        assert os.getpriority(os.PRIO_PROCESS, 0) == suite.CPU_BOUND_NICE
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    with suite._priority(items[1], suite.ORDINARY):
        assert os.getpriority(os.PRIO_PROCESS, 0) == before
