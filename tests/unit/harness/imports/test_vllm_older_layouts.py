"""vLLM result files of older layouts (#37 item 5): `start_times` without `latencies` (E2E = TTFT + the sum of
itls), and benchmark_serving.py's `ttfts`/`itls` only (vLLM 0.6.3's, a real file: sends rebuilt from the load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.words import words
from speculab.harness.imports import vllm_bench

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "imports"
RAW = json.loads((FIXTURES / "vllm" / "baseline.json").read_text())
OLD = FIXTURES / "summaries" / "vllm-0.6.3"


def _without(tmp_path: Path, *keys: str) -> Path:
    f = tmp_path / "run.json"
    f.write_text(json.dumps({k: v for k, v in RAW.items() if k not in keys}))
    return f


def test_without_latencies_e2e_is_the_last_chunk(tmp_path: Path) -> None:
    full = vllm_bench.read(FIXTURES / "vllm" / "baseline.json")
    run = vllm_bench.read(_without(tmp_path, "latencies"))
    for i, (r, f) in enumerate(zip(run.records, full.records, strict=True)):
        assert r.sent_s == f.sent_s
        assert r.end_s - r.sent_s == pytest.approx(RAW["ttfts"][i] + sum(RAW["itls"][i]))
        assert r.end_s == pytest.approx(f.end_s, abs=0.005)  # vLLM's latency ends at the same last chunk, to its clock
    assert any("no `latencies`" in n for n in words(run.notes))


def test_without_start_times_sends_are_rebuilt_from_the_load(tmp_path: Path) -> None:
    run = vllm_bench.read(_without(tmp_path, "start_times", "latencies"))
    assert RAW["max_concurrency"] == 4
    assert [r.sent_s for r in run.records[:4]] == [0.0] * 4  # the first four at once, the next as one ends
    assert all(r.sent_s > 0 for r in run.records[4:])
    assert any("no `start_times`" in n for n in words(run.notes))


def test_benchmark_serving_0_6_3_reads_per_request() -> None:
    raw = json.loads((OLD / "baseline.json").read_text())
    assert "start_times" not in raw and "latencies" not in raw and "ttfts" in raw  # as vLLM 0.6.3 wrote it
    run = vllm_bench.read(OLD / "baseline.json")
    assert len(run.records) == raw["num_prompts"] == 20
    assert all(r.sent_s == 0.0 for r in run.records)  # request rate inf, no max concurrency: all at once
    r = run.records[5]
    assert r.chunks[0].t_s - r.sent_s == pytest.approx(raw["ttfts"][5])
    assert r.completion_tokens == raw["output_lens"][5] and r.output_text == raw["generated_texts"][5]
    read_as = "baseline.json: a vLLM benchmarks/benchmark_serving.py result (its layout up to"
    assert words(run.notes)[0].startswith(read_as)
