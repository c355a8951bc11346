"""speculab diagnose against the reference engine (`speculab serve`, a tiny real checkpoint): the diagnosis runs end
to end on a real server and agrees with what the engine's own Prometheus metrics say about each phase: the same
prompt token count, the same number of first tokens, a TTFT the client sees at or above the server's (the client
adds the network), and decode speed matching the engine's inter-token latency histogram."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculab.commands.diagnose.config import DiagnoseConfig
from speculab.commands.diagnose.run import run_diagnosis
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.results.warnings import WarningKind
from speculab.harness.servers.process import free_port

SRC = str(Path(__file__).parents[2] / "src")


@pytest.fixture
def engine_url(tiny_checkpoint):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "speculab", "serve", str(tiny_checkpoint), "--port", str(port), "--max-num-seqs", "4",
         "--served-model-name", "tiny"],
        env={**os.environ, "PYTHONPATH": SRC}, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and "ready" not in line:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            assert line or proc.poll() is None, "server exited before it was ready"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.serial  # the client's and the engine's TTFT agree within milliseconds only on a machine it has alone
async def test_diagnosis_agrees_with_the_engines_own_metrics(engine_url, tmp_path):
    cfg = DiagnoseConfig(
        endpoint=EndpointConfig(base_url=engine_url, model=""),
        output_dir=tmp_path / "d",
        # the tiny tokenizer splits words into several tokens: keep prompts well inside its 512-token context
        workload="synthetic:input=20,output=32",
        num_prompts=3,
        concurrency=2,
        sampling=RequestSampling(max_tokens=32, ignore_eos=True),
        max_prompt_tokens=80,
        sweep_points=4,
        sweep_repeats=2,
        prefix_repeats=2,
        probe_seed=3,
    )
    res = await run_diagnosis(cfg)
    d, doc = res.diagnosis, res.document
    assert all(r.ok for r in res.records), [r.error for r in res.records if not r.ok][:3]
    assert all(w.kind == WarningKind.PREFILL_NOT_LINEAR for w in d.warnings), d.warnings
    assert d.prefill.fit is not None and d.prefill.token_source == "usage"
    assert d.decode is not None and 0 < d.decode.decode_share < 1
    assert d.findings[0].cause == "decode", d.findings  # a tiny model: 32 decode steps outweigh a 20-token prefill
    sm = doc["server_metrics"]
    assert {"prefill", "workload-c1", "workload-load"} <= set(sm), sm.keys()
    for phase in ("prefill", "workload-c1", "workload-load"):
        m = sm[phase]
        srv = m["server"]
        assert srv["source"] == "speculab:"
        assert srv["prompt_tokens"] == m["client_prompt_tokens"], (phase, m)  # exact: the same tokens were counted
        assert srv["ttft_count"] == m["client_requests_ok"], (phase, m)
        # the client's TTFT includes HTTP and network time the server does not see, and little else
        assert srv["ttft_mean_s"] <= m["client_ttft_mean_s"] + 0.005, (phase, m)
        assert m["client_ttft_mean_s"] - srv["ttft_mean_s"] < 0.05 + 0.2 * srv["ttft_mean_s"], (phase, m)
    for phase in ("workload-c1", "workload-load"):
        m = sm[phase]
        itl = m["server"]["itl_mean_s"]
        assert itl is not None and abs(m["client_tpot_mean_s"] - itl) <= 0.002 + 0.25 * itl, (phase, m)
    # 4 slots, 2 in flight: the engine's own queue-time histogram says nobody waited for a slot, and the diagnosis
    # reports the same server-side wait
    load_srv = sm["workload-load"]["server"]
    assert load_srv["queue_mean_s"] is not None and load_srv["queue_mean_s"] < 0.005
    assert d.queueing.server_queue_s == load_srv["queue_mean_s"]
