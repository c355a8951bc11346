"""How a worker's clock relates to the coordinator's, when they are not the same clock (load.ray_pool).

A client worker times its requests on its own monotonic clock: TTFT, TPOT and chunk gaps are differences of its
own readings and need no synchronisation. Two things do need the coordinator's clock: the common start of an
open-loop schedule (each worker replays its share at offsets from one start), and the record times that the
summary compares across workers (requests in flight, the run's span). So the coordinator estimates each worker's
offset the way NTP does, from round trips: it reads its clock (t0), asks the worker for its own (tw), reads again
(t1). If the reply took as long as the request, tw was read at (t0 + t1) / 2 on the coordinator's clock; whatever
the split, it was read inside [t0, t1]. So offset = tw - (t0 + t1) / 2, within +-(t1 - t0) / 2, and the round trip
with the shortest time gives the tightest bound.

Processes on one host read one CLOCK_MONOTONIC (the kernel's boot id tells one boot from another): then the
offset is exactly 0 and nothing is estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


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
