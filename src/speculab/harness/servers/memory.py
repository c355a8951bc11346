"""Memory while a load level runs: GPU memory through NVML (per process where the driver shows our processes,
else the whole device), the server process tree's RSS (CPU engines), and the engine's KV-cache usage gauge; and,
beside them, the GPUs' power draw (NVML), which the verdict turns into energy per output token.

NVML comes from the optional `nvidia-ml-py` package (`import pynvml`); without it, or without a GPU, GPU readings
are simply absent. Nothing here fails a run: a reading that cannot be taken is None.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import aiohttp

from speculab.harness.records import MemorySample
from speculab.harness.servers.adapters import FALLBACK_ENGINES, adapter_for
from speculab.harness.servers.adapters.base import AcceptanceMetrics
from speculab.harness.servers.scrape import MetricsSnapshot, scrape_metrics

# KV-cache usage gauges (fraction 0..1), first present wins, as their adapters name them: the engines whose metrics
# any server may expose, in that order (vLLM's new and old names, speculab's, SGLang's).
KV_USAGE_GAUGES = tuple(name for kind in FALLBACK_ENGINES for name in adapter_for(kind).kv_usage_gauges)


def kv_usage(snapshot: MetricsSnapshot | None) -> float | None:
    """The engine's KV-cache usage fraction from a /metrics snapshot (max over label sets), or None."""
    if snapshot is None:
        return None
    for name in KV_USAGE_GAUGES:
        vals = [s.value for s in snapshot.select(name)]
        if vals:
            return max(vals)
    return None


class GpuMemory:
    """NVML readings. `open()` returns None when pynvml is missing or no GPU is visible."""

    def __init__(self, nvml: ModuleType, handles: list[Any]):
        self.nvml, self.handles = nvml, handles

    @classmethod
    def open(cls, nvml: ModuleType | None = None) -> GpuMemory | None:
        try:
            if nvml is None:
                import pynvml as nvml  # optional dependency: nvidia-ml-py
            nvml.nvmlInit()
            n = nvml.nvmlDeviceGetCount()
            if n == 0:
                nvml.nvmlShutdown()
                return None
            return cls(nvml, [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)])
        except Exception:  # ImportError, NVMLError (no driver): no GPU readings
            return None

    def read(self, pids: Iterable[int] | None) -> tuple[float | None, str]:
        """(bytes, scope): the named processes' GPU memory summed over devices ("process"), or, when the driver
        does not show them (containers hide host pids) or no pids are known, the devices' used memory ("device")."""
        want = set(pids or ())
        if want:
            total, seen = 0.0, False
            for h in self.handles:
                procs: list[Any] = []
                for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                    with contextlib.suppress(Exception):
                        procs += list(getattr(self.nvml, fn)(h))
                for p in procs:
                    used = getattr(p, "usedGpuMemory", None)
                    if p.pid in want and used is not None:
                        total += float(used)
                        seen = True
            if seen:
                return total, "process"
        used_total, any_dev = 0.0, False
        for h in self.handles:
            with contextlib.suppress(Exception):
                used_total += float(self.nvml.nvmlDeviceGetMemoryInfo(h).used)
                any_dev = True
        return (used_total, "device") if any_dev else (None, "")

    def power_w(self) -> float | None:
        """Board power summed over the visible GPUs, watts (NVML reports milliwatts); None when no device gives it.
        Device-wide: NVML has no per-process power, so anything else running on these GPUs is counted too."""
        total, any_dev = 0.0, False
        for h in self.handles:
            with contextlib.suppress(Exception):
                total += float(self.nvml.nvmlDeviceGetPowerUsage(h)) / 1000.0
                any_dev = True
        return total if any_dev else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()


def spec_counter_names(names: AcceptanceMetrics | None) -> tuple[str, ...]:
    """The counters `spec_counters` reads."""
    if names is None or names.kind != "counters":
        return ()
    return tuple(n for n in (names.draft_tokens, names.accepted_tokens, names.steps_by_k) if n)


def spec_counters(snapshot: MetricsSnapshot | None, names: AcceptanceMetrics | None) -> dict[str, float]:
    """The speculation counters an adapter names (`AcceptanceMetrics` of kind "counters"), as this scrape read them:
    "draft_tokens", "accepted_tokens", and "k=<k>" per k of `steps_by_k`; {} without them. Diffed between samples,
    they give acceptance and the k in use over time (a phased load's chart)."""
    if snapshot is None or names is None or names.kind != "counters":
        return {}
    out = {}
    for key, name in (("draft_tokens", names.draft_tokens), ("accepted_tokens", names.accepted_tokens)):
        value = snapshot.total(name) if name else None
        if value is not None:
            out[key] = value
    if names.steps_by_k:
        out |= {f"k={k}": v for k, v in snapshot.by_label(names.steps_by_k, "k").items()}
    return out


class MemorySampler:
    """Samples memory every `interval_s` from `start()` until `stop()`; t_s is seconds since `t0_s`."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        rss: Callable[[], float | None] | None = None,
        pids: Callable[[], set[int]] | None = None,
        gpu: GpuMemory | None = None,
        interval_s: float = 1.0,
        t0_s: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
        scrape_kv: bool = True,
        api_key: str | None = None,
        counters: AcceptanceMetrics | None = None,
    ):
        self.session, self.base_url, self.rss, self.pids, self.gpu = session, base_url, rss, pids, gpu
        self.api_key = api_key
        self.counters = counters  # the engine's speculation counters, read with each scrape (`spec_counters`)
        # what each scrape reads: the KV-cache gauges and those counters, parsed out of a page of hundreds of lines
        # (the client's CPU during a measured load: parsing /metrics was 1.3 % of the suite's CPU in a py-spy run,
        # 73 % of that these scrapes, 2026-12-07)
        self._families = (*KV_USAGE_GAUGES, *spec_counter_names(counters))
        self.interval_s, self.clock, self.scrape_kv = interval_s, clock, scrape_kv
        self.t0_s = clock() if t0_s is None else t0_s
        self.samples: list[MemorySample] = []
        self.gpu_scope = ""
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def sample(self) -> MemorySample:
        t = self.clock() - self.t0_s
        gpu_bytes = power_w = None
        if self.gpu is not None:
            power_w = self.gpu.power_w()
            gpu_bytes, scope = self.gpu.read(self.pids() if self.pids else None)
            if scope and self.gpu_scope != "device":  # one device-wide reading makes the whole series device-wide
                self.gpu_scope = scope
        kv, spec = None, {}
        if self.scrape_kv:
            snap = await scrape_metrics(
                self.session, self.base_url, timeout_s=2.0, api_key=self.api_key, only=self._families
            )
            kv, spec = kv_usage(snap), spec_counters(snap, self.counters)
        s = MemorySample(t, gpu_bytes, self.rss() if self.rss else None, kv, power_w, spec)
        self.samples.append(s)
        return s

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a failed reading is a gap in the series, never a failed run
                await self.sample()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)

    def start(self) -> MemorySampler:
        self._task = asyncio.create_task(self._loop())
        return self

    async def stop(self) -> tuple[MemorySample, ...]:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        with contextlib.suppress(Exception):  # one reading at the end of the level
            await self.sample()
        return tuple(self.samples)
