"""Prometheus /metrics scraping and the server-side numbers derived from before/after snapshots.

A snapshot keeps every sample (name, labels, value) so reports can be recomputed later. Derived numbers are pure
functions of two snapshots. Counters are summed over all label sets but the ones asked for (several engines or
models behind one endpoint add up), so every figure here is server-wide: traffic from anyone else during the
window is included.

Speculative-decoding counters (one "draft" = one verification step of one request):
- vLLM:      vllm:spec_decode_num_drafts_total, ..._num_draft_tokens_total, ..._num_accepted_tokens_total,
             ..._num_accepted_tokens_per_pos_total{position}
- speculab:  speculab:spec_decode_* with the same names and semantics
- SGLang:    sglang:spec_accept_length / sglang:spec_accept_rate gauges (its latest batch; read, not diffed)
acceptance rate = accepted / draft tokens; mean acceptance length = 1 + accepted / drafts (the bonus token
included); per-position acceptance = accepted at position p / drafts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from speculab.bench.engines.acceptance import counter_rates

log = logging.getLogger(__name__)

# Counter families with vLLM's spec-decode semantics, in the order they are looked for.
SPEC_DECODE_PREFIXES = ("vllm:", "speculab:")
_DRAFTS = "spec_decode_num_drafts"
_DRAFT_TOKENS = "spec_decode_num_draft_tokens"
_ACCEPTED = "spec_decode_num_accepted_tokens"
_ACCEPTED_PER_POS = "spec_decode_num_accepted_tokens_per_pos"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
SGLANG_ACCEPT_RATE = "sglang:spec_accept_rate"


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One exposed sample. Labels as sorted (name, value) pairs, so samples are hashable and comparable."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Everything one /metrics scrape returned, with the monotonic time of the scrape (seconds)."""

    t_s: float
    samples: tuple[MetricSample, ...]
    types: tuple[tuple[str, str], ...] = ()  # (family name, type) as the exposition declared them

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def resolve(self, name: str) -> str | None:
        """The exposed sample name for `name`, with or without the `_total` suffix; None when absent."""
        base = name.removesuffix("_total")
        names = self.names()
        for candidate in (name, f"{base}_total", base):
            if candidate in names:
                return candidate
        return None

    def select(self, name: str, **labels: str) -> list[MetricSample]:
        """Samples of `name` (suffix-tolerant) whose labels include `labels`."""
        exposed = self.resolve(name)
        if exposed is None:
            return []
        want = set(labels.items())
        return [s for s in self.samples if s.name == exposed and want <= set(s.labels)]

    def total(self, name: str, **labels: str) -> float | None:
        """Sum of the matching samples over all other labels; None when the metric is absent."""
        chosen = self.select(name, **labels)
        return sum(s.value for s in chosen) if chosen else None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """Sum of `name` grouped by one label's value (e.g. position), over all other labels."""
        out: dict[str, float] = {}
        for s in self.select(name):
            key = s.label(label)
            if key is not None:
                out[key] = out.get(key, 0.0) + s.value
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "samples": [{"name": s.name, "labels": dict(s.labels), "value": s.value} for s in self.samples],
            "types": dict(self.types),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetricsSnapshot:
        samples = tuple(
            MetricSample(s["name"], tuple(sorted(s["labels"].items())), float(s["value"])) for s in d["samples"]
        )
        return cls(t_s=d["t_s"], samples=samples, types=tuple(d.get("types", {}).items()))


def parse_metrics(text: str, t_s: float = 0.0) -> MetricsSnapshot:
    """Parse Prometheus text exposition; raises ValueError when it is not that format."""
    samples: list[MetricSample] = []
    types: list[tuple[str, str]] = []
    for family in text_string_to_metric_families(text):
        types.append((family.name, family.type))
        for s in family.samples:
            samples.append(MetricSample(s.name, tuple(sorted(s.labels.items())), float(s.value)))
    return MetricsSnapshot(t_s=t_s, samples=tuple(samples), types=tuple(types))


def metrics_url(base_url: str) -> str:
    """/metrics lives at the server root: strip a trailing slash and a `/v1` from the base URL."""
    return base_url.rstrip("/").removesuffix("/v1") + "/metrics"


async def scrape_metrics(
    session: aiohttp.ClientSession,
    base_url: str,
    timeout_s: float = 5.0,
    clock: Callable[[], float] = time.perf_counter,
) -> MetricsSnapshot | None:
    """GET /metrics and parse it; None when the server has no (parseable) /metrics or it did not answer in time."""
    url = metrics_url(base_url)
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                log.debug("no metrics at %s: HTTP %s", url, resp.status)
                return None
            text = await resp.text(errors="replace")
            t_s = clock()
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        log.debug("no metrics at %s: %r", url, e)
        return None
    try:
        return parse_metrics(text, t_s=t_s)
    except ValueError as e:  # an HTML page or other non-Prometheus body at /metrics
        log.debug("metrics at %s are not Prometheus text: %s", url, e)
        return None


# --------------------------------------------------------------------------------------------------------------
# Deltas


