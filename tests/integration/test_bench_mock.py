"""speculab bench against the scripted mock server: the accuracy the issue demands, and faults at run level."""

import json

import pytest

from fakes.quiet import OtherCpu, skip_if_busy, wakeup_lateness_s
from integration.mock_process import mock_process
from speculab.commands.bench.run import BenchConfig, run_bench
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.load.runner import LoadConfig
from speculab.harness.records import RequestSpec
from speculab.harness.results.requests_file import read_records

# millisecond timing assertions: on the held lane, the rest of the suite in the idle background (tests/sharing.py)
pytestmark = pytest.mark.serial

# spin_s: the mock keeps its script to ~0.05 ms instead of waking 1-2 ms late (asyncio's sleep overshoot), so
# the scripted 100 ms is a fair reference for the client's +-2 ms
SCRIPT = dict(
    ttft_s=0.1,
    gap_s=0.02,
    tokens_per_chunk=2,
    output_tokens=128,
    num_speculative_tokens=3,
    record_send_times=True,
    spin_s=0.0025,
)


async def server_send_log(url: str) -> dict[str, dict]:
    """The mock's own record of each stream (arrival, first-chunk deadline, chunk write times), by prompt; the
    last entry wins, so warmup requests that reused a prompt are replaced by the measured one."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"{url}/mock/send_times") as resp:
        return {r["prompt"]: r for r in (await resp.json())["requests"]}


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


# The +-1-2 ms tolerances of issue 2 are meaningful only when the OS wakes processes on time. On a machine
# shared with other CPU-bound jobs, wakeups arrive milliseconds late in the mock and the client alike; then the
# timing assertions are skipped (saying so and why), while every count and ratio is still checked. Wakeup lateness
# is sampled before and after the run; other processes' CPU use is measured over the run itself (a job that starts
# mid-run and saturates a 2-core machine was missed by the samples). The client's and the mock's own CPU use never
# excuse a miss.
QUIET_LATENESS_S = 0.0005  # wakeups late at p90, before and after the run
QUIET_OTHERS_CPU_SHARE = 0.10  # of all cores, over the run


@pytest.fixture(scope="module")
def mock_url():
    with mock_process(**SCRIPT) as url:
        yield url


@pytest.mark.parametrize("concurrency,n", [(1, 4), (64, 320)])
@pytest.mark.slow
async def test_measures_known_timing(mock_url, tmp_path, concurrency, n):
    items = tuple(RequestSpec(i, prompt=f"tell me about item {i}") for i in range(n))
    cfg = BenchConfig(
        endpoint=EndpointConfig(mock_url, ""),  # the only served model is chosen
        sampling=RequestSampling(max_tokens=128),
        # warmup opens the connections; a ramp of one chunk gap spreads the 64 streams' phases, as real traffic
        # is spread, instead of 64 identical requests starting, streaming and ending in lockstep
        load=LoadConfig(concurrency=concurrency, warmup=max(2, concurrency), ramp_up_s=0.02),
        output_dir=tmp_path / "run",
    )
    lateness_before = await wakeup_lateness_s()
    others = OtherCpu()
    res = await run_bench(cfg, items)
    others_share = others.share()
    lateness = max(lateness_before, await wakeup_lateness_s())
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s == json.loads(json.dumps(res.summary))
    m = s["metrics"]
    assert s["counts"]["sent"] == s["counts"]["ok"] == n and s["counts"]["error"] == 0
    assert m["tokens_per_chunk"]["mean"] == 2.0 and m["tokens_per_chunk"]["max"] == 2.0
    assert s["tokens"]["count_sources"] == {"continuous_usage": n}
    sd = s["server"]["spec_decode"]
    assert sd is not None and sd["acceptance_length"] == pytest.approx(2.0)  # 2 tokens per step = 1 accepted + bonus
    warm = max(2, concurrency)
    assert s["throughput"]["output_tok_s"] > 0 and s["counts"]["warmup"] == warm
    recs = read_records(tmp_path / "run" / "requests.jsonl")
    assert len(recs) == n + warm and sum(r.warmup for r in recs) == warm
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["server"]["models"] == ["speculab-mock"] and manifest["finished_at"]
    # per request, E2E - TTFT is exactly the sum of the chunk gaps (63 gaps of 128 tokens in 2-token chunks)
    assert m["chunk_gap_s"]["n"] == 63 * n and m["itl_s"]["n"] == 126 * n

    timing = (
        f"TTFT p50 {m['ttft_s']['p50'] * 1e3:.2f} ms, TPOT p50 {m['tpot_s']['p50'] * 1e3:.3f} ms, "
        f"chunk gap p50 {m['chunk_gap_s']['p50'] * 1e3:.3f} ms, ITL p50 {m['itl_s']['p50'] * 1e3:.3f} ms"
    )
    skip_if_busy(lateness_s=lateness, max_lateness_s=QUIET_LATENESS_S, figures=timing)
    # Both processes read CLOCK_MONOTONIC, so the mock's send log splits each TTFT into what the client did and
    # what the server did: ttft = (arrival - sent) + 100 ms + (first write - deadline) + (received - first write).
    log = await server_send_log(mock_url)
    measured = [r for r in recs if not r.warmup]
    server = [log[f"tell me about item {r.index}"] for r in measured]
    delivery = [r.chunks[0].t_s - e["chunks_s"][0] for r, e in zip(measured, server, strict=True)]
    server_share = [e["chunks_s"][0] - e["arrival_s"] for e in server]  # 100 ms + the mock's own lateness
    timing += (
        f"; first chunk received {median(delivery) * 1e3:.2f} ms after the mock wrote it, "
        f"mock's own TTFT {median(server_share) * 1e3:.2f} ms (p50)"
    )
    way_in = [e["arrival_s"] - r.sent_s for r, e in zip(measured, server, strict=True)]
    timing += f", request reached the mock {median(way_in) * 1e3:.2f} ms after it was sent (p50)"
    skip_if_busy(others_share=others_share, max_others_share=QUIET_OTHERS_CPU_SHARE, figures=timing)
    # The client's own timestamping error: a written chunk is seen within the 2 ms TTFT tolerance.
    assert median(delivery) <= 0.002, timing
    # Issue 2's +-2 ms holds the client to the scripted 100 ms. That is only a fair reference while the mock keeps
    # its script and takes requests in promptly; at 64 streams on 2 cores its event loop can fall behind by
    # milliseconds. Then the check above (the client saw what the mock did) is what this run can show.
    if abs(median(server_share) - 0.100) > 0.001 or median(way_in) > 0.001:
        pytest.skip(f"the mock fell behind its script, so 100 +- 2 ms is not the reference this run; {timing}")
    assert abs(m["ttft_s"]["p50"] - 0.100) <= 0.002, timing
    # TPOT = (E2E - TTFT) / (128 - 1) = 63 gaps x 20 ms / 127 = 9.92 ms: within 2% of 10 ms
    assert m["tpot_s"]["p50"] == pytest.approx(0.010, rel=0.02), timing
    assert abs(m["chunk_gap_s"]["p50"] - 0.020) <= 0.001, timing
    assert m["itl_s"]["p50"] == pytest.approx(0.010, abs=0.0005), timing
    print(f"concurrency {concurrency}: {timing}")  # the figures behind a pass (pytest -rP shows them)


async def test_faults_are_counted_and_the_run_continues(tmp_path):
    faults = dict(
        fault_5xx_rate=0.1,
        fault_drop_rate=0.1,
        fault_malformed_rate=0.1,
        fault_error_event_rate=0.1,
        fault_stall_rate=0.1,
        fault_stall_s=30.0,
    )
    with mock_process(ttft_s=0.005, gap_s=0.002, tokens_per_chunk=1, output_tokens=6, seed=3, **faults) as url:
        items = tuple(RequestSpec(i, prompt="x") for i in range(80))
        cfg = BenchConfig(
            endpoint=EndpointConfig(url, "speculab-mock", timeout_s=0.5),
            sampling=RequestSampling(max_tokens=6),
            load=LoadConfig(concurrency=16),
            output_dir=tmp_path / "run",
        )
        res = await run_bench(cfg, items)
    c = res.summary["counts"]
    assert c["sent"] == 80 == c["ok"] + c["error"]
    cats = c["errors_by_category"]
    assert set(cats) == {"http", "dropped", "malformed", "error_event", "timeout"}, cats
    assert c["ok"] >= 30
    assert len(read_records(tmp_path / "run" / "requests.jsonl")) == 80
