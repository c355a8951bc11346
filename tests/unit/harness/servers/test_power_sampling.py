"""GPU power beside memory (issue 40): NVML's board power summed over devices, in watts, read by the sampler each
interval; no NVML device, no power readings (a fake pynvml module injected, on CPU)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import aiohttp

from speculab.harness.servers.memory import GpuMemory, MemorySampler


class FakePowerNvml:
    """pynvml's calls for memory and power: `watts` per device, scripted reading by reading."""

    def __init__(self, watts: list[list[float]]):
        self.watts, self.reads = watts, 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.watts[0])

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=1_000)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        row = self.watts[min(self.reads // len(self.watts[0]), len(self.watts) - 1)]
        self.reads += 1
        return int(row[h] * 1000)  # NVML reports milliwatts


def test_power_is_summed_over_devices_in_watts() -> None:
    gpu = GpuMemory.open(FakePowerNvml([[310.5, 120.25]]))  # type: ignore[arg-type]
    assert gpu is not None and gpu.power_w() == 430.75


def test_a_device_without_power_gives_none() -> None:
    class NoPower(FakePowerNvml):
        def nvmlDeviceGetPowerUsage(self, h: int) -> int:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    gpu = GpuMemory.open(NoPower([[1.0]]))  # type: ignore[arg-type]
    assert gpu is not None and gpu.power_w() is None


def test_the_sampler_records_power_with_each_reading() -> None:
    async def sample() -> tuple:
        gpu = GpuMemory.open(FakePowerNvml([[200.0], [300.0]]))  # type: ignore[arg-type]
        ticks = iter([10.0, 11.0, 12.0])
        async with aiohttp.ClientSession() as session:
            s = MemorySampler(session, "http://127.0.0.1:1", gpu=gpu, t0_s=10.0, clock=lambda: next(ticks),
                              scrape_kv=False)  # fmt: skip
            return (await s.sample(), await s.sample())

    first, second = asyncio.run(sample())
    assert (first.t_s, first.gpu_power_w, second.t_s, second.gpu_power_w) == (0.0, 200.0, 1.0, 300.0)
    assert first.gpu_bytes == 1_000.0


def test_no_nvml_device_no_power() -> None:
    async def sample():
        async with aiohttp.ClientSession() as session:
            return await MemorySampler(session, "http://127.0.0.1:1", gpu=None, scrape_kv=False).sample()

    assert asyncio.run(sample()).gpu_power_w is None
