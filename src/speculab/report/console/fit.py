"""Terminal tables that fit by shortening names, never by dropping numbers.

Rich fits a table too wide for the terminal by shrinking its columns, and a column that may not wrap is cut to "…":
at 80 columns, arms named by their result files (`Qwen3-4B_vllm-0.10.1_ngram-k4_c4.json`) left every number cell of
the A/B table as "…". A `FittedTable` is built when it is rendered, once it knows the width it has, with the names
shortened just enough for the numbers to keep their full width, and shortened so that they stay apart: the start and
the end all names share go first (`Qwen3-4B…ngram-k4…c4.json`, `Qwen3-4B…plain…c4.json`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# a name is never shortened below this: past it the table is too wide for its numbers anyway, and rich decides
MIN_NAME = 8
ELLIPSIS = "…"
UNBOUNDED = 100_000  # columns: room for a table's natural width


def shorten_apart(names: Iterable[str], width: int) -> dict[str, str]:
    """Each name in at most `width` characters, what tells them apart kept as long as it fits: the start and the end
    that every name shares are cut first ("…"), then whatever is still too long loses its middle."""
    distinct = list(dict.fromkeys(names))
    if len(distinct) < 2:
        return {n: shorten(n, width) for n in distinct}
    pre = _shared(distinct)
    suf = _shared([n[pre:][::-1] for n in distinct])
    return {n: _keep_core(n, pre, len(n) - suf, width) for n in distinct}


def _shared(names: list[str]) -> int:
    """How many leading characters all the names share."""
    n = 0
    while all(len(x) > n and x[n] == names[0][n] for x in names):
        n += 1
    return n


def _keep_core(name: str, start: int, end: int, width: int) -> str:
    """`name` in `width` characters keeping name[start:end] (what differs) whole, with as much as fits of the shared
    start and end around it."""
    if len(name) <= width:
        return name
    head, core, tail = name[:start], name[start:end], name[end:]
    room = width - len(core)
    if room < bool(head) + bool(tail):  # not even a "…" on each side: the core itself is too long
        return shorten(name, width)
    t = min(len(tail), room // 2)
    h = min(len(head), room - t)
    t = min(len(tail), room - h)
    cut_head = head if len(head) <= h else head[: h - 1] + ELLIPSIS
    cut_tail = tail if len(tail) <= t else ELLIPSIS + tail[len(tail) - t + 1 :]
    return cut_head + core + cut_tail


def shorten(name: str, width: int) -> str:
    """`name` in at most `width` characters: its middle replaced by "…", the start and the end kept (result files'
    names tend to differ at the end: `…_ngram-k4.json` against `…_plain.json`)."""
    if len(name) <= width:
        return name
    if width < 2:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return name[:head] + ELLIPSIS + (name[-tail:] if tail else "")


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
