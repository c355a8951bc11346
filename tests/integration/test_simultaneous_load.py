"""`speculab bench` with n prompts at concurrency n: every request starts at once, and the load it achieved is n in
flight (issue 37). Achieved concurrency was averaged between the first and the last send, a window of about nothing
here, and such runs read a fraction of the load ("load not achieved", no verdict) when two were compared.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from speculab.commands.bench.run import BenchConfig, run_bench
from speculab.commands.compare.pairing import inputs_from_results
from speculab.harness.analysis.windows import achieved_concurrency
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.runner import LoadConfig
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.harness.workload.sources import load_workload
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

N = 4
PROMPTS = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "guidellm" / "prompts.jsonl"


def _bench(url: str, out: Path) -> None:
    wl = load_workload(str(PROMPTS), seed=0, num_prompts=N)
    cfg = BenchConfig(
        endpoint=EndpointConfig(base_url=url, model=""),
        sampling=RequestSampling(max_tokens=16),
        load=LoadConfig(concurrency=N),
        output_dir=out,
        workload={"spec": str(PROMPTS), "name": wl.name, "source": wl.source, "n_items": len(wl.items)},
    )
    result = asyncio.run(run_bench(cfg, wl.items))
    measured = [r for r in result.records if not r.warmup]
    assert len(measured) == N and all(r.ok for r in measured)
    # n requests at concurrency n: all in flight until the first ends, whatever the client's send spread
    assert achieved_concurrency(measured) == pytest.approx(N, rel=0.05)


def test_n_prompts_at_concurrency_n_achieve_n_in_flight(tmp_path: Path) -> None:
    with mock_server_in_thread(MockConfig(ttft_s=0.05, gap_s=0.03, output_tokens=16)) as url:
        _bench(url, tmp_path / "a")
        _bench(url, tmp_path / "b")
    r = build_report(inputs_from_results(tmp_path / "a", tmp_path / "b"), ReportOptions(n_resamples=200))
    (lv,) = r.levels
    assert lv.key == f"c{N}"
    for arm in lv.arms:
        assert arm.load_fraction == pytest.approx(1.0, rel=0.05)
    assert lv.comparisons[0].gate != "load not achieved", lv.comparisons[0].gate_reason
