"""What the terminal shows while an experiment runs: the `Reporter` protocol (the CLI implements it with rich) and
a silent one for library use and tests."""

from __future__ import annotations

from typing import Protocol

from speculab.harness.load.runner import Progress


class Reporter(Protocol):
    def phase(self, text: str) -> None:
        """A step of the lifecycle: launching, ready, stopping, ..."""

    def level_start(self, arm: str, level: str, repeat: int, total: int) -> None: ...

    def progress(self, p: Progress) -> None: ...

    def level_end(self) -> None: ...


class Silent:
    def phase(self, text: str) -> None:
        pass

    def level_start(self, arm: str, level: str, repeat: int, total: int) -> None:
        pass

    def progress(self, p: Progress) -> None:
        pass

    def level_end(self) -> None:
        pass
