"""Prometheus metrics for the engine server: own registry, prefix `speculab:`, vLLM's names where they overlap.

Gauges and token counters are read from the engine when scraped (the engine owns those numbers);
latency histograms are observed by the request handlers as events reach them:
- time_to_first_token_seconds: request received -> first output event carrying tokens;
- inter_token_latency_seconds: per generated token after the first, the gap between consecutive output
  events divided evenly over the tokens the later event carries (several under speculation);
- e2e_request_latency_seconds: request received -> final event;
- request_queue_time_seconds / request_prefill_time_seconds / request_decode_time_seconds: a finished
  request's phases on the engine's clock (arrival -> slot assigned -> first token -> last token).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psutil
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from speculab.engine.async_engine import AsyncEngine
from speculab.engine.sequence import PhaseTimes

PREFIX = "speculab:"
_LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
_ITL_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
)


class _EngineCollector(Collector):
    """Reads the engine's live numbers at scrape time."""

    def __init__(self, engine: AsyncEngine, model_name: str):
        self.engine = engine
        self.model_name = model_name
        self.process = psutil.Process()

    def collect(self) -> Iterator[Metric]:
        e = self.engine.engine
        labels = ["model_name"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(PREFIX + name, doc, labels=labels)
            g.add_metric([self.model_name], value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(PREFIX + name, doc, labels=labels)
            c.add_metric([self.model_name], value)
            return c

        running = e.num_running
        # Admitted but not yet holding a slot: the scheduler's queue plus requests the engine thread has not
        # picked up yet (they arrive while a step runs).
        waiting = max(self.engine.num_in_flight - running, e.num_waiting)
        yield gauge("num_requests_running", "Requests holding a KV cache slot.", running)
        yield gauge("num_requests_waiting", "Requests queued for a slot.", waiting)
        yield gauge("kv_cache_usage_perc", "Fraction of KV cache positions holding live tokens (0-1).", e.kv_usage())
        yield gauge("kv_cache_bytes", "Bytes preallocated for the KV cache.", e.runner.cache.nbytes)
        yield gauge("process_resident_memory_bytes", "Server process resident memory.", self.process.memory_info().rss)
        yield counter("prompt_tokens", "Prompt tokens prefilled.", e.num_prompt_tokens_total)
        yield counter("generation_tokens", "Tokens generated.", e.num_generation_tokens_total)


class ServerMetrics:
    def __init__(self, engine: AsyncEngine, model_name: str, clock: Callable[[], float]):
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        self.clock = clock
        self.registry.register(_EngineCollector(engine, model_name))
        labels = ["model_name"]
        self.ttft = self._histogram("time_to_first_token_seconds", "Time to first token.", _LATENCY_BUCKETS_S)
        self.itl = self._histogram(
            "inter_token_latency_seconds", "Time per generated token after the first.", _ITL_BUCKETS_S
        )
        self.e2e = self._histogram(
            "e2e_request_latency_seconds", "Request received to final token.", _LATENCY_BUCKETS_S
        )
        phase = [
            ("queue", "Arrival to cache slot assigned."),
            ("prefill", "Slot assigned to first token."),
            ("decode", "First token to last token."),
        ]
        self.phases = {
            name: self._histogram(f"request_{name}_time_seconds", doc, _LATENCY_BUCKETS_S) for name, doc in phase
        }
        self._success = Counter(
            PREFIX + "request_success",
            "Finished requests by finish reason.",
            [*labels, "finished_reason"],
            registry=self.registry,
        )
        self._errors = Counter(
            PREFIX + "request_errors",
            "Refused or failed requests by HTTP status.",
            [*labels, "status"],
            registry=self.registry,
        )

    def _histogram(self, name: str, doc: str, buckets: Sequence[float]) -> Any:
        """One `speculab:` histogram labelled with this server's model name."""
        return Histogram(PREFIX + name, doc, ["model_name"], registry=self.registry, buckets=buckets).labels(
            self.model_name
        )

    def tracker(self) -> RequestTracker:
        return RequestTracker(self, self.clock())

    def error(self, status: int) -> None:
        self._errors.labels(self.model_name, str(status)).inc()

    def finished(self, reason: str) -> None:
        self._success.labels(self.model_name, reason).inc()


class RequestTracker:
    """Observes one request's latencies as its output events arrive."""

    def __init__(self, metrics: ServerMetrics, start_s: float):
        self.m = metrics
        self.start_s = start_s
        self.last_s: float | None = None
        self.done = False

    def on_tokens(self, n: int) -> None:
        if n <= 0:
            return
        now = self.m.clock()
        if self.last_s is None:
            self.m.ttft.observe(now - self.start_s)
        else:
            per_token = (now - self.last_s) / n
            for _ in range(n):
                self.m.itl.observe(per_token)
        self.last_s = now

    def on_phases(self, phases: PhaseTimes | None) -> None:
        if phases is not None:
            self.m.phases["queue"].observe(phases.queue_s)
            self.m.phases["prefill"].observe(phases.prefill_s)
            self.m.phases["decode"].observe(phases.decode_s)

    def on_error(self) -> None:
        """The request failed (counted in request_errors_total by its status): no latency, no finish reason."""
        self.done = True

    def on_finish(self, reason: str) -> None:
        if self.done:
            return
        self.done = True
        if reason != "abort":  # an abandoned request has no end-to-end latency
            self.m.e2e.observe(self.m.clock() - self.start_s)
        self.m.finished(reason)
