"""The mock's step-batched mode (issue 49) from a raw HTTP client: chunks, counters and per-request metrics as the
engine loop makes them, faults and shutdown inside it, and (alone on the machine) a closed loop's measured TPOT
against the truth at concurrency 1 and 8."""

from __future__ import annotations

import asyncio
import statistics

import aiohttp
import pytest

from fakes.raw_sse import post
from integration.mock_process import mock_process
from speculab.harness.servers.acceptance import acceptance_between
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.adapters.vllm import counts_with_histogram
from speculab.harness.servers.scrape import counter_deltas, scrape_metrics
from speculab.mock.script import MockConfig, count_tokens, generate_tokens, step_s
from speculab.mock.server import running_mock_server
from speculab.mock.truth import true_tokens_per_step, true_tpot_s

FAST = {"step_batched": True, "step_s": 0.001, "ttft_s": 0.0}
STREAM_USAGE = {"stream": True, "stream_options": {"include_usage": True}}


async def test_forced_acceptance_makes_whole_steps_and_counts_them_as_vllm_does(session):
    cfg = MockConfig(**FAST, output_tokens=10, num_speculative_tokens=2, forced_acceptance_rates=(1.0, 1.0),
                     per_request_spec_metrics=True)  # fmt: skip
    async with running_mock_server(cfg) as url:
        before = await scrape_metrics(session, url)
        r = await post(session, url + "/v1/completions", {"prompt": "one two three", **STREAM_USAGE})
        unary = await post(session, url + "/v1/completions", {"prompt": "one two three"})
        after = await scrape_metrics(session, url)
    # the prefill's token alone, then 3 per step (2 drafts, both accepted, and the bonus)
    assert [count_tokens(ev["choices"][0]["text"]) for _, ev in r.text_chunks()] == [1, 3, 3, 3]
    assert r.text() == unary.body["choices"][0]["text"] == "".join(generate_tokens("one two three", None, 10))
    spec = r.events[-2][1]["metrics"]["speculative_decoding"]
    assert spec["num_spec_steps"] == 3 and spec["acceptance_histogram"] == [0, 0, 3]  # the first token is no step
    assert unary.body["metrics"]["speculative_decoding"] == spec
    stats = acceptance_between(adapter_for("vllm"), before, after)
    assert stats is not None and (stats.drafts, stats.draft_tokens, stats.accepted_tokens) == (6, 12, 12)
    assert stats.per_position == pytest.approx((1.0, 1.0))


async def test_counters_and_per_request_histograms_agree_under_concurrency(session):
    cfg = MockConfig(**FAST, output_tokens=40, num_speculative_tokens=3, acceptance_rates=(0.8, 0.6, 0.5),
                     per_request_spec_metrics=True, step_s_per_request=0.0005)  # fmt: skip
    async with running_mock_server(cfg) as url:
        before = await scrape_metrics(session, url)
        results = await asyncio.gather(
            *(post(session, url + "/v1/completions", {"prompt": f"prompt {i}", **STREAM_USAGE}) for i in range(8))
        )
        after = await scrape_metrics(session, url)
    per_request = [r.events[-2][1]["metrics"]["speculative_decoding"] for r in results]
    summed = [counts_with_histogram((None, None, None), s["acceptance_histogram"], "test") for s in per_request]
    stats = acceptance_between(adapter_for("vllm"), before, after)
    assert stats is not None and stats.drafts == sum(s["num_spec_steps"] for s in per_request)
    assert stats.accepted_tokens == sum(s["num_accepted_draft_tokens"] for s in per_request)
    accepted_at = [sum(s["accepted_per_position"][p] for s in summed) for p in range(3)]
    assert stats.per_position == pytest.approx([a / stats.drafts for a in accepted_at])
    assert accepted_at[0] >= accepted_at[1] >= accepted_at[2] > 0  # a prefix of positions, always
    assert all(r.text() == "".join(generate_tokens(f"prompt {i}", None, 40)) for i, r in enumerate(results))
    assert counter_deltas(before, after, ["vllm:generation_tokens"]) == {"vllm:generation_tokens": 320.0}


