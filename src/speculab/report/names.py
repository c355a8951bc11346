"""Names shortened for display, the one way both views do it: a terminal table's arm column (console/fit.py) and a
plot's legend (html/plots.py). Arms are often named by their result files (`Qwen3-4B_vllm-0.10.1_ngram-k4_c4.json`),
which share most of their length: the start and the end all names share are cut first, so what tells them apart stays
(`Qwen3-4B…ngram-k4…c4.json`, `Qwen3-4B…plain…c4.json`).
"""

from __future__ import annotations

from collections.abc import Iterable

ELLIPSIS = "…"


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
