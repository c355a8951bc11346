"""Terminal progress for `speculab run` / `demo`: lifecycle steps as lines, one progress bar per arm and level."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from speculab.harness.results.warnings import ReportWarning
from speculab.report.phrases import warning_text


class RunProgress:
    """Implements `speculab.commands.run.blocks.Reporter` with rich (a bar only while a level runs)."""

    def __init__(self, console: Console):
        self.console = console
        self._bar: Progress | None = None
        self._task: Any = None
        self._key: tuple[str, int] | None = None  # (level, repeat) of the bar shown
        self._done = 0  # requests of the level finished before the current block

    def phase(self, text: str | ReportWarning) -> None:
        said = text if isinstance(text, str) else warning_text(text)
        self.console.print(f"[dim]-[/] {escape(said)}", highlight=False)

    def warn(self, warning: ReportWarning) -> None:
        self.phase(warning_text(warning))

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        self._done = done
        label = escape(f"{arm} @ {level} (repeat {repeat})")
        if self._bar is not None and self._key == (level, repeat):  # the next block of the same level: one bar
            self._bar.update(self._task, description=label, completed=done, total=total)
            return
        self.level_end()
        self._key = (level, repeat)
        self._bar = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(label, total=total, info="", completed=done)

    def progress(self, p: Any) -> None:
        if self._bar is None:
            return
        info = "warming up" if p.warmup else f"{p.in_flight} in flight" + (f", {p.error} errors" if p.error else "")
        self._bar.update(self._task, completed=self._done + (0 if p.warmup else p.finished), info=info)

    def level_end(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            self._key = None