def counter_deltas(before: MetricsSnapshot, after: MetricsSnapshot, names: Iterable[str]) -> dict[str, float | None]:
    """after - before of each named counter, summed over labels. A counter absent before but present after counts
    from zero (label sets appear on first use). None when absent after, or when the counter went backwards (a
    reset: the server restarted between the scrapes)."""
    out: dict[str, float | None] = {}
    for name in names:
        a, b = after.total(name), before.total(name) or 0.0
        if a is None:
            out[name] = None
        elif a < b:
            log.warning("counter %s went from %s to %s between scrapes (reset?): no delta", name, b, a)
            out[name] = None
        else:
            out[name] = a - b
    return out


@dataclass(frozen=True, slots=True)
class SpecDecodeStats:
    """Speculative-decoding acceptance over a window (or as last reported, for gauge sources)."""

    source: str  # which metrics, and that they are server-wide
    acceptance_rate: float | None  # accepted / draft tokens
    acceptance_length: float | None  # 1 + accepted / drafts: tokens per verification step, bonus included
    per_position: tuple[float, ...] = ()  # accepted at position p / drafts, p = 0..k-1; () when unknown
    num_drafts: int | None = None
    num_draft_tokens: int | None = None
    num_accepted_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "acceptance_rate": self.acceptance_rate,
            "acceptance_length": self.acceptance_length,
            "per_position": list(self.per_position),
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted_tokens,
            "source": self.source,
        }


def spec_decode_delta(before: MetricsSnapshot, after: MetricsSnapshot) -> SpecDecodeStats | None:
    """Acceptance over the window between two scrapes; None when there is nothing to report (see the reason via
    `spec_decode_delta_with_reason`)."""
    return spec_decode_delta_with_reason(before, after)[0]


def spec_decode_delta_with_reason(
    before: MetricsSnapshot, after: MetricsSnapshot
) -> tuple[SpecDecodeStats | None, str | None]:
    """(stats, None) or (None, why not): no counters, no speculative steps in the window, or a counter reset."""
    for prefix in SPEC_DECODE_PREFIXES:
        if after.resolve(prefix + _DRAFTS) is not None:
            return _counter_stats(before, after, prefix)
    if after.resolve(SGLANG_ACCEPT_LENGTH) is not None:
        return _sglang_stats(after)
    return None, "the server exposes no speculative-decoding metrics (vllm:, speculab: or sglang:)"


def _counter_stats(
    before: MetricsSnapshot, after: MetricsSnapshot, prefix: str
) -> tuple[SpecDecodeStats | None, str | None]:
    names = [prefix + n for n in (_DRAFTS, _DRAFT_TOKENS, _ACCEPTED)]
    for name in names:
        a, b = after.total(name), before.total(name)
        if a is None:
            return None, f"{name}_total is missing from the metrics"
        if b is not None and a < b:
            return None, f"{name}_total went backwards ({b:g} -> {a:g}): the server restarted between scrapes"
    # A counter absent before the window but present after it started at zero (lazily registered metrics).
    drafts, draft_tokens, accepted = ((after.total(n) or 0.0) - (before.total(n) or 0.0) for n in names)
    if drafts <= 0:
        return None, f"{prefix}spec_decode counters did not move: no speculative steps during the window"
    pos_after = after.by_label(prefix + _ACCEPTED_PER_POS, "position")
    pos_before = before.by_label(prefix + _ACCEPTED_PER_POS, "position")
    per_position: list[float] = []
    for pos in sorted(pos_after, key=_position_key):
        d = pos_after[pos] - pos_before.get(pos, 0.0)
        if d < 0:
            return None, f"{prefix}{_ACCEPTED_PER_POS}_total went backwards: the server restarted between scrapes"
        per_position.append(d / drafts)
    rate, length = counter_rates(drafts, draft_tokens, accepted)
    stats = SpecDecodeStats(
        source=f"{prefix}spec_decode_* counters, server-wide delta",
        acceptance_rate=rate,
        acceptance_length=length,
        per_position=tuple(per_position),
        num_drafts=round(drafts),
        num_draft_tokens=round(draft_tokens),
        num_accepted_tokens=round(accepted),
    )
    return stats, None


def _position_key(pos: str) -> tuple[int, str]:
    return (int(pos), pos) if pos.isdigit() else (1 << 30, pos)


def _sglang_stats(after: MetricsSnapshot) -> tuple[SpecDecodeStats | None, str | None]:
    """SGLang reports gauges for its latest batch, one per rank: averaged over ranks, read after the window."""
    lengths = [s.value for s in after.select(SGLANG_ACCEPT_LENGTH)]
    rates = [s.value for s in after.select(SGLANG_ACCEPT_RATE)]
    length = sum(lengths) / len(lengths)
    if length <= 0:
        return None, f"{SGLANG_ACCEPT_LENGTH} is {length:g}: no speculative steps reported"
    stats = SpecDecodeStats(
        source="sglang:spec_accept_length/spec_accept_rate gauges, server-wide, latest batch (read, not a delta)",
        acceptance_rate=sum(rates) / len(rates) if rates else None,
        acceptance_length=length,
    )
    return stats, None
