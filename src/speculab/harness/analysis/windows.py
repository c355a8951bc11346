"""An arm's own active time: its records grouped by the windows its blocks ran in (pure).

In two-URL mode the arms take turns block by block within one level: between two of an arm's blocks the other arm
runs and this one sends nothing. A figure that divides by time (requests in flight, send rate, throughput) must then
count each arm over its own windows, not over the whole level, or two identical servers each look half loaded. The
lifecycle records every block's window (`RepeatRun.windows_s`); records without windows (launch mode's single block,
`speculab compare`, run directories written before windows were recorded) are one window, and every figure is then
exactly what it was computed as before.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from speculab.harness.records import RequestRecord

Window = tuple[float, float]  # clock seconds: a block's measured phase began -> its last request ended


def _distance(w: Window, t: float) -> float:
    return max(w[0] - t, 0.0, t - w[1])


def by_window(records: Sequence[RequestRecord], windows: Sequence[Window] = ()) -> list[list[RequestRecord]]:
    """Measured records grouped by the window their send falls in, in time order, empty groups left out.

    Each record goes to the nearest window (distance 0 inside it), so a clock reading a little outside its block's
    window still counts with that block. With fewer than two windows: one group of every measured record."""
    recs = [r for r in records if not r.warmup]
    if len(windows) < 2:
        return [recs] if recs else []
    ws = sorted(windows)
    starts = [w[0] for w in ws]
    groups: list[list[RequestRecord]] = [[] for _ in ws]
    for r in recs:
        i = max(bisect.bisect_right(starts, r.sent_s) - 1, 0)  # the last window starting at or before the send
        if i + 1 < len(ws) and _distance(ws[i + 1], r.sent_s) < _distance(ws[i], r.sent_s):
            i += 1
        groups[i].append(r)
    return [g for g in groups if g]


def send_span_s(group: Sequence[RequestRecord]) -> float:
    """First send -> last send of one group (0 for fewer than two records)."""
    return max(r.sent_s for r in group) - min(r.sent_s for r in group) if len(group) > 1 else 0.0


def send_rate_rps(groups: Sequence[Sequence[RequestRecord]]) -> float | None:
    """Sends per second while sending: the sum of (n - 1) over the sum of first -> last send, per group (one group:
    `metrics`' (n - 1) / (last send - first send)). None when no group has two sends apart in time."""
    spans = [(len(g) - 1, send_span_s(g)) for g in groups]
    total = sum(s for _, s in spans if s > 0)
    return sum(n for n, s in spans if s > 0) / total if total > 0 else None


def active_s(groups: Sequence[Sequence[RequestRecord]]) -> float:
    """The arm's own measured wall time: first scheduled send -> last completion, summed over its groups (one group:
    `metrics.run_window_s`)."""
    return sum(max(r.end_s for r in g) - min(r.scheduled_s for r in g) for g in groups if g)


def full_loop_span(group: Sequence[RequestRecord]) -> Window | None:
    """The span over which a closed loop should hold every slot busy: its first send -> the first completion at or
    after its last send. Up to the last send the client refills each freed slot (a dip is the client falling
    behind); from then until a request ends every slot is still in flight; after it the loop drains because the
    workload ran out, which is no shortfall of the client. Ending at the last send instead gives a window of
    nothing when every request starts at once (n requests at concurrency n); ending at the last completion counts
    the drain (n equal starts with unequal lengths read mean/longest of n). None when the span is empty."""
    t0 = min(r.sent_s for r in group)
    last_send = max(r.sent_s for r in group)
    t1 = min(r.end_s for r in group if r.end_s >= last_send)
    return (t0, t1) if t1 > t0 else None


def _in_flight(
    records: Sequence[RequestRecord], windows: Sequence[Window]
) -> Iterator[tuple[Sequence[RequestRecord], float, float]]:
    """Per block with a `full_loop_span`: (its records, the span's length, the requests' summed seconds in flight
    within it)."""
    for g in by_window(records, windows):
        w = full_loop_span(g)
        if w is not None:
            t0, t1 = w
            yield g, t1 - t0, sum(max(0.0, min(r.end_s, t1) - max(r.sent_s, t0)) for r in g)


def mean_in_flight(records: Sequence[RequestRecord], window: Window) -> float:
    """Requests in flight over `window`, time-weighted (Little's law), whenever each was sent: a window cut from a
    longer closed loop holds requests sent before it too."""
    t0, t1 = window
    if t1 <= t0:
        return 0.0
    return sum(max(0.0, min(r.end_s, t1) - max(r.sent_s, t0)) for r in records) / (t1 - t0)


def achieved_concurrency(records: Sequence[RequestRecord], windows: Sequence[Window] = ()) -> float | None:
    """Time-weighted mean of requests in flight over `full_loop_span` of each of the arm's blocks (one block in
    launch mode; in two-URL mode the other arm runs between them, and that time is not this arm's): Little's law,
    the requests' summed time in flight within that span over its length. Closed loop: the client refills a slot as
    soon as one frees, so this equals the requested concurrency unless the client fell behind. None when no block
    has a span (nothing to measure)."""
    spans = [(span, busy) for _, span, busy in _in_flight(records, windows)]
    total = sum(span for span, _ in spans)
    return sum(busy for _, busy in spans) / total if total > 0 else None


def closed_loop_fraction(
    records: Sequence[RequestRecord], concurrency: float, windows: Sequence[Window] = ()
) -> float | None:
    """Achieved / possible requests in flight of a closed loop of `concurrency` streams, over the same spans as
    `achieved_concurrency`. What is possible is the concurrency, or fewer where a block holds fewer units (requests;
    a conversation's turns are one, sent one after another): 10 prompts at concurrency 16 can keep 10 in flight,
    and doing so is the load achieved, not a client 38 % short. None when no block has a span."""
    busy = possible = 0.0
    for g, span, in_flight in _in_flight(records, windows):
        units = len({r.conversation_id if r.conversation_id is not None else r.index for r in g})
        busy += in_flight
        possible += span * min(concurrency, units)
    return busy / possible if possible > 0 else None
