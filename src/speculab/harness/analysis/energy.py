"""Energy per output token from NVML power samples (pure): what "cheaper" means without a price per GPU-hour.

A repeat's energy per output token is its mean sampled board power over the measured phase divided by its output
tokens/s (watts / (tokens/s) = joules per token): the same measured window the throughput counts, so the two never
disagree. Power is sampled beside memory (`servers.memory`) every `memory_interval_s`, device-wide over the visible
GPUs (NVML has no per-process power): a draft model on the same GPUs is in it, as are other tenants'. Intervals are
over repeats (Student t), the paired comparison a ratio paired by repeat (ABBA order cancels drift), as throughput.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from speculab.harness.records import MemorySample
from speculab.harness.stats import Interval, t_interval

J_PER_KWH = 3.6e6
ENERGY_SOURCE = "NVML board power, visible GPUs summed, sampled over the measured phase"


@dataclass(frozen=True, slots=True)
class EnergyView:
    """An arm's energy at one load, from the repeats with power samples and a throughput."""

    source: str
    mean_power_w: float  # mean over the repeats' samples
    j_per_output_token: Interval  # over repeats
    output_tokens_per_j: Interval
    samples: int  # power readings behind it
    usd_per_mtok: Interval | None = None  # energy cost of 1M output tokens at the run's price per kWh; None without


def mean_power_w(samples: Sequence[MemorySample]) -> float | None:
    """The mean of a repeat's power readings (W); None when it has none (no NVML device)."""
    watts = [s.gpu_power_w for s in samples if s.gpu_power_w is not None and math.isfinite(s.gpu_power_w)]
    return statistics.fmean(watts) if watts else None


def readings(samples: Sequence[MemorySample]) -> int:
    """How many power readings a repeat has."""
    return sum(1 for s in samples if s.gpu_power_w is not None)


def j_per_token(power_w: float, output_tok_s: float) -> float:
    """Joules per output token: watts over tokens/s; NaN without tokens."""
    return power_w / output_tok_s if output_tok_s > 0 else math.nan


def energy_usd_per_mtok(j_per_output_token: float, usd_per_kwh: float) -> float:
    """The electricity of 1M output tokens at a price per kWh ($)."""
    return j_per_output_token * 1e6 / J_PER_KWH * usd_per_kwh


def energy_view(repeats: Sequence[tuple[Sequence[MemorySample], float]], usd_per_kwh: float | None = None
                ) -> EnergyView | None:  # fmt: skip
    """(samples, output tok/s) per repeat -> the arm's energy at one load; None when no repeat has power samples."""
    powered = [(p, tok_s, readings(s)) for s, tok_s in repeats if (p := mean_power_w(s)) is not None and tok_s > 0]
    if not powered:
        return None
    per_token = [j_per_token(p, tok_s) for p, tok_s, _ in powered]
    iv = t_interval(per_token)
    cost = None
    if usd_per_kwh is not None:
        cost = Interval(*(energy_usd_per_mtok(x, usd_per_kwh) for x in (iv.estimate, iv.low, iv.high)),
                        iv.confidence, iv.method, iv.n)  # fmt: skip
    return EnergyView(
        source=ENERGY_SOURCE,
        mean_power_w=statistics.fmean(p for p, _, _ in powered),
        j_per_output_token=iv,
        output_tokens_per_j=t_interval([tok_s / p for p, tok_s, _ in powered if p > 0]),
        samples=sum(n for _, _, n in powered),
        usd_per_mtok=cost,
    )
