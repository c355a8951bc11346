"""A phased load's schedule, pure: where each phase lies in time, which prompts each phase sends, when an open
loop's requests go (docs/experiment.md, "Phased loads").

Pairing across arms: each segment of the schedule (a phase, or the transition that opens it and the rest of it:
`segments`) sends its own stream of the workload's prompts from the first, numbered `phase_index(segment, k)` for
its k-th request, so both arms send the same prompts in the same order in every segment whatever each reached in
the one before (a faster arm sends more in a segment; the next starts both afresh). A request belongs to the
segment its send time falls in; closed-loop workers only start a segment's request while it lasts, so the index and
the send time agree.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from speculab.config.experiment import LoadPhase
from speculab.errors import UserError
from speculab.harness.load.arrivals import ArrivalConfig, send_offsets
from speculab.harness.records import RequestSpec

# a phase's k-th request is numbered phase x PHASE_STRIDE + k: a phase sends fewer than this many requests
PHASE_STRIDE = 1_000_000


@dataclass(frozen=True, slots=True)
class PhaseWindow:
    """One phase, or one part of it, placed in time: seconds from the start of the measured block."""

    number: int  # the phase's, 1-based, in schedule order
    phase: LoadPhase
    start_s: float
    end_s: float
    part: str = "p"  # segments: "t" the transition that opens the phase, "p" the phase past it (or whole)

    @property
    def key(self) -> str:
        """The window's name: p<n> (phase n, past its transition) or t<n> (the transition into phase n)."""
        return f"{self.part}{self.number}"


def windows(phases: Sequence[LoadPhase]) -> tuple[PhaseWindow, ...]:
    """The phases one after another from 0."""
    out, t = [], 0.0
    for i, p in enumerate(phases, start=1):
        out.append(PhaseWindow(i, p, t, t + p.duration_s))
        t += p.duration_s
    return tuple(out)


def segments(phases: Sequence[LoadPhase], transition_s: float) -> tuple[PhaseWindow, ...]:
    """The schedule cut where it is judged: each phase whose load differs from the one before opens with its
    transition, its first `transition_s` seconds (part "t"), where an engine that adapts to the load has not caught
    up yet; the rest is the phase (part "p"). The first phase, and one whose load did not change, is whole. Each
    segment sends its own prompt stream (`phase_prompts`), so the arms pair in every one whatever each reached in
    the one before."""
    out: list[PhaseWindow] = []
    before: LoadPhase | None = None
    for w in windows(phases):
        start = w.start_s
        p = w.phase
        if before is not None and (before.kind, before.value) != (p.kind, p.value) and transition_s > 0:
            start = min(w.end_s, w.start_s + transition_s)
            out.append(PhaseWindow(w.number, p, w.start_s, start, "t"))
        if start < w.end_s:
            out.append(PhaseWindow(w.number, p, start, w.end_s, "p"))
        before = p
    return tuple(out)


def phase_at(placed: Sequence[PhaseWindow], t_s: float) -> int | None:
    """The 0-based position of the phase (or segment) running `t_s` seconds in; None before 0 and once the
    schedule is over."""
    for i, w in enumerate(placed):
        if w.start_s <= t_s < w.end_s:
            return i
    return None


def phase_index(position: int, k: int) -> int:
    """The record index of phase `position`'s (0-based) k-th request."""
    if k >= PHASE_STRIDE:
        raise UserError(f"a phase sent {PHASE_STRIDE} requests; use shorter phases")
    return position * PHASE_STRIDE + k


def phase_prompts(items: Sequence[RequestSpec], position: int) -> Iterator[RequestSpec]:
    """Phase `position`'s endless stream: the workload's prompts in order, cycled, numbered by `phase_index`."""
    if not items:
        raise UserError("the workload has no items")
    for k, spec in enumerate(itertools.cycle(items)):
        yield dataclasses.replace(spec, index=phase_index(position, k))


def open_schedule(
    placed: Sequence[PhaseWindow], items: Sequence[RequestSpec], arrival: str, burstiness: float, seed: int
) -> list[tuple[float, RequestSpec]]:
    """Rate phases: (send offset, request) over the whole schedule, each segment's arrivals drawn from its own start
    at its phase's rate with an RNG seeded by (seed, segment), so both arms get the same schedule."""
    out: list[tuple[float, RequestSpec]] = []
    for pos, w in enumerate(placed):
        assert w.phase.rate_rps is not None
        cfg = ArrivalConfig(w.phase.rate_rps, arrival, burstiness)  # type: ignore[arg-type]
        rng = np.random.default_rng([seed, pos])
        for offset, spec in zip(send_offsets(cfg, rng), phase_prompts(items, pos), strict=False):
            if w.start_s + offset >= w.end_s:
                break
            out.append((w.start_s + offset, spec))
    return out
