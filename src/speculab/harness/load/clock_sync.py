"""How a worker's clock relates to the coordinator's, when they are not the same clock (load.ray_pool).

A client worker times its requests on its own monotonic clock: TTFT, TPOT and chunk gaps are differences of its
own readings and need no synchronisation. Two things do need the coordinator's clock: the common start of an
open-loop schedule (each worker replays its share at offsets from one start), and the record times that the
summary compares across workers (requests in flight, the run's span). So the coordinator estimates each worker's
offset the way NTP does, from round trips: it reads its clock (t0), asks the worker for its own (tw), reads again
(t1). If the reply took as long as the request, tw was read at (t0 + t1) / 2 on the coordinator's clock; whatever
the split, it was read inside [t0, t1]. So offset = tw - (t0 + t1) / 2, within +-(t1 - t0) / 2, and the round trip
with the shortest time gives the tightest bound.

Processes of one boot read one CLOCK_MONOTONIC, unless a time namespace offsets it (containers, CRIU; the boot id
stays the same inside one): so two processes share a clock only when their boot ids AND their time namespaces'
monotonic offsets agree (`clock_id`), and every round trip brackets the worker's reading (t0 <= tw <= t1: true by
causality on one clock, false as soon as the clocks differ by more than a round trip, whatever the mechanism).
Then the offset is exactly 0 and nothing is estimated (`one_clock`); otherwise it is the round trips' estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
TIMENS_OFFSETS = Path("/proc/self/timens_offsets")  # Linux 5.6+: this process's time namespace's clock offsets


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """worker clock - coordinator clock, seconds, known to within +-uncertainty_s."""

    offset_s: float
    uncertainty_s: float
    kind: str  # "same host" (one monotonic clock, exact) | "round trip" (estimated)
    samples: int = 0

    def to_coordinator(self, t_worker: float) -> float:
        return t_worker - self.offset_s

    def to_worker(self, t_coordinator: float) -> float:
        return t_coordinator + self.offset_s

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "offset_s": self.offset_s,
            "uncertainty_s": self.uncertainty_s,
            "samples": self.samples,
        }


SAME_CLOCK = ClockOffset(0.0, 0.0, "same host")


def offset_from_round_trips(samples: Sequence[tuple[float, float, float]]) -> ClockOffset:
    """(t0, tw, t1) per round trip: coordinator before, worker, coordinator after. The shortest round trip wins."""
    if not samples:
        raise ValueError("no round trips to estimate a clock offset from")
    t0, tw, t1 = min(samples, key=lambda s: s[2] - s[0])
    if t1 < t0:
        raise ValueError(f"a round trip ended before it began ({t0} -> {t1}): not one monotonic clock")
    return ClockOffset(tw - (t0 + t1) / 2, (t1 - t0) / 2, "round trip", len(samples))


def boot_id() -> str | None:
    """This host's boot id (Linux): equal on two processes means they read the same CLOCK_MONOTONIC."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def monotonic_offset() -> str | None:
    """This process's time namespace's CLOCK_MONOTONIC offset ("seconds nanoseconds"; "0 0" outside one, and on a
    kernel without time namespaces); None when it cannot be told."""
    try:
        text = TIMENS_OFFSETS.read_text()
    except FileNotFoundError:  # a kernel before 5.6 has no time namespaces: nothing can offset the clock
        return "0 0"
    except OSError:
        return None
    for line in text.splitlines():
        name, *value = line.split()
        if name in ("monotonic", "1"):  # the clock's name, or its id (CLOCK_MONOTONIC = 1) on some kernels
            return " ".join(value)
    return None


def clock_id() -> str | None:
    """What this process's CLOCK_MONOTONIC is: its boot and its time namespace's offset. Two processes with one
    clock_id read one clock; None when either part cannot be read (then nothing is assumed)."""
    boot, offset = boot_id(), monotonic_offset()
    return None if boot is None or offset is None else f"{boot} monotonic+{offset}"


def one_clock(here: str | None, there: str | None, samples: Sequence[tuple[float, float, float]]) -> bool:
    """The worker reads the coordinator's own clock: one clock_id, and every (t0, tw, t1) round trip brackets the
    worker's reading. The check needs no trust in the ids: a clock that differs by more than a round trip fails
    it."""
    if here is None or here != there or not samples:
        return False
    return all(t0 <= tw <= t1 for t0, tw, t1 in samples)
