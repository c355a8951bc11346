"""Shared fixtures, and the suite's rule for sharing the machine between pytest-xdist workers.

Engine fixtures skip cleanly where torch (the [engine] extra) is not installed.

The suite runs on four workers on two cores (pyproject's addopts: `-n 4`): most integration tests wait on servers,
Ray, sleeps and sockets (bench/README.md has the figures: the tests' own wall is about twice their CPU). The files
holding `serial` or `paced` tests (held: their assertions time something) run on one worker at a time, one after
another, from the start; the other workers run everything else in an idle CPU cgroup, so that a held test's processes
take a core whenever they want one (tests/sharing.py, which says what happens where no such group can be made).
Without xdist (`-n 0`, `-p no:xdist`) there is nothing to share.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import sharing

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


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller (pytest-xdist's, before its workers start): the held lane's scratch directory, and the
    background cgroup where this machine lets it be made (tests/sharing.py)."""
    if getattr(session.config, "workerinput", None) is None and _workers(session.config):
        directory = Path(tempfile.mkdtemp(prefix="speculab-pytest-"))
        session.config.stash[SHARING] = (directory, sharing.start(directory))


def pytest_unconfigure(config: pytest.Config) -> None:
    if SHARING in config.stash:
        directory, background = config.stash[SHARING]
        if background is not None:
            background.remove()
        shutil.rmtree(directory, ignore_errors=True)


def _workers(config: pytest.Config) -> int:
    return int(getattr(config.option, "numprocesses", 0) or 0) if config.pluginmanager.has_plugin("xdist") else 0


SHARING = pytest.StashKey[tuple[Path, "sharing.Background | None"]]()
HELD = pytest.StashKey[set[Path]]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadfile with the held files on one worker at a time, from the start (tests/sharing.py)."""
    return sharing.make_scheduler(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if getattr(item.config, "workerinput", None) is None:  # one process: nothing to share
        yield
        return
    test_kind, asked = sharing.kind(item, item.config.stash.get(HELD, set())), time.perf_counter()
    with sharing.hold(test_kind):
        # how long the test waited for the machine (the fallback's lock): bench/suite_durations.py takes it out of
        # the test's own wall
        item.user_properties += [("machine_kind", test_kind), ("machine_wait_s", time.perf_counter() - asked)]
        yield


# The files that take a minute or more on the 2-core machine (bench/suite_durations.py measures them; bench/README.md
# has the figures), started first so that no worker is left finishing one alone at the end. xdist gives the workers
# the first files, then the next file to each worker with two tests or fewer left: the three background workers start
# with two CPU-bound files and one that waits (the held lane, mostly waiting on mocks, leaves a core to them).
LONGEST_FILES = (
    "test_readme_examples.py",  # CPU-bound (the demo engine)
    "test_vllm_ab.py",  # half CPU
    "test_two_hosts.py",  # waits
    "test_resume.py",  # CPU-bound
    "test_a_vs_a.py",  # waits
    "test_ray_workers.py",  # waits
    "test_recommended_launch.py",
    "test_experiment_lifecycle.py",
)
# The held lane's files first, in this order (the rest of them after): the longest first, so that the lane's last
# files are short ones whatever the machine's speed.
HELD_FILES = (
    "test_recommend_demo.py",  # serial, ~60 s CPU-bound (the demo engine)
    "test_search_resume.py",  # ~50 s
    "test_search_crossover.py",  # two tests, ~50 s
    "test_phased_load.py",  # three tests, ~40 s
    "test_predict_truth.py",  # ~40 s
    "test_a_vs_a_two_url.py",  # ~30 s, mostly waiting
    "test_search_launch.py",  # ~20 s
    "test_slo_capacity.py",  # ~20 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The held files first (tests/sharing.py: one worker takes them, one after another, from the start), then the
    longest files, then the other files holding `slow` tests, then the rest (a stable sort): the workers take whole
    files in this order, and a file of minutes started last would leave one worker busy while the others idle. On
    a worker, the held files are also written down for the controller, which schedules but collects nothing."""
    held = config.stash[HELD] = sharing.held_files(items)
    if getattr(config, "workerinput", None) is not None:
        sharing.write_held(config.rootpath, held)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.name
        if item.path in held:
            return (0, HELD_FILES.index(name) if name in HELD_FILES else len(HELD_FILES))
        if name in LONGEST_FILES:
            return (1, LONGEST_FILES.index(name))
        return (2 if item.path in slow_files else 3, 0)

    items.sort(key=rank)
