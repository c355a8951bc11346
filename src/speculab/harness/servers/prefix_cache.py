"""Prefix-cache hits over a load level, from the engine's own counters (prompt tokens found / looked up).

The counters the adapters name (`PrefixCacheMetrics`) are read from the counter deltas a run records around each
level (`RepeatRun.counter_deltas`, every `_total` counter that moved): an engine that exposes none gives None. Like
every counter, these are server-wide. A counter that did not move is absent from the deltas: a hit counter absent
while its lookups moved means no hits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from speculab.harness.servers.adapters import FALLBACK_ENGINES, adapter_for
from speculab.harness.servers.adapters.base import PrefixCacheMetrics


@dataclass(frozen=True, slots=True)
class PrefixCacheDelta:
    """Prompt tokens looked up in the prefix cache and found there during one level (one repeat)."""

    source: str  # e.g. "vllm:prefix_cache_* counters (server-wide delta)"
    queries: float
    hits: float

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.queries if self.queries > 0 else None


def _from(kind: str, m: PrefixCacheMetrics, deltas: Mapping[str, float]) -> PrefixCacheDelta | None:
    hits = deltas.get(m.hits)
    if m.queries is not None:
        queries = deltas.get(m.queries)
        what = f"{m.hits} / {m.queries}"
    else:
        misses = deltas.get(m.misses or "")
        queries = None if misses is None and hits is None else (misses or 0.0) + (hits or 0.0)
        what = f"{m.hits} / ({m.hits} + {m.misses})"
    if queries is None:
        return None
    return PrefixCacheDelta(f"{kind} counters {what} (server-wide delta)", queries, hits or 0.0)


def prefix_cache_delta(engine: str, deltas: Mapping[str, float]) -> PrefixCacheDelta | None:
    """The level's prefix-cache lookups for an arm of this engine kind; None when no such counter moved."""
    for kind in (engine, *(k for k in FALLBACK_ENGINES if k != engine)):
        m = adapter_for(kind).prefix_cache
        if m is not None:
            found = _from(kind, m, deltas)
            if found is not None:
                return found
    return None
