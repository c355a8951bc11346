"""The mock server's state: vLLM-named Prometheus metrics, admission (slots, waiting/running), cold start,
serial prefill, the prefix cache, the seeded fault, jitter and acceptance draws, and the step-batched mode's engine
loop. `mock_server` holds the HTTP side."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric

from speculab.errors import UserError
from speculab.mock.script import Fault, MockConfig, PrefixCache
from speculab.mock.timing import BatchedChunks, PacedChunks, StepLoop, sleep_until_on_loop
from speculab.mock.truth_log import TruthLog
from speculab.serving.exhaustion import ConnectionCollector, ConnectionCounters

# --------------------------------------------------------------------------------------------------------------
# Server state: metrics, admission, cold start, prefix cache, fault draws

# the connection layer's counters on the mock's /metrics: not `speculab:`, which would make the mock read as speculab's
# engine to engine detection while it poses as vLLM
MOCK_PREFIX = "speculab_mock:"


class ChunkCounters:
    """Counters bumped on every chunk, kept as plain ints and exported at scrape time: prometheus_client's locked
    `inc()`, five times per chunk, would cost as much as writing the chunk."""

    def __init__(self, model: str, k: int):
        self.model, self.k = model, k
        self.generation_tokens = 0
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.accepted_pos = [0] * k

    def chunk(self, n_tokens: int, step_tokens: int | None) -> None:
        """A chunk of n_tokens was emitted by one verification step that yielded step_tokens (accepted + 1 bonus,
        accepted at positions 0..accepted-1; step_tokens > n_tokens when max_tokens cut the step short); None: by no
        verification step (the step-batched mode's first token, from prefill alone)."""
        self.generation_tokens += n_tokens
        if self.k > 0 and step_tokens is not None:
            accepted = step_tokens - 1
            self.drafts += 1
            self.draft_tokens += self.k
            self.accepted += accepted
            for p in range(accepted):
                self.accepted_pos[p] += 1

    def collect(self) -> Iterator[Metric]:
        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            fam = CounterMetricFamily(name, doc, labels=["model_name"])
            fam.add_metric([self.model], value)
            return fam

        yield counter("vllm:generation_tokens", "Generated tokens.", self.generation_tokens)
        if self.k == 0:
            return
        yield counter("vllm:spec_decode_num_drafts", "Verification steps (one per request per step).", self.drafts)
        yield counter("vllm:spec_decode_num_draft_tokens", "Proposed tokens.", self.draft_tokens)
        yield counter("vllm:spec_decode_num_accepted_tokens", "Accepted tokens.", self.accepted)
        per_pos = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens by draft position.",
            labels=["model_name", "position"],
        )
        for p, v in enumerate(self.accepted_pos):
            per_pos.add_metric([self.model, str(p)], v)
        yield per_pos


class MockMetrics:
    """vLLM-named Prometheus metrics in the app's own registry (several apps can share one process).

    Label children are bound once: `.labels()` per request would cost more than the request's own work."""

    def __init__(self, cfg: MockConfig):
        self.registry = r = CollectorRegistry()
        self.model = model = cfg.models[0]
        lab = ["model_name"]

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, lab, registry=r).labels(model)

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, lab, registry=r).labels(model)

        def histogram(name: str, doc: str) -> Any:
            return Histogram(name, doc, lab, registry=r).labels(model)

        self.running = gauge("vllm:num_requests_running", "Requests being generated.")
        self.waiting = gauge("vllm:num_requests_waiting", "Requests queued for a slot.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.")
        self.chunks = ChunkCounters(model, cfg.num_speculative_tokens)
        r.register(self.chunks)
        self._success = Counter("vllm:request_success", "Finished requests.", [*lab, "finished_reason"], registry=r)
        for reason in ("stop", "length"):
            self._success.labels(model, reason)
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Arrival to first chunk.")
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "Arrival to last chunk.")
        self.queue = histogram("vllm:request_queue_time_seconds", "Arrival to admission.")
        if cfg.prefix_cache:
            self.cache_queries = counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.")
            self.cache_hits = counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.")

    def success(self, finish_reason: str) -> None:
        self._success.labels(self.model, finish_reason).inc()


