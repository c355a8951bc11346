"""Shared fixtures, and the suite's one rule for sharing the machine between pytest-xdist workers.

Engine fixtures skip cleanly where torch (the [engine] extra) is not installed.

The suite runs on three workers on two cores (pyproject's addopts: `-n 3`): most integration tests wait on servers,
Ray, sleeps and sockets, so the third fills the time the other two wait. Each test holds the machine in one of three
ways around its whole run (setup, call, teardown):
- ordinary tests share it with each other;
- `paced` tests (a mock's scripted times held within a loose tolerance: a search's crossover, a prediction's band)
  share it with each other, never with an ordinary test: two or three of them, mostly waiting on the mock's script,
  keep its pace on two cores, where a CPU-bound ordinary test beside them did not;
- `serial` tests (millisecond timing assertions, tests that measure the machine before they assert) hold it alone.
A turnstile in front of the locks gives the test that waits to change the kind of holder priority over the next
test of the kind running now (flock alone would let the other workers take their shared lock again and again). Without
xdist (`-n 0`, `-p no:xdist`) there is nothing to share and no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# One torch (OpenMP) thread in the suite and in every server it starts: three workers share two cores, and an engine's
# intra-op threads only spin against the other worker's processes (the demo models are tiny; the engine unit tests
# measured 20x slower with 2, tests/unit/engine/speculative/conftest.py). A server's own `--threads` still wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama-architecture checkpoint directory (random weights, real byte-level BPE tokenizer, chat template)."""
    pytest.importorskip("torch")
    from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-llama"))


ORDINARY, PACED, SERIAL = "ordinary", "paced", "serial"


@contextlib.contextmanager
def _machine(run_id: str, kind: str) -> Iterator[None]:
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
            yield
        finally:
            fcntl.flock(ordinary, fcntl.LOCK_UN)
            fcntl.flock(paced, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


def _kind(item: pytest.Item) -> str:
    if item.get_closest_marker("serial") is not None:
        return SERIAL
    return PACED if item.get_closest_marker("paced") is not None else ORDINARY


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    worker = getattr(item.config, "workerinput", None)  # set on pytest-xdist workers only
    if worker is None:
        yield
        return
    with _machine(worker["testrunuid"], _kind(item)):
        yield


# The files that take a minute or more on the 2-core machine (bench/suite_durations.py measures them; bench/README.md
# has the figures), started first so that no worker is left finishing one alone at the end, in an order that keeps the
# CPU-bound ones apart: xdist gives the three workers the 1st, 2nd and 3rd files, then the next file to a worker with
# fewer than three tests left, so the README block (one test) and the vLLM A/B (CPU-bound) go to one worker, one after
# the other, while the others wait on namespaces, Ray and servers (two_hosts, a_vs_a, ray_workers: a fifth of their
# wall is CPU). Started together they took 145 s and 104 s instead of 107 s and 79 s.
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
# The files of `serial` and `paced` tests, last, in this order: the serial minute first (the demo engine's
# recommendation), then the paced ones together, longest first, so that the workers reach them at about the same time
# and run them side by side (a paced test beside an ordinary one only takes turns with it); then the other files with
# serial tests (seconds each).
LAST_FILES = (
    "test_recommend_demo.py",  # serial
    "test_search_resume.py",  # paced
    "test_predict_truth.py",
    "test_phased_load.py",
    "test_search_crossover.py",
    "test_slo_capacity.py",
    "test_search_launch.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then the other files holding `slow` tests, then the rest, and the files holding
    `serial` or `paced` tests last (a stable sort): the workers take whole files in this order, and a file of minutes
    started last would leave one worker idle while the other finishes it. A `serial` test waits for the test the other
    workers are in to end: among the first files that was a test of a minute or two, with this worker idle (after #48
    the serial searches and recommend_demo were started among the longest); at the end it is a unit test of seconds."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    held_files = {item.path for item in items if item.get_closest_marker("serial") or item.get_closest_marker("paced")}

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.name
        if item.path in held_files:
            return (3, LAST_FILES.index(name) if name in LAST_FILES else len(LAST_FILES))
        if name in LONGEST_FILES:
            return (0, LONGEST_FILES.index(name))
        return (1 if item.path in slow_files else 2, 0)

    items.sort(key=rank)
