"""The `speculab bench` command: flags -> one measured run of one endpoint, its summary shown through the caller's
`BenchScreen`, then what ended it mapped to the exit's error (a server gone, a load host lost, the error gate)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from speculab.commands.bench.options import BenchFlags, bench_config_from_flags
from speculab.commands.bench.run import BenchResult, run_bench_interruptible
from speculab.errors import EndpointError, WorkerLost
from speculab.harness.analysis.metrics import error_gate
from speculab.harness.gates.check import check_error_gate
from speculab.harness.load.runner import Progress


class BenchScreen(Protocol):
    """What a bench run shows: its progress while it runs, then its summary (the CLI implements it with the report
    package; a command never renders)."""

    def progress(self) -> AbstractContextManager[Callable[[Progress], None]]:
        """A context that takes each `Progress` while the load runs."""

    def summary(self, summary: dict[str, Any], run_dir: Path) -> None:
        """summary.json's contents, shown."""


def bench_command(flags: BenchFlags, screen: BenchScreen, argv: list[str] | None = None) -> BenchResult:
    """Measure the endpoint; an interrupted run is returned (its part on disk), a run that lost its server or a load
    host raises that exit's error after the summary, and the error gate is checked last."""
    cfg, items, count_tokens = bench_config_from_flags(flags, argv=sys.argv if argv is None else argv)
    with screen.progress() as on_progress:
        result = run_bench_interruptible(cfg, items, on_progress=on_progress, count_tokens=count_tokens)
    screen.summary(result.summary, result.run_dir)
    if result.server_gone is not None:  # stopped as `run` stops on a dead server: what was measured is kept
        raise EndpointError(result.server_gone)
    if result.workers_lost is not None:  # a load host dropped out: the others finished, what was sent is kept
        raise WorkerLost(result.workers_lost)
    if not result.interrupted:
        c = result.summary["counts"]
        check_error_gate(
            error_gate(c["error"], c["sent"], c["errors_by_category"], flags.max_error_rate), result.run_dir
        )
    return result