class MockState:
    def __init__(self, cfg: MockConfig, counters: ConnectionCounters | None = None):
        self.cfg = cfg
        self.metrics = MockMetrics(cfg)
        connections = ConnectionCollector(counters or ConnectionCounters(), cfg.models[0], MOCK_PREFIX)
        self.metrics.registry.register(connections)
        self.fault_rng = random.Random(cfg.seed)
        self.jitter_rng = random.Random(cfg.seed + 1)  # separate: jitter settings leave the fault draws unchanged
        self.acceptance_rng = random.Random(cfg.seed + 2)  # separate too: the step-batched mode's acceptance draws
        self.n_requests = 0
        self.slots = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
        self.running = 0
        self.switches = 0  # times the requests running rose above cfg.switch_above (PacedChunks stalls once each)
        self.waiting = 0
        self.warm_until: float | None = None  # None: never warmed
        self.last_done_t: float | None = None  # loop time the last request ended
        self.prefill_free_at = 0.0  # serial_prefill: when the prefill engine finishes the work queued so far
        self.cache = PrefixCache(cfg.prefix_cache_block_tokens, cfg.prefix_cache_max_blocks)
        self.shutdown = asyncio.Event()
        self.cache_resets = 0  # POST /reset_prefix_cache answered (dev_mode)
        self.send_log: list[dict[str, Any]] = []  # cfg.record_send_times: one entry per streamed request
        self.truth = _open_truth_log(cfg.truth_log) if cfg.truth_log else None  # closed at the app's cleanup
        self.steps = (  # the step-batched mode's engine loop; None: each stream paces itself
            StepLoop(cfg, self.acceptance_rng, lambda: self.running, self._wait_until) if cfg.step_batched else None
        )

    async def _wait_until(self, deadline: float) -> None:
        await sleep_until_on_loop(deadline, self.cfg.spin_s)

    def chunk_source(self, first_due: float, n_tokens: int) -> PacedChunks | BatchedChunks:
        """Where a request's chunks come from once it is ready at `first_due` (prefill done): its own pace, or the
        engine loop's steps."""
        if self.steps is None:
            return PacedChunks(self.cfg, first_due, n_tokens, lambda: self.running, lambda: self.switches)
        return BatchedChunks(self.steps, first_due, n_tokens, self._wait_until)

    def next_id(self) -> int:
        self.n_requests += 1
        return self.n_requests

    def draw_fault(self) -> tuple[Fault | None, float]:
        """(fault or None, position draw in [0, 1)). One uniform partitioned by the rates keeps them exclusive."""
        u, pos = self.fault_rng.random(), self.fault_rng.random()
        acc = 0.0
        for fault, rate in self.cfg.fault_rates.items():
            acc += rate
            if u < acc:
                return fault, pos
        return None, pos

    @contextlib.asynccontextmanager
    async def admission(self, t_arrival: float) -> AsyncIterator[float]:
        """Wait for a slot (counted as waiting), then hold it (counted as running) until the request ends.
        Yields the admission time: the arrival time itself when a slot was free, so that the request's own
        set-up work never shifts its schedule."""
        m = self.metrics
        t_admit = t_arrival
        self.waiting += 1
        m.waiting.set(self.waiting)
        try:
            if self.slots is not None:
                if self.slots.locked():
                    await self.slots.acquire()
                    t_admit = asyncio.get_running_loop().time()
                else:
                    await self.slots.acquire()  # free: returns at once
        finally:
            self.waiting -= 1
            m.waiting.set(self.waiting)
        self.running += 1
        m.running.set(self.running)
        if self.cfg.switch_above is not None and self.running == self.cfg.switch_above + 1:
            self.switches += 1
        try:
            yield t_admit
        finally:
            self.running -= 1
            m.running.set(self.running)
            self.last_done_t = asyncio.get_running_loop().time()
            if self.slots is not None:
                self.slots.release()

    def prefill_done(self, ready: float, tokens: int) -> float:
        """When this request's prefill of `tokens` ends, if it can start at `ready` (queued behind others' when
        prefill is serial)."""
        work = tokens * self.cfg.prefill_s_per_token
        if not self.cfg.serial_prefill:
            return ready + work
        self.prefill_free_at = max(ready, self.prefill_free_at) + work
        return self.prefill_free_at

    def cold_start_wait(self, now: float) -> float:
        """Seconds this admitted request waits for the model to be (re)loaded. Call with self counted running."""
        cfg = self.cfg
        idle = (
            self.warm_until is not None
            and cfg.idle_reset_s is not None
            and self.running == 1
            and now - max(self.last_done_t or 0.0, self.warm_until) >= cfg.idle_reset_s
        )
        if self.warm_until is None or idle:
            self.warm_until = now + cfg.cold_start_s
        return max(0.0, self.warm_until - now)

    def cached_tokens(self, prompt_words: list[str]) -> int:
        if not self.cfg.prefix_cache:
            return 0
        cached = self.cache.lookup_and_insert(prompt_words)
        m = self.metrics
        m.cache_queries.inc(len(prompt_words))
        m.cache_hits.inc(cached)
        return cached


def _open_truth_log(path: str) -> TruthLog:
    try:
        return TruthLog.open(path)
    except OSError as e:
        raise UserError(
            f"cannot write the truth log {path!r} ({e.strerror}): give --truth-log a writable path"
        ) from None
