"""A load host that drops out mid-run (`bench --workers`/`--ray`, issue 41): the run keeps what it received and ends
with one line naming the worker and where it ran, exit 6 (`WorkerLost`), not Ctrl-C's 130."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.cli_runner import one_line_error, run_main

from speculab.commands.bench import run as measure_run
from speculab.errors import WorkerLost

LOST = {"worker": 1, "crashed": True, "interrupted": True, "error": "ActorDiedError: gone", "ray": True,
        "host": "b", "node_ip": "10.213.41.2"}  # fmt: skip
FINE = {"worker": 0, "ray": True, "host": "a", "node_ip": "10.213.41.1", "interrupted": False}


def test_a_lost_worker_makes_the_results_one_line_and_a_finished_run_has_none(tmp_path: Path):
    got = measure_run._bench_result({}, tmp_path, True, None, "http://x", [FINE, LOST])
    assert got.workers_lost == (
        "client worker 1 on host b (10.213.41.2) failed (ActorDiedError: gone) mid-run, before its share was done; "
        f"every record it sent is kept; what was measured is in {tmp_path}"
    )
    assert (
        got.server_gone is None
        and measure_run._bench_result({}, tmp_path, False, None, "u", [FINE]).workers_lost is None
    )


def test_bench_ends_with_the_lost_workers_line_and_exit_6(tmp_path, capsys, monkeypatch: pytest.MonkeyPatch):
    def bench_that_lost_a_host(cfg, items, **kw):
        return measure_run._bench_result(
            {"counts": {"sent": 3, "ok": 3, "error": 0, "errors_by_category": {}}}, tmp_path, True, None, "u",
            [FINE, LOST],
        )  # fmt: skip

    monkeypatch.setattr("speculab.commands.bench.command.run_bench_interruptible", bench_that_lost_a_host)
    monkeypatch.setattr("speculab.report.console.bench.print_bench_summary", lambda *a, **k: None)
    code, _, err = run_main(capsys, "bench", "--url", "http://127.0.0.1:9", "--workers", "2", "--concurrency", "2",
                            "--output", str(tmp_path / "out"))  # fmt: skip
    assert code == WorkerLost.exit_code == 6
    line = one_line_error(err)
    assert line.startswith("error: client worker 1 on host b (10.213.41.2)") and str(tmp_path) in line
    assert "interrupted" not in err  # not Ctrl-C's line (exit 130)
