"""The `speculab diagnose` command: flags -> the measured phases and their diagnosis, written and shown through the
caller's `DiagnoseScreen`, then the error gate."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

from speculab.commands.diagnose.config import DiagnoseResult
from speculab.commands.diagnose.options import DiagnoseFlags, diagnose_config_from_flags
from speculab.commands.diagnose.run import diagnose_interruptible
from speculab.harness.analysis.metrics import error_gate
from speculab.harness.gates.check import check_error_gate


class DiagnoseScreen(Protocol):
    """What a diagnosis shows: each phase as it starts, then the diagnosis (its page written beside diagnosis.json);
    the CLI implements it with the report package."""

    def phase(self, text: str) -> None: ...

    def diagnosis(self, document: dict[str, Any], run_dir: Path | None) -> None: ...


def diagnose_command(flags: DiagnoseFlags, screen: DiagnoseScreen, argv: list[str] | None = None) -> DiagnoseResult:
    """Diagnose the endpoint; an interrupted diagnosis is returned (what ran is on disk), the error gate checked on
    one that finished."""
    cfg = diagnose_config_from_flags(flags, argv=sys.argv if argv is None else argv)
    result = diagnose_interruptible(cfg, on_phase=screen.phase)
    screen.diagnosis(result.document, result.run_dir)
    if not result.interrupted:
        measured = [r for r in result.records if not r.warmup]
        failed = [r for r in measured if r.error is not None]
        by_cat = Counter(r.error.category.value for r in failed)  # type: ignore[union-attr]
        check_error_gate(error_gate(len(failed), len(measured), by_cat, flags.max_error_rate), result.run_dir)
    return result
