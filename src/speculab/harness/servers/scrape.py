"""Prometheus /metrics scraping: snapshots that keep every sample, and pure counter deltas between two of them.

A snapshot keeps every sample (name, labels, value) so reports can be recomputed later. Counters are summed over
all label sets but the ones asked for (several engines or models behind one endpoint add up), so every figure here
is server-wide: traffic from anyone else during the window is included. Speculative acceptance from these
snapshots is `speculab.harness.servers.acceptance`'s job.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from speculab.harness.client.body import MAX_METRICS_BYTES, BodyTooLarge, read_body

log = logging.getLogger(__name__)


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


def _only(text: str, families: Iterable[str]) -> str:
    """The lines of an exposition that belong to `families` (a family's samples carry its name and a suffix:
    `_total`, `_bucket`, `_sum`, `_count`, `_created`): the sample lines and their `# HELP` / `# TYPE` lines. Which
    family a line belongs to is read from its first word, so no other line is parsed at all."""
    prefixes = tuple({f.removesuffix("_total") for f in families if f})
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            words = line.split(None, 3)
            if len(words) > 2 and words[1] in ("HELP", "TYPE") and words[2].startswith(prefixes):
                kept.append(line)
        elif line.lstrip().startswith(prefixes):
            kept.append(line)
    return "\n".join(kept) + "\n"


def parse_metrics(text: str, t_s: float = 0.0, only: Iterable[str] | None = None) -> MetricsSnapshot:
    """Parse Prometheus text exposition; raises ValueError when it is not that format. A sample whose value is not
    a finite number (NaN, +Inf, past 1e300) is left out: no delta or gauge can be taken from it, and a counter left
    out reads as "not exposed" rather than as a number. `only`: the families to keep (names, a `_total` optional),
    for a caller that reads a few gauges each second: prometheus_client's parser is pure Python, and an engine's page
    runs to hundreds of lines of histograms (a family whose name begins with one asked for is kept too)."""
    if only is not None:
        text = _only(text, only)
    samples: list[MetricSample] = []
    types: list[tuple[str, str]] = []
    try:
        for family in text_string_to_metric_families(text):
            types.append((family.name, family.type))
            for s in family.samples:
                v = float(s.value)
                if math.isfinite(v) and abs(v) <= 1e300:
                    samples.append(MetricSample(s.name, tuple(sorted(s.labels.items())), v))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
        # prometheus_client's parser raises more than ValueError on text that is not an exposition at all
        raise ValueError(f"not Prometheus text: {type(e).__name__}: {str(e)[:200]}") from None
    return MetricsSnapshot(t_s=t_s, samples=tuple(samples), types=tuple(types))


def metrics_url(base_url: str) -> str:
    """/metrics lives at the server root: strip a trailing slash and a `/v1` from the base URL."""
    return base_url.rstrip("/").removesuffix("/v1") + "/metrics"


async def scrape_metrics(
    session: aiohttp.ClientSession,
    base_url: str,
    timeout_s: float = 5.0,
    clock: Callable[[], float] = time.perf_counter,
    api_key: str | None = None,
    only: Iterable[str] | None = None,
) -> MetricsSnapshot | None:
    """GET /metrics and parse it; None when the server has no (parseable) /metrics or it did not answer in time.
    The endpoint's API key goes along when there is one: servers may keep /metrics behind it (speculab serve
    --metrics-private). `only`: the families to keep (`parse_metrics`)."""
    url = metrics_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s), headers=headers) as resp:
            if resp.status != 200:
                log.debug("no metrics at %s: HTTP %s", url, resp.status)
                return None
            text = (await read_body(resp, MAX_METRICS_BYTES)).decode("utf-8", errors="replace")
            t_s = clock()
    except (aiohttp.ClientError, asyncio.TimeoutError, BodyTooLarge) as e:
        log.debug("no metrics at %s: %r", url, e)
        return None
    try:
        return parse_metrics(text, t_s=t_s, only=only)
    except ValueError as e:  # an HTML page or other non-Prometheus body at /metrics
        log.debug("metrics at %s are not Prometheus text: %s", url, e)
        return None


# --------------------------------------------------------------------------------------------------------------
# Deltas


def counter_deltas(
    before: MetricsSnapshot, after: MetricsSnapshot, names: Iterable[str] | None = None
) -> dict[str, float | None]:
    """after - before of each named counter, summed over labels; without `names`, of every `_total` counter that
    moved (for the record). A counter absent before but present after counts from zero (label sets appear on first
    use). None when absent after, or when the counter went backwards (a reset: the server restarted between the
    scrapes)."""
    moved_only = names is None
    if names is None:
        names = sorted({s.name for s in after.samples if s.name.endswith("_total")})
    out: dict[str, float | None] = {}
    for name in names:
        if moved_only and after.total(name) == (before.total(name) or 0.0):
            continue
        a, b = after.total(name), before.total(name) or 0.0
        if a is None:
            out[name] = None
        elif a < b:
            log.warning("counter %s went from %s to %s between scrapes (reset?): no delta", name, b, a)
            out[name] = None
        else:
            out[name] = a - b
    return out
