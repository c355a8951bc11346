"""What the terminal shows while an experiment runs: the `Reporter` protocol (the CLI implements it with rich) and
a silent one for library use and tests."""

from __future__ import annotations

from typing import Protocol

from speculab.harness.load.runner import Progress


class Reporter(Protocol):
    def phase(self, text: str) -> None:
        """A step of the lifecycle: launching, ready, stopping, ..."""

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        """`arm` starts sending at `level`; `total` requests in the level, `done` of them finished already (two-URL
        mode calls this for every block of the level, with one level_end after the last)."""

    def progress(self, p: Progress) -> None: ...

    def level_end(self) -> None: ...


class Silent:
    def phase(self, text: str) -> None:
        pass

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        pass

    def progress(self, p: Progress) -> None:
        pass

    def level_end(self) -> None:
        pass
