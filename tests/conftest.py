"""Shared fixtures, and the suite's one rule for sharing the machine between pytest-xdist workers.

Engine fixtures skip cleanly where torch (the [engine] extra) is not installed.

The suite runs on four workers on two cores (pyproject's addopts: `-n 4`): most integration tests wait on servers,
Ray, sleeps and sockets, so the third and fourth fill the time the other two wait (bench/README.md has the figures:
the tests' own wall is about twice their CPU). Each test holds the machine in one of three ways around its whole run
(setup, call, teardown):
- ordinary tests share it with each other;
- `paced` tests (a mock's scripted times held within a loose tolerance: a search's crossover, a prediction's band)
  share it with each other, never with an ordinary test, and at most `PACED_LANES` at once: two of them, mostly
  waiting on the mock's script, keep its pace on two cores, where a CPU-bound ordinary test beside them did not (the
  ordinary tests of a held file share it with them, outside the lanes);
- `serial` tests (millisecond timing assertions, tests that measure the machine before they assert) hold it alone.
A turnstile in front of the locks gives the test that waits to change the kind of holder priority over the next
test of the kind running now (flock alone would let the other workers take their shared lock again and again). Without
xdist (`-n 0`, `-p no:xdist`) there is nothing to share and no lock.

Files run in three groups (`pytest_collection_modifyitems`): those of ordinary tests only, then those holding a serial
test, then those holding a paced test; a test waits until every test of the groups before its file's has started
(`_held_phase`, which says why), and an ordinary test of a held file holds the machine as a paced one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# One torch (OpenMP) thread in the suite and in every server it starts: four workers share two cores, and an engine's
# intra-op threads only spin against the other worker's processes (the demo models are tiny; the engine unit tests
# measured 20x slower with 2, tests/unit/engine/speculative/conftest.py). A server's own `--threads` still wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """Byte code is written in a test run, whatever PYTHONDONTWRITEBYTECODE says (this project's machines set it).
    Without it every pytest-xdist worker rewrote and compiled all 430 test modules again (collection: 23 s of CPU a
    worker cold, 9 s with the cache), and every process a test starts (a few hundred `speculab` commands, servers
    and mocks) compiled the speculab modules it imports from source again. Set here, in the first process, before
    the workers start: they and every process under them inherit it. The files go to __pycache__ (.gitignore)."""
    if getattr(config, "workerinput", None) is None:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama-architecture checkpoint directory (random weights, real byte-level BPE tokenizer, chat template)."""
    pytest.importorskip("torch")
    from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-llama"))


ORDINARY, PACED, SERIAL = "ordinary", "paced", "serial"


# How many `paced` tests run at once. Three kept their mocks' pace on a 2-core VM whose client held 48 streams of
# 20 ms chunks (2026-12-06, an AMD EPYC whose flags were not recorded); on a slower one (AMD EPYC Zen 3, AVX2: the
# demo engine 1.6-1.9x slower, 2026-12-06 23:00 UTC) three or four at once failed four of their tests in three runs
# (a search's top probe below the 95% load gate, a phased run's low phase likewise: the client's turns between
# requests stretched by the CPU the others used) and two at a time passed (bench/README.md, "Paced lanes").
PACED_LANES = 2


@contextlib.contextmanager
def _lane(base: Path) -> Iterator[None]:
    """One of `PACED_LANES` slots, held for the test's run: the first free one, polled (flock has no "any of")."""
    files = [open(f"{base}.lane{i}", "a+b") for i in range(PACED_LANES)]  # noqa: SIM115 - closed below
    try:
        while True:
            for f in files:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
                return
            time.sleep(0.2)
    finally:
        for f in files:
            f.close()


@contextlib.contextmanager
def _machine(run_id: str, kind: str, lane: bool = False) -> Iterator[None]:
    """Hold the machine as a test of `kind` for the duration of the block. Two locks say who holds it: ordinary
    tests hold `.ordinary` shared, paced tests `.paced` shared, a serial test both exclusive. A test comes in through
    the turnstile and, still holding it, waits for the other kind to drain (taking its lock exclusive and letting it
    go); a serial test keeps the turnstile until it ends. Whoever waits holds the turnstile, and whoever it waits for
    is running and needs no lock to end, so no two waiters wait on each other."""
    base = Path(tempfile.gettempdir()) / f"speculab-pytest-{run_id}"
    with (
        open(f"{base}.turnstile", "a+b") as turnstile,
        open(f"{base}.ordinary", "a+b") as ordinary,
        open(f"{base}.paced", "a+b") as paced,
    ):
        own, other = (paced, ordinary) if kind == PACED else (ordinary, paced)
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            if kind == SERIAL:
                fcntl.flock(ordinary, fcntl.LOCK_EX)
                fcntl.flock(paced, fcntl.LOCK_EX)
            else:
                fcntl.flock(own, fcntl.LOCK_SH)
                fcntl.flock(other, fcntl.LOCK_EX)  # the other kind drained
                fcntl.flock(other, fcntl.LOCK_UN)
        finally:
            if kind != SERIAL:  # a shared holder only passes through; a serial one keeps everyone out while it runs
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            with _lane(base) if lane else contextlib.nullcontext():
                yield
        finally:
            fcntl.flock(ordinary, fcntl.LOCK_UN)
            fcntl.flock(paced, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


# The three groups of files, in the order they run (`pytest_collection_modifyitems`): the files of ordinary tests only,
# the files holding a serial test, the files holding a paced test. A file may not hold both.
ORDINARY_FILES, SERIAL_FILES, PACED_FILES = 0, 1, 2
FILE_GROUPS = pytest.StashKey[dict[Path, int]]()  # as the collection was ordered (before `-m`/`-k` deselect)
GROUPS = pytest.StashKey[tuple[dict[Path, int], list[int]]]()
HELD_PHASE_WAIT_S = 1800.0  # never wait for ever: a worker lost mid-file leaves its tests unstarted


def _file_groups(items: list[pytest.Item]) -> dict[Path, int]:
    """Each file's group; a file with both serial and paced tests is refused (its paced tests would wait for its
    own serial ones to start: `_held_phase`)."""
    serial = {it.path for it in items if it.get_closest_marker("serial")}
    paced = {it.path for it in items if it.get_closest_marker("paced")}
    both = sorted(p.name for p in serial & paced)
    if both:
        raise pytest.UsageError(f"{', '.join(both)}: a file holds serial and paced tests; move one kind to a file")
    return {it.path: SERIAL_FILES if it.path in serial else PACED_FILES if it.path in paced else ORDINARY_FILES
            for it in items}  # fmt: skip


def _groups(session: pytest.Session) -> tuple[dict[Path, int], list[int]]:
    """The session's file groups and how many tests each holds (once per worker). The groups are the ones the
    collection was ordered by: `-m "not slow"` can deselect a file's only paced test after the ordering, and a file
    regrouped as ordinary then would be counted among tests that run before it, and waited for for ever."""
    if GROUPS not in session.stash:
        groups = session.config.stash.get(FILE_GROUPS, None) or _file_groups(session.items)
        totals = [0, 0, 0]
        for it in session.items:
            totals[groups[it.path]] += 1
        session.stash[GROUPS] = (groups, totals)
    return session.stash[GROUPS]


def _held_phase(run_id: str, item: pytest.Item) -> None:
    """Wait until every test of the groups before this test's file has started, then count this test in (a byte
    appended to its group's file: an O_APPEND write of one byte is atomic). Every worker collects the same items, so
    each computes the same totals, and a worker takes files in the groups' order, so what it waits for is never
    queued behind it. Once a group has started whole, no test of it comes to take turns with the next group's: the
    locks in `_machine` only let the last of them drain. Without this, a worker that reached a paced file early took
    turns with a worker still in a file of many short tests, each of which waited for a whole paced test of half a
    minute (bench/suite_durations.py measured 981 s of such waits in one 882 s run on four workers)."""
    base = Path(tempfile.gettempdir()) / f"speculab-pytest-{run_id}"
    groups, totals = _groups(item.session)
    group = groups[item.path]
    deadline = time.monotonic() + HELD_PHASE_WAIT_S
    for before in range(group):
        counted = Path(f"{base}.started{before}")  # absent until the group's first test starts; none if it is empty
        while (
            totals[before]
            and time.monotonic() < deadline
            and not (counted.exists() and counted.stat().st_size >= totals[before])
        ):
            time.sleep(0.2)
    with open(f"{base}.started{group}", "ab") as f:
        f.write(b".")


def _kind(item: pytest.Item) -> str:
    """How the test holds the machine. An ordinary test in a held file runs in the held phase, beside paced tests
    (the short ordinary tests kept next to the behaviour a serial or paced test times: bad flags, file layouts)."""
    if item.get_closest_marker("serial") is not None:
        return SERIAL
    if item.get_closest_marker("paced") is not None:
        return PACED
    return PACED if _groups(item.session)[0].get(item.path, ORDINARY_FILES) != ORDINARY_FILES else ORDINARY


# The files whose tests are CPU-bound for a minute or more (the demo engine, vLLM, llama.cpp: bench/suite_durations.py
# measures them) run at a lower CPU priority, they and the servers they start (`CPU_BOUND_NICE`): the ordinary tests
# beside them that time a scripted mock over requests of 80-340 ms (a closed loop's turn between one request's end and
# the next send counts against its load) had the scheduler's waits of several ms added to each turn on a slower 2-core
# VM with four workers (AMD EPYC Zen 3, 2026-12-06: two such tests below the 95% load gate, a known crossover off by
# 12%). CPU-bound tests only lose what the waiting tests take back. Only as root (CI): lowering a priority again needs
# the privilege, and a worker left niced would slow every test after.
CPU_BOUND_FILES = frozenset(
    {
        "test_readme_examples.py",
        "test_resume.py",
        "test_vllm_ab.py",
        "test_recommended_launch.py",
        "test_demo.py",
        "test_candidates_demo.py",
        "test_llamacpp_demo.py",
        "test_spec_engine.py",
        "test_server_fuzz.py",
        "test_spec_bench_script.py",
        "test_bench_scripts.py",
    }
)
CPU_BOUND_NICE = 10


@contextlib.contextmanager
def _priority(item: pytest.Item, kind: str) -> Iterator[None]:
    """`CPU_BOUND_NICE` for the test's run where its file is CPU-bound and this process may raise it back."""
    if item.path.name not in CPU_BOUND_FILES or os.geteuid() != 0 or kind != ORDINARY:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, CPU_BOUND_NICE)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    worker = getattr(item.config, "workerinput", None)  # set on pytest-xdist workers only
    if worker is None:
        yield
        return
    kind, asked = _kind(item), time.perf_counter()
    _held_phase(worker["testrunuid"], item)
    with _machine(worker["testrunuid"], kind, lane=item.get_closest_marker("paced") is not None), _priority(item, kind):
        # how long the test waited for the machine: bench/suite_durations.py takes it out of the test's own wall
        item.user_properties += [("machine_kind", kind), ("machine_wait_s", time.perf_counter() - asked)]
        yield


# The files that take a minute or more on the 2-core machine (bench/suite_durations.py measures them; bench/README.md
# has the figures), started first so that no worker is left finishing one alone at the end. xdist gives the four
# workers the first four files, then the next file to each worker with two tests or fewer left: the README block and
# the vLLM A/B (CPU-bound, one test each) start together beside two files that wait on namespaces and mock servers
# (two_hosts, a_vs_a: a fifth of their wall is CPU), and the machine's two cores are still not both busy then
# (bench/README.md, "Under 12 minutes": about 1.5 cores in the first four minutes).
LONGEST_FILES = (
    "test_readme_examples.py",  # CPU-bound (the demo engine)
    "test_two_hosts.py",  # waits
    "test_a_vs_a.py",  # waits
    "test_vllm_ab.py",  # half CPU
    "test_ray_workers.py",  # waits
    "test_resume.py",  # CPU-bound
    "test_recommended_launch.py",
    "test_experiment_lifecycle.py",
)
# The held files, last, in this order within their groups (`_held_phase`): the serial minute first (the demo engine's
# recommendation; the other serial files hold seconds each), then the paced files, which the workers reach together
# and run side by side. A worker that starts a file of one test takes the next file at once (xdist hands a worker
# more when it has two tests or fewer left, and a worker holds its last test until it has a next one or none is
# left): so each long one-test file comes before a short one, which its worker takes with it, and the two files of
# several tests come last. In the order longest first, two workers took two long files each and one none: 84 s for
# files that fit in about 60 (bench/suite_durations.py, 2026-12-06).
LAST_FILES = (
    "test_recommend_demo.py",  # serial
    "test_search_resume.py",  # paced, one test of ~40 s
    "test_predict_truth.py",  # one test of ~40 s
    "test_slo_capacity.py",  # one test of ~20 s
    "test_search_launch.py",  # one test of ~20 s
    "test_a_vs_a_two_url.py",  # one test of ~35 s, mostly waiting
    "test_phased_load.py",  # three tests, ~40 s
    "test_search_crossover.py",  # two tests, ~35 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then the other files holding `slow` tests, then the rest, then the files holding
    `serial` tests, and those holding `paced` tests last (a stable sort): the workers take whole files in this order,
    and a file of minutes started last would leave one worker idle while the others finish it. Held tests wait for
    the groups before theirs to start (`_held_phase`): among the first files, a serial test waited a minute or two for
    the long tests beside it, with its worker idle; at the end, the groups run one after the other."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    groups = config.stash[FILE_GROUPS] = _file_groups(items)

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.name
        if groups[item.path] != ORDINARY_FILES:
            return (2 + groups[item.path], LAST_FILES.index(name) if name in LAST_FILES else len(LAST_FILES))
        if name in LONGEST_FILES:
            return (0, LONGEST_FILES.index(name))
        return (1 if item.path in slow_files else 2, 0)

    items.sort(key=rank)
