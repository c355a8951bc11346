"""Which requests were sent together: the unit of a comparison at a load.

Prompts sent at the same time share the server's state (the batch, the cache, the queue), so their effects are not
independent: at concurrency c a comparison's unit is a group of c prompts sent together (a conversation's turns
count as one unit of the send order), and a verdict needs MIN_PAIRS such units. One rule for the verdict's units
and for the plan's warning."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from speculab.harness.records import RequestRecord

MIN_PAIRS = 6  # below this a two-sided signed-rank test cannot reach p < 0.05 at all; we give no verdict


def group_size(kind: str, value: float, in_flight: Iterable[float | None] = ()) -> int:
    """How many prompts ran at the same time at a load (kind "concurrency", "rate" or "trace"): the concurrency of a
    closed loop; for an open loop the largest measured requests in flight (`in_flight`, one per arm; Little's law at
    work), rounded, and 1 before anything is measured (the plan's warning); at least 1. The one rule for the
    verdict's units and the plan's warning."""
    if kind == "concurrency":
        return max(1, round(value))
    measured = [c for c in in_flight if c is not None]
    return max(1, round(max(measured))) if measured else 1


def groups_needed(size: int, what: str = "prompts") -> str:
    """What a level of `size` prompts sent together needs for a verdict, naming the fix: MIN_PAIRS groups."""
    return f"need at least {MIN_PAIRS} groups: use at least {MIN_PAIRS * size} {what} at this load"


def concurrent_groups(order: Sequence[int], size: int, units: Mapping[int, str] | None = None) -> dict[int, int]:
    """Prompt index -> group number for runs of `size` consecutive prompts in send order (`order`: the indices as
    they were sent, the same in every arm). size 1: every prompt its own group.

    `units` (index -> conversation id) makes a conversation's consecutive turns one unit of the send order: at
    concurrency c, c conversations run side by side, each one turn at a time, so the group is c conversations
    with all their turns."""
    if size < 1:
        raise ValueError(f"group size must be >= 1, got {size}")
    if not units:
        return {idx: pos // size for pos, idx in enumerate(order)}
    out, pos, last = {}, -1, None
    for idx in order:
        key = units.get(idx)
        if key is None or key != last:
            pos += 1
        last = key
        out[idx] = pos // size
    return out


def diverged_indices(records: Iterable[RequestRecord]) -> frozenset[int]:
    """Indices whose records (every arm, every repeat) sent different contexts: a conversation turn behind earlier
    answers that differed. Their pairs compare two different prompts and are left out of every verdict."""
    first: dict[int, str] = {}
    out: set[int] = set()
    for r in records:
        if r.warmup or r.context_sha256 is None:
            continue
        if first.setdefault(r.index, r.context_sha256) != r.context_sha256:
            out.add(r.index)
    return frozenset(out)
