"""Shared fixtures, and the suite's one rule for sharing the machine between pytest-xdist workers.

Engine fixtures skip cleanly where torch (the [engine] extra) is not installed.

The suite runs on three workers on two cores (pyproject's addopts: `-n 3`): most integration tests wait on servers,
Ray, sleeps and sockets, so the third fills the time the other two wait. Tests marked `serial` (millisecond timing
assertions, tests that measure the machine before they assert) must not share it: each test takes a lock around its
whole run (setup, call, teardown) — shared for ordinary tests, exclusive for `serial` ones — so a `serial` test runs
while the other workers wait, and then they go on. A turnstile in front of the lock gives a waiting
`serial` test priority over the next ordinary test (flock alone would let the other worker take its shared lock
again and again). Without xdist (`-n 0`, `-p no:xdist`) there is nothing to share and no lock.
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


@contextlib.contextmanager
def _machine(run_id: str, *, alone: bool) -> Iterator[None]:
    """Hold the machine shared (ordinary test) or alone (`serial` test) for the duration of the block."""
    base = Path(tempfile.gettempdir()) / f"speculab-pytest-{run_id}"
    with open(f"{base}.turnstile", "a+b") as turnstile, open(f"{base}.lock", "a+b") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:  # an ordinary test only passes through; a serial one keeps others out while it runs
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    worker = getattr(item.config, "workerinput", None)  # set on pytest-xdist workers only
    if worker is None:
        yield
        return
    with _machine(worker["testrunuid"], alone=item.get_closest_marker("serial") is not None):
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
    "test_search_resume.py",  # serial: among the serial files, last
    "test_recommend_demo.py",  # serial
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then the other files holding `slow` tests, then the rest, and the files holding
    `serial` tests last (a stable sort): the workers take whole files in this order, and a file of minutes started
    last would leave one worker idle while the other finishes it. A `serial` test waits for the test the other worker
    is in to end: among the first files that was a test of a minute or two, with this worker idle (after #48 the
    serial searches and recommend_demo were started among the longest); at the end it is a unit test of seconds."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    serial_files = {item.path for item in items if item.get_closest_marker("serial")}

    def rank(item: pytest.Item) -> tuple[int, int]:
        longest = LONGEST_FILES.index(item.path.name) if item.path.name in LONGEST_FILES else len(LONGEST_FILES)
        if item.path in serial_files:
            return (3, longest)
        if item.path.name in LONGEST_FILES:
            return (0, longest)
        return (1 if item.path in slow_files else 2, 0)

    items.sort(key=rank)
