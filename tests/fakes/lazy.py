"""A module a test file uses, imported when a test first uses it, not when the file is collected.

Every pytest-xdist worker collects every test file, but runs only its share of them: a module imported at the top of a
file is imported into all four workers. `openai` (1.1 s), `transformers` (0.9 s) and `ray` (0.4 s) were imported so,
by five, five and two files, and `scipy.stats` (1.1 s) by six (`python -X importtime -m pytest --collect-only`,
the 2-core VM, 2026-12-07): about 3.5 s of each worker's 11 s collection, all four collecting at once at the start.
`needs(name)` skips the file where the module is not installed, as `pytest.importorskip` at the top did, without
importing it.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

import pytest


class LazyModule:
    """`module.attr` imports `module` at its first use (then Python's own module cache answers)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module(), attr)


def installed(name: str) -> bool:
    """Whether `name` can be imported, without importing it (its parent package is, for a dotted name)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is missing
        return False


def needs(*names: str) -> pytest.MarkDecorator:
    """Skip the tests it marks (a file's `pytestmark`) where any of `names` is not installed."""
    missing = [n for n in names if not installed(n)]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")
