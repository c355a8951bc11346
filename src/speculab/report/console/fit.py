"""Terminal tables that fit by shortening names, never by dropping numbers.

Rich fits a table too wide for the terminal by shrinking its columns, and a column that may not wrap is cut to "…":
at 80 columns, arms named by their result files (`Qwen3-4B_vllm-0.10.1_ngram-k4_c4.json`) left every number cell of
the A/B table as "…". A `FittedTable` is built when it is rendered, once it knows the width it has, with the names
shortened just enough for the numbers to keep their full width, and apart from each other (report/names.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from speculab.report.names import shorten, shorten_apart

# a name is never shortened below this: past it the table is too wide for its numbers anyway, and rich decides
MIN_NAME = 8
UNBOUNDED = 100_000  # columns: room for a table's natural width


class FittedTable:
    """A rich renderable: `build(short)` makes the table with every name passed through `short`; rendered with the
    longest names that let it fit the width it is given, under its title (a line of its own: as the table's title it
    would wrap at the table's width, mid-phrase, when the table is narrower than the title)."""

    def __init__(self, build: Callable[[Callable[[str], str]], Table], names: Iterable[str], title: str = ""):
        self.build = build
        self.names = list(names)
        self.longest = max((len(n) for n in self.names), default=0)
        self.title = title

    def fitted(self, console: Console, options: ConsoleOptions) -> Table:
        table = self.build(lambda name: name)
        unbounded = options.update_width(UNBOUNDED)  # a measure within the width would be clamped to it
        for width in range(self.longest - 1, MIN_NAME - 1, -1):
            if Measurement.get(console, unbounded, table).maximum <= options.max_width:
                break
            short = shorten_apart(self.names, width)
            table = self.build(lambda name, s=short, w=width: s.get(name) or shorten(name, w))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        if self.title:
            yield Text(self.title, style="table.title")
        yield self.fitted(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.fitted(console, options))
