"""How the suite's tests share a 2-core machine under pytest-xdist: a held lane, and everything else in the background.

Held tests are the ones whose assertions time something: `serial` (millisecond timing, a speedup that must come out
faster, tests that measure the machine before they assert) and `paced` (a mock's scripted times held loosely: a
search's crossover, a prediction's band, a phased load's gates). They, and the other tests of their files, run on
one worker at a time, one file after another, from the start of the run (`HeldLaneScheduling`), while the other
workers run the rest of the suite in a CPU cgroup marked idle (`Background`): the kernel gives its processes the CPU
only when nothing outside it wants it, and a held test's process that wakes takes a core from them at once (a
SCHED_IDLE entity is preempted on any other's wakeup). The lane's tests keep their pace beside a machine otherwise
full: all 33 held tests passed, their mocks' timings within their tolerances, with the rest of the suite running in
such a group on four workers (a 2-core AMD EPYC Zen 3 VM, 2026-12-07; bench/README.md has the figures).

Before, the held tests ran after the others, the lane's ~6 minutes with a core or more idle: 308 s of a 922 s run.

Where no such group can be made (not root; no cgroup-v1 `cpu` controller with `cpu.idle`, which needs Linux 5.15),
the held tests fall back on exclusion: the others hold one lock shared for each test, a held test holds it exclusive,
so it waits until no other test runs (in practice until the others have run out of files) and none starts beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ORDINARY, PACED, SERIAL = "ordinary", "paced", "serial"
HELD_MARKERS = (SERIAL, PACED)
# Set by the controller (`start`) for its workers and every process under them: a scratch directory for the lane's
# files and the fallback's lock, and the background cgroups when they could be made.
ENV_DIR = "SPECULAB_TEST_SHARING_DIR"
ENV_BACKGROUND = "SPECULAB_TEST_BACKGROUND_CGROUPS"
CGROUP_V1 = Path("/sys/fs/cgroup")
PREFIX = "speculab-tests-"  # + the controller's pid


# ---------------------------------------------------------------------------------------------------------------
# Which tests are held
# ---------------------------------------------------------------------------------------------------------------


def held_files(items: Iterable[Any]) -> set[Path]:
    """The files holding a `serial` or `paced` test: the whole file runs on the held lane (its other tests are the
    short ones kept next to the behaviour the held test times: bad flags, file layouts)."""
    return {it.path for it in items if any(it.get_closest_marker(m) is not None for m in HELD_MARKERS)}


def kind(item: Any, held: set[Path]) -> str:
    """How the test holds the machine, as bench/suite_durations.py reports it: serial, paced (a held test, or any test
    of a held file), or ordinary (in the background)."""
    if item.get_closest_marker(SERIAL) is not None:
        return SERIAL
    return PACED if item.path in held else ORDINARY


def write_held(rootdir: Path, files: set[Path]) -> None:
    """Tell the controller which files are held (it collects nothing itself): their xdist scopes, file node ids
    relative to the root directory. Every worker writes the same list; each replaces the file whole."""
    directory = os.environ.get(ENV_DIR)
    if directory is None:
        return
    scopes = sorted(str(p.relative_to(rootdir)) for p in files)
    tmp = Path(directory) / f"held.{os.getpid()}"
    tmp.write_text(json.dumps(scopes), encoding="utf-8")
    tmp.replace(Path(directory) / "held.json")


def read_held() -> frozenset[str]:
    directory = os.environ.get(ENV_DIR)
    path = Path(directory) / "held.json" if directory else None
    return frozenset(json.loads(path.read_text(encoding="utf-8"))) if path and path.exists() else frozenset()


# ---------------------------------------------------------------------------------------------------------------
# The held lane: pytest-xdist's loadfile scheduling, with the held files kept to one worker at a time
# ---------------------------------------------------------------------------------------------------------------


def make_scheduler(config: Any, log: Any) -> Any:
    from xdist.scheduler import LoadFileScheduling

    class HeldLaneScheduling(LoadFileScheduling):
        """Whole files in the collection's order, as `--dist loadfile`, except that a held file goes only to a worker
        when no other worker has a held test left to run: the first worker to ask takes the lane and keeps it (it
        asks for its next file before its last two tests run, so it asks first), and the others take the next
        ordinary file instead. A worker with nothing it may take waits, and is asked again whenever a test ends."""

        _held: frozenset[str] | None = None

        @property
        def held(self) -> frozenset[str]:
            if self._held is None:  # the workers wrote it before they reported their collections
                self._held = read_held()
            return self._held

        def _lane_elsewhere(self, node: Any) -> bool:
            held = self.held
            return any(
                not done and scope in held
                for other, work in self.assigned_work.items()
                if other is not node
                for scope, tests in work.items()
                for done in tests.values()
            )

        def _assign_work_unit(self, node: Any) -> None:
            held = self.held
            scopes = list(self.workqueue)
            mine = [s for s in scopes if s not in held]
            if not self._lane_elsewhere(node):
                mine = [s for s in scopes if s in held] + mine
            if not mine:
                return
            work_unit = self.workqueue.pop(mine[0])
            self.assigned_work.setdefault(node, {})[mine[0]] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(t) for t, done in work_unit.items() if not done])

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            for other in self.nodes:  # a worker left waiting: the lane may be free, or nothing left at all
                if other is not node and not self._pending_of(self.assigned_work[other]):
                    self._reschedule(other)

    return HeldLaneScheduling(config, log)


# ---------------------------------------------------------------------------------------------------------------
# The background: an idle CPU cgroup for everything that is not held
# ---------------------------------------------------------------------------------------------------------------


class Background:
    """An idle cgroup beside the controller's own (its `cpu` group; and in `cpuacct`, where that hierarchy is apart,
    to count what the group used). A process moved in takes its children with it from then on."""

    def __init__(self, groups: list[Path]) -> None:
        self.groups = groups  # [cpu group, cpuacct group] (one where the two hierarchies are mounted together)

    @classmethod
    def make(cls, name: str) -> Background | None:
        """The group, or None where this machine or user cannot make one."""
        groups = []
        for controller in ("cpu", "cpuacct"):
            mount = CGROUP_V1 / controller
            own = _own_group(controller)
            if own is None or not mount.is_dir():
                return None
            group = (mount / own.lstrip("/") / name).resolve()
            if group not in groups:
                groups.append(group)
        try:
            for group in groups:
                group.mkdir(exist_ok=True)
            (groups[0] / "cpu.idle").write_text("1")
        except OSError:
            cls(groups).remove()
            return None
        if not (groups[-1] / "cpuacct.usage").exists():
            cls(groups).remove()
            return None
        return cls(groups)

    @classmethod
    def from_env(cls) -> Background | None:
        value = os.environ.get(ENV_BACKGROUND)
        return cls([Path(p) for p in value.split(os.pathsep)]) if value else None

    def to_env(self) -> str:
        return os.pathsep.join(str(g) for g in self.groups)

    def enter(self, pid: int, background: bool) -> None:
        """Move `pid` into the group, or back beside it (the controller's own group)."""
        for group in self.groups:
            (group if background else group.parent).joinpath("cgroup.procs").write_text(str(pid))

    def holds(self, pid: int) -> bool:
        with contextlib.suppress(OSError, ValueError):
            return str(pid) in (self.groups[0] / "cgroup.procs").read_text().split()
        return False

    def cpu_s(self) -> float:
        """CPU seconds the group's processes have used since it was made."""
        return int((self.groups[-1] / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Stop what the tests left running in the group (a server a timed-out test never stopped), then remove it."""
        for group in self.groups:
            for attempt in range(20):
                with contextlib.suppress(OSError):
                    group.rmdir()
                if not group.exists():
                    break
                with contextlib.suppress(OSError, ValueError):
                    for pid in (group / "cgroup.procs").read_text().split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.05 * (attempt + 1))


def _own_group(controller: str) -> str | None:
    """This process's cgroup-v1 group in `controller`'s hierarchy (/proc/self/cgroup: `id:controllers:path`)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return path
    return None


def follow(pid: int) -> None:
    """Move this process where `pid` is: into the background or out of it (a process forked by a server started
    earlier, elsewhere, for a test running here)."""
    background = Background.from_env()
    if background is not None:
        with contextlib.suppress(OSError):
            background.enter(os.getpid(), background.holds(pid))


def background_cpu_s() -> float:
    """CPU seconds the background has used, for a process outside it (tests/fakes/quiet.py leaves it out of the other
    processes' share: it only runs when the held test does not want the CPU); 0 inside it, or with no background."""
    background = Background.from_env()
    if background is None or background.holds(os.getpid()):
        return 0.0
    with contextlib.suppress(OSError, ValueError):
        return background.cpu_s()
    return 0.0


# ---------------------------------------------------------------------------------------------------------------
# The controller's and a worker's halves
# ---------------------------------------------------------------------------------------------------------------


def start(directory: Path) -> Background | None:
    """In the controller, before the workers start: the scratch directory and the background, in the environment
    the workers inherit."""
    os.environ[ENV_DIR] = str(directory)
    if os.geteuid() != 0:
        return None
    _remove_abandoned()
    background = Background.make(f"{PREFIX}{os.getpid()}")
    if background is not None:
        os.environ[ENV_BACKGROUND] = background.to_env()
    return background


def _remove_abandoned() -> None:
    """The backgrounds of runs whose controller is gone (killed before it could remove its own), and what is left
    running in them."""
    for controller in ("cpu", "cpuacct"):
        own = _own_group(controller)
        parent = CGROUP_V1 / controller / (own or "/").lstrip("/")
        for group in parent.glob(f"{PREFIX}*") if own is not None else ():
            pid = group.name.removeprefix(PREFIX)
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                Background([group]).remove()


@contextlib.contextmanager
def hold(test_kind: str) -> Iterator[None]:
    """A worker, around one test: into the background for an ordinary test, out of it for a held one; or, with no
    background, the exclusion lock (shared for an ordinary test, exclusive for a held one)."""
    background = Background.from_env()
    if background is not None:
        background.enter(os.getpid(), test_kind == ORDINARY)
        yield
        return
    directory = os.environ.get(ENV_DIR)
    if directory is None:
        yield
        return
    with open(Path(directory) / "machine.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH if test_kind == ORDINARY else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
