"""What the server says about itself during a phase: Prometheus histograms and counters diffed around it.

Where the server exposes them (vLLM's names; the mock server's too), each phase gets the server-side TTFT, queue,
prefill and inter-token means and the prefix-cache counters, so the diagnosis can be checked against the server.
"""

from __future__ import annotations

from speculab.commands.diagnose.causes import (
    ServerPhase,
)
from speculab.harness.servers.adapters import FALLBACK_ENGINES, adapter_for
from speculab.harness.servers.scrape import MetricsSnapshot


def latency_prefixes() -> tuple[str, ...]:
    """The metric prefixes under which engines expose vLLM's latency histograms (their adapters say), vLLM's first."""
    adapters = [adapter_for(kind) for kind in FALLBACK_ENGINES]
    return tuple(a.metric_prefix for a in adapters if a.latency_histograms and a.metric_prefix)


def _hist_mean(before: MetricsSnapshot, after: MetricsSnapshot, base: str) -> tuple[float | None, float | None]:
    s1, c1 = after.total(base + "_sum"), after.total(base + "_count")
    if s1 is None or c1 is None:
        return None, None
    ds, dc = s1 - (before.total(base + "_sum") or 0.0), c1 - (before.total(base + "_count") or 0.0)
    if ds < 0 or dc < 0:  # a reset (the server restarted during the phase): the phase's mean is unknown
        return None, None
    return (ds / dc if dc > 0 else None), dc


def _delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> float | None:
    """after - before of a counter; None when absent, or when it went down (a reset: unknown, not negative)."""
    a = after.total(name)
    d = None if a is None else a - (before.total(name) or 0.0)
    return d if d is None or d >= 0 else None


def server_phase(before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> ServerPhase | None:
    """The server's view of one phase from two scrapes: vLLM names first, then speculab's and SGLang's."""
    if before is None or after is None:
        return None
    for prefix in latency_prefixes():
        ttft, n = _hist_mean(before, after, prefix + "time_to_first_token_seconds")
        prompt = _delta(before, after, prefix + "prompt_tokens_total")
        if ttft is None and prompt is None:
            continue
        queue, _ = _hist_mean(before, after, prefix + "request_queue_time_seconds")
        itl, _ = _hist_mean(before, after, prefix + "inter_token_latency_seconds")
        prefill, _ = _hist_mean(before, after, prefix + "request_prefill_time_seconds")
        if itl is None:
            itl, _ = _hist_mean(before, after, prefix + "time_per_output_token_seconds")
        return ServerPhase(
            ttft_mean_s=ttft,
            ttft_count=n,
            queue_mean_s=queue,
            itl_mean_s=itl,
            prefill_mean_s=prefill,
            prompt_tokens=prompt,
            prefix_cache_queries=_delta(before, after, prefix + "prefix_cache_queries_total"),
            prefix_cache_hits=_delta(before, after, prefix + "prefix_cache_hits_total"),
            source=prefix,
        )
    return None


def merge_phases(a: ServerPhase | None, b: ServerPhase) -> ServerPhase:
    if a is None:
        return b

    def add(x: float | None, y: float | None) -> float | None:
        return None if x is None and y is None else (x or 0.0) + (y or 0.0)

    def wmean(x: float | None, nx: float | None, y: float | None, ny: float | None) -> float | None:
        if x is None or y is None or not nx or not ny:
            return x if y is None else y
        return (x * nx + y * ny) / (nx + ny)

    return ServerPhase(
        ttft_mean_s=wmean(a.ttft_mean_s, a.ttft_count, b.ttft_mean_s, b.ttft_count),
        ttft_count=add(a.ttft_count, b.ttft_count),
        queue_mean_s=wmean(a.queue_mean_s, a.ttft_count, b.queue_mean_s, b.ttft_count),
        itl_mean_s=wmean(a.itl_mean_s, a.ttft_count, b.itl_mean_s, b.ttft_count),
        prefill_mean_s=wmean(a.prefill_mean_s, a.ttft_count, b.prefill_mean_s, b.ttft_count),
        prompt_tokens=add(a.prompt_tokens, b.prompt_tokens),
        prefix_cache_queries=add(a.prefix_cache_queries, b.prefix_cache_queries),
        prefix_cache_hits=add(a.prefix_cache_hits, b.prefix_cache_hits),
        source=b.source,
    )
