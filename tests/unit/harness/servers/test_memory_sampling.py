"""Memory readings: NVML per process vs whole device (a fake pynvml module), KV gauges from /metrics, and the
process-tree RSS of a launched server."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from speculab.harness.servers.adapters import adapter_for, engine_kinds
from speculab.harness.servers.memory import KV_USAGE_GAUGES, GpuMemory, kv_usage, spec_counter_names, spec_counters
from speculab.harness.servers.process import ServerCommand, ServerProcess, free_port
from speculab.harness.servers.scrape import parse_metrics

FIXTURES = Path(__file__).parent / "fixtures"


class FakeNvml:
    """The handful of pynvml calls GpuMemory makes: two devices, processes with usedGpuMemory."""

    def __init__(self, procs: dict[int, list[tuple[int, int]]], used: dict[int, int]):
        self.procs, self.used, self.shutdowns = procs, used, 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.used)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.procs.get(h, [])]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return []

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=self.used[h])


def test_gpu_memory_per_process_summed_over_devices() -> None:
    nvml = FakeNvml({0: [(10, 5_000), (99, 7_000)], 1: [(11, 3_000)]}, {0: 50_000, 1: 60_000})
    gpu = GpuMemory.open(nvml)  # type: ignore[arg-type]
    assert gpu is not None
    assert gpu.read({10, 11}) == (8_000.0, "process")  # other tenants' pid 99 is not ours
    # pids hidden from the driver (containers): the whole devices' use, and the scope says so
    assert gpu.read({12345}) == (110_000.0, "device")
    assert gpu.read(None) == (110_000.0, "device")
    gpu.close()
    assert nvml.shutdowns == 1


def test_no_gpu_means_no_readings() -> None:
    assert GpuMemory.open(FakeNvml({}, {})) is None  # type: ignore[arg-type]

    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    assert GpuMemory.open(Broken({}, {})) is None  # type: ignore[arg-type]


def test_kv_usage_gauges_by_engine() -> None:
    text = '# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
    assert kv_usage(parse_metrics(text)) == 0.25
    text = "# TYPE speculab:kv_cache_usage_perc gauge\nspeculab:kv_cache_usage_perc 0.5\n"
    assert kv_usage(parse_metrics(text)) == 0.5
    assert kv_usage(parse_metrics("# TYPE sglang:token_usage gauge\nsglang:token_usage 0.75\n")) == 0.75
    assert kv_usage(parse_metrics("# TYPE other gauge\nother 1\n")) is None
    assert kv_usage(None) is None


def test_server_process_tree_rss_and_stop_kills_the_group(tmp_path: Path) -> None:
    # a "server" that forks a child holding 30 MB and ignores SIGTERM: stop() must still end both
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; b = bytearray(30_000_000); time.sleep(600)'])\n"
        "print('started', flush=True); time.sleep(600)\n"
    )
    server = ServerProcess(ServerCommand((sys.executable, "-c", code), free_port()), tmp_path / "s.log").start()
    try:
        deadline = time.time() + 20
        while time.time() < deadline and len(server.pids()) < 2:
            time.sleep(0.1)
        pids = server.pids()
        assert len(pids) == 2
        time.sleep(0.5)
        rss = server.rss_bytes()
        assert rss is not None and rss > 30_000_000
    finally:
        code_ = server.stop(grace_s=1.0)
    assert code_ is not None and code_ < 0  # killed by a signal
    psutil = pytest.importorskip("psutil")
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert server.stop() == code_  # idempotent
    assert "started" in (tmp_path / "s.log").read_text()


@pytest.mark.parametrize("kind", [k for k in engine_kinds() if adapter_for(k).acceptance.kind == "counters"])
def test_what_the_sampler_keeps_of_a_page_reads_as_the_whole_page(kind: str) -> None:
    """The sampler parses only the KV gauges and `spec_counter_names` from each scrape: what `kv_usage` and
    `spec_counters` read from those lines must be what they read from the whole page (the list beside the reading)."""
    acc = adapter_for(kind).acceptance
    lines = [(FIXTURES / "vllm_spec_after.prom").read_text()]  # a page of other families around the ones read
    for i, name in enumerate(n for n in (acc.draft_tokens, acc.accepted_tokens) if n):
        lines.append(f'# TYPE {name.removesuffix("_total")} counter\n{name}{{engine="0"}} {100 + i}\n')
    if acc.steps_by_k:
        lines.append(f"# TYPE {acc.steps_by_k.removesuffix('_total')} counter\n")
        lines += [f'{acc.steps_by_k}{{k="{k}"}} {10 * k}\n' for k in (2, 4)]
    lines.append(f"# TYPE {KV_USAGE_GAUGES[-1]} gauge\n{KV_USAGE_GAUGES[-1]} 0.5\n")
    page = "".join(lines)
    whole, kept = parse_metrics(page), parse_metrics(page, only=(*KV_USAGE_GAUGES, *spec_counter_names(acc)))
    assert spec_counters(kept, acc) == spec_counters(whole, acc) != {}
    assert kv_usage(kept) == kv_usage(whole) is not None
    assert len(kept.samples) < len(whole.samples)