async def test_a_stalled_request_leaves_the_batch_and_the_others_go_on(session):
    cfg = MockConfig(**FAST, output_tokens=6, fault_stall_rate=1.0, fault_stall_s=0.2)
    async with running_mock_server(cfg) as url:
        results = await asyncio.gather(*(post(session, url + "/v1/completions", {"prompt": "p", "stream": True})
                                         for _ in range(2)))  # fmt: skip
    for r in results:
        assert r.status == 200 and count_tokens(r.text()) == 6 and r.events[-1][1] == "[DONE]"
        assert max(r.gaps_s()) >= 0.2  # the stall, mid-stream


async def test_shutdown_ends_the_streams_in_the_batch(session):
    cfg = MockConfig(**{**FAST, "step_s": 0.05}, output_tokens=1000)
    server = running_mock_server(cfg)
    url = await server.__aenter__()
    task = asyncio.create_task(post(session, url + "/v1/completions", {"prompt": "p", "stream": True}))
    await asyncio.sleep(0.2)
    await server.__aexit__(None, None, None)
    with pytest.raises(aiohttp.ClientPayloadError):  # cut off, as a dying server's stream is, not left hanging
        await asyncio.wait_for(task, timeout=5)


# --------------------------------------------------------------------------------------------------------------
# Measured against the truth (alone on the machine: it holds measured times to a tolerance)

# a = 8 ms, b = 1 ms per request, d = 0.5 ms per request x draft, k = 3 at 0.8, 0.7, 0.6 (2.70 tokens per step).
# At c = 1 a step takes 10.5 ms, at c = 8 28 ms; 49 tokens are ~18 decode steps.
ENGINE = {"step_batched": True, "step_s": 0.008, "step_s_per_request": 0.001, "verify_s_per_request_token": 0.0005,
          "ttft_s": 0.0, "output_tokens": 49, "num_speculative_tokens": 3, "acceptance_rates": [0.8, 0.7, 0.6],
          "per_request_spec_metrics": True}  # fmt: skip
# Step times: the server's wake-ups are late by a millisecond or two on a busy machine, the same for a request's first
# and last chunk, so a request's mean step stays within a few %. TPOT also carries the draws: 6 or 8 requests of ~18
# steps put the mean within ~4-5 % of its expectation (one standard deviation), so 15 % is over 3 of them.
STEP_TOLERANCE, TPOT_TOLERANCE = 0.06, 0.15


async def _closed_loop(session, url: str, concurrency: int, per_worker: int) -> list:
    """Each of `concurrency` workers sends `per_worker` requests one after the other; the requests measured are the
    ones in between each worker's first and last, so that all of them ran with `concurrency` in flight."""

    async def worker(w: int) -> list:
        return [await post(session, url + "/v1/completions", {"prompt": f"w{w} r{i}", **STREAM_USAGE})
                for i in range(per_worker)]  # fmt: skip

    return [r for rs in await asyncio.gather(*(worker(w) for w in range(concurrency))) for r in rs[1:-1]]


@pytest.mark.serial
@pytest.mark.parametrize(("concurrency", "per_worker"), [(1, 8), (8, 3)])
async def test_a_closed_loop_measures_the_true_step_time_and_tpot(session, concurrency, per_worker):
    cfg = MockConfig(**ENGINE)
    assert true_tokens_per_step(cfg) == pytest.approx(1 + 0.8 + 0.56 + 0.336)
    with mock_process(**ENGINE) as url:
        results = await _closed_loop(session, url, concurrency, per_worker)
    steps, tpots = [], []
    for r in results:
        times = [t for t, _ in r.text_chunks()]
        spec = r.events[-2][1]["metrics"]["speculative_decoding"]
        steps.append((times[-1] - times[0]) / spec["num_spec_steps"])  # TPOT spans the decode steps only
        tpots.append((times[-1] - times[0]) / (ENGINE["output_tokens"] - 1))
    assert statistics.median(steps) == pytest.approx(step_s(cfg, concurrency), rel=STEP_TOLERANCE)
    assert statistics.mean(tpots) == pytest.approx(true_tpot_s(cfg, concurrency), rel=TPOT_TOLERANCE)
