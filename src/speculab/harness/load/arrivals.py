"""Pure send-time schedules for open-loop load: offsets in seconds from the start of the measured run.

The RNG is injected (a `numpy.random.Generator`), so the same seed gives the same schedule in every arm.
Gamma inter-arrival times with shape = burstiness and mean 1/rate: burstiness 1 is Poisson, below 1 is
burstier (clumps and lulls at the same mean rate), above 1 is more regular. The first request goes at 0.
Closed-loop load has no schedule: each of N workers sends its next request when the previous one finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from speculab.errors import UserError, did_you_mean

ArrivalKind = Literal["poisson", "constant", "gamma"]
ARRIVAL_KINDS: tuple[str, ...] = ("poisson", "constant", "gamma")


@dataclass(frozen=True, slots=True)
class ArrivalConfig:
    rate_rps: float
    kind: ArrivalKind = "poisson"
    burstiness: float = 1.0  # gamma shape; only used by "gamma"

    def __post_init__(self) -> None:
        if not self.rate_rps > 0 or not np.isfinite(self.rate_rps):
            raise UserError(f"--rate must be a positive number of requests per second, got {self.rate_rps}")
        if self.kind not in ARRIVAL_KINDS:
            raise UserError(
                f"--arrival must be one of {', '.join(ARRIVAL_KINDS)}, got {self.kind!r}"
                + did_you_mean(self.kind, ARRIVAL_KINDS)
            )
        if not self.burstiness > 0:
            raise UserError(f"--burstiness must be > 0, got {self.burstiness}")
        if self.burstiness != 1.0 and self.kind != "gamma":
            # silently ignoring it would run a Poisson (or constant) load the user did not ask for
            raise UserError(f"--burstiness shapes gamma arrivals only; add --arrival gamma (not {self.kind})")


def intervals(cfg: ArrivalConfig, rng: np.random.Generator) -> Iterator[float]:
    """Endless inter-arrival times, seconds."""
    mean = 1.0 / cfg.rate_rps
    while True:
        if cfg.kind == "constant":
            yield mean
        elif cfg.kind == "poisson":
            yield float(rng.exponential(mean))
        else:
            yield float(rng.gamma(cfg.burstiness, mean / cfg.burstiness))


def send_offsets(cfg: ArrivalConfig, rng: np.random.Generator) -> Iterator[float]:
    """Endless send offsets from the run start: 0, then cumulative inter-arrival times."""
    t = 0.0
    gaps = intervals(cfg, rng)
    while True:
        yield t
        t += next(gaps)


def schedule(cfg: ArrivalConfig, n: int, rng: np.random.Generator) -> tuple[float, ...]:
    """The first n send offsets."""
    it = send_offsets(cfg, rng)
    return tuple(next(it) for _ in range(n))
