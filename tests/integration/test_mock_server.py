"""The mock server's wire behaviour, counters, errors and faults, seen from a raw HTTP client."""

from __future__ import annotations

import asyncio
import json
import math

import aiohttp
import pytest

from fakes.raw_sse import post
from speculab.harness.servers.acceptance import acceptance_between
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.scrape import counter_deltas, scrape_metrics
from speculab.mock.script import MockConfig, count_tokens
from speculab.mock.server import mock_server_in_thread, running_mock_server

FAST = {"ttft_s": 0.0, "gap_s": 0.0}
STREAM_USAGE = {"stream": True, "stream_options": {"include_usage": True}}


async def test_completion_stream_chunks_usage_and_done(session):
    cfg = MockConfig(**FAST, tokens_per_chunk=3, output_tokens=10)
    async with running_mock_server(cfg) as url:
        r = await post(session, url + "/v1/completions", {"prompt": "one two three", **STREAM_USAGE})
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    chunks = [ev for _, ev in r.text_chunks()]
    assert [count_tokens(c["choices"][0]["text"]) for c in chunks] == [3, 3, 3, 1]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, "stop"]
    assert all(c["usage"] is None for c in chunks)  # include_usage: null until the usage chunk
    usage_chunk = r.events[-2][1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 3, "completion_tokens": 10, "total_tokens": 13}
    assert r.events[-1][1] == "[DONE]"


async def test_continuous_usage_counts_every_chunk(session):
    cfg = MockConfig(**FAST, tokens_per_chunk=(3, 1, 2), output_tokens=12, num_speculative_tokens=2)
    body = {"prompt": "p", "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    async with running_mock_server(cfg) as url:
        r = await post(session, url + "/v1/completions", body)
    totals = [ev["usage"]["completion_tokens"] for _, ev in r.text_chunks()]
    assert totals == [3, 4, 6, 9, 10, 12]


async def test_per_request_spec_decode_metrics_as_vllm_writes_them(session):
    # steps of 1, 2, 3, 1, 2 tokens at k = 3: accepted 0, 1, 2, 0, 1 drafts -> histogram [2, 2, 1, 0]
    cfg = MockConfig(**FAST, tokens_per_chunk=(1, 2, 3), output_tokens=9, num_speculative_tokens=3,
                     per_request_spec_metrics=True)  # fmt: skip
    body = {"prompt": "p", "stream": True, "stream_options": {"include_usage": True}}
    async with running_mock_server(cfg) as url:
        streamed = await post(session, url + "/v1/completions", body)
        unary = await post(session, url + "/v1/completions", {"prompt": "p"})
        plain = await post(session, url + "/v1/completions", {"prompt": "p", "stream": True})
    want = {"num_spec_steps": 5, "num_draft_tokens": 15, "num_accepted_draft_tokens": 4,
            "acceptance_histogram": [2, 2, 1, 0], "mean_acceptance_length": 1.8,
            "draft_acceptance_rate": 4 / 15, "num_spec_tokens": 3}  # fmt: skip
    usage_chunk = streamed.events[-2][1]  # the trailing usage chunk, as vLLM sends it
    assert usage_chunk["choices"] == [] and usage_chunk["metrics"]["speculative_decoding"] == want
    assert all("metrics" not in ev for _, ev in streamed.text_chunks())
    assert unary.body["metrics"]["speculative_decoding"] == want
    assert all("metrics" not in ev for _, ev in plain.text_chunks())  # no usage chunk asked: nowhere to put it


async def test_a_stream_drops_its_last_tokens_and_a_unary_answer_does_not(session):
    """vllm#30204 scripted: the streamed text lacks its last 2 tokens while its usage counts them; unary is whole."""
    cfg = MockConfig(**FAST, tokens_per_chunk=2, output_tokens=7, stream_drop_last_tokens=2)
    async with running_mock_server(cfg) as url:
        streamed = await post(session, url + "/v1/completions", {"prompt": "p", **STREAM_USAGE})
        unary = await post(session, url + "/v1/completions", {"prompt": "p"})
    text = "".join(ev["choices"][0]["text"] for _, ev in streamed.text_chunks())
    whole = unary.body["choices"][0]["text"]
    assert count_tokens(whole) == 7 and count_tokens(text) == 5 and whole.startswith(text)
    assert streamed.events[-2][1]["usage"]["completion_tokens"] == 7


async def test_chat_stream_role_first_then_content_with_logprobs(session):
    cfg = MockConfig(**FAST, tokens_per_chunk=2, output_tokens=6)
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True, "logprobs": True, "top_logprobs": 3}
    async with running_mock_server(cfg) as url:
        r = await post(session, url + "/v1/chat/completions", body)
    first = r.events[0][1]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": ""}  # carries no text: not the first token
    for _, ev in r.text_chunks():
        c = ev["choices"][0]
        entries = c["logprobs"]["content"]
        assert len(entries) == count_tokens(c["delta"]["content"]) == 2  # one entry per token
        assert all(len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["token"] == e["token"] for e in entries)
    assert r.events[-1][1] == "[DONE]" and "usage" not in r.events[-2][1]


async def test_completion_logprobs_one_entry_per_token(session):
    cfg = MockConfig(**FAST, tokens_per_chunk=3, output_tokens=7)
    async with running_mock_server(cfg) as url:
        r = await post(session, url + "/v1/completions", {"prompt": "p", "stream": True, "logprobs": 2})
        u = await post(session, url + "/v1/completions", {"prompt": "p", "logprobs": 2})
    for _, ev in r.text_chunks():
        c = ev["choices"][0]
        assert len(c["logprobs"]["tokens"]) == len(c["logprobs"]["token_logprobs"]) == count_tokens(c["text"])
    lp = u.body["choices"][0]["logprobs"]
    assert "".join(lp["tokens"]) == u.body["choices"][0]["text"]
    assert lp["text_offset"][1] == len(lp["tokens"][0])


async def test_unary_matches_stream_and_text_depends_on_prompt_and_seed_only(session):
    slow = MockConfig(ttft_s=0.001, gap_s=0.001, tokens_per_chunk=1, output_tokens=20)
    bunched = MockConfig(**FAST, tokens_per_chunk=4, output_tokens=20, num_speculative_tokens=4)
    body = {"prompt": "the same prompt", "seed": 3}
    async with running_mock_server(slow) as url_a, running_mock_server(bunched) as url_b:
        streamed = await post(session, url_a + "/v1/completions", {**body, "stream": True})
        unary = await post(session, url_b + "/v1/completions", body)
        reseeded = await post(session, url_b + "/v1/completions", {**body, "seed": 4})
    assert streamed.text() == unary.body["choices"][0]["text"]  # identical across timing/speculation settings
    assert unary.body["usage"]["completion_tokens"] == 20 and unary.body["object"] == "text_completion"
    assert reseeded.body["choices"][0]["text"] != unary.body["choices"][0]["text"]


async def test_max_tokens_min_tokens_and_ignore_eos(session):
    cfg = MockConfig(**FAST, output_tokens=10, max_model_len=64)
    async with running_mock_server(cfg) as url:
        capped = await post(
            session,
            url + "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 4},
        )
        longer = await post(session, url + "/v1/completions", {"prompt": "x", "min_tokens": 15, "max_tokens": 30})
        forever = await post(session, url + "/v1/completions", {"prompt": "x", "ignore_eos": True, "max_tokens": 25})
    assert capped.body["choices"][0]["finish_reason"] == "length"
    assert capped.body["usage"]["completion_tokens"] == 4 and capped.body["object"] == "chat.completion"
    assert (longer.body["usage"]["completion_tokens"], longer.body["choices"][0]["finish_reason"]) == (15, "stop")
    assert (forever.body["usage"]["completion_tokens"], forever.body["choices"][0]["finish_reason"]) == (25, "length")


def _assert_openai_error(r, status: int, code: str) -> dict:
    assert r.status == status, r.body
    err = r.body["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == code and err["message"]
    return err


async def test_errors_are_openai_json_with_the_right_status(session):
    cfg = MockConfig(**FAST, models=("m-a", "m-b"), max_model_len=32)
    async with running_mock_server(cfg) as url:
        bad_json = await post(session, url + "/v1/completions", None, raw=b'{"prompt": ')
        unknown = await post(session, url + "/v1/completions", {"prompt": "x", "model": "nope"})
        invalid = await post(session, url + "/v1/completions", {"prompt": "x", "max_tokens": 0})
        missing = await post(session, url + "/v1/chat/completions", {"model": "m-b"})
        too_long = await post(session, url + "/v1/completions", {"prompt": "w " * 30, "max_tokens": 10})
        batch = await post(session, url + "/v1/completions", {"prompt": ["a", "b"]})
        async with session.get(url + "/v1/nothing") as resp:
            no_route = (resp.status, await resp.json())
        async with session.get(url + "/v1/completions") as resp:
            wrong_method = (resp.status, await resp.json())
    _assert_openai_error(bad_json, 400, "invalid_json")
    err = _assert_openai_error(unknown, 404, "model_not_found")
    assert "m-a, m-b" in err["message"] and err["param"] == "model"
    assert "max_tokens" in _assert_openai_error(invalid, 400, "invalid_request")["message"]
    assert "messages" in _assert_openai_error(missing, 400, "invalid_request")["message"]
    assert "maximum context length is 32" in _assert_openai_error(too_long, 400, "context_length_exceeded")["message"]
    _assert_openai_error(batch, 400, "batch_not_supported")
    assert no_route[0] == 404 and no_route[1]["error"]["code"] == "not_found"
    assert wrong_method[0] == 405 and wrong_method[1]["error"]["code"] == "method_not_allowed"


async def test_info_endpoints(session):
    cfg = MockConfig(models=("m-a", "m-b"), max_model_len=4096)
    async with running_mock_server(cfg) as url:
        async with session.get(url + "/v1/models") as r:
            models = await r.json()
        async with session.get(url + "/version") as r:
            version = await r.json()
        async with session.get(url + "/health") as r:
            health = r.status
    assert [m["id"] for m in models["data"]] == ["m-a", "m-b"] and models["data"][0]["max_model_len"] == 4096
    assert version["server"] == "speculab-mock" and version["version"]
    assert health == 200


async def test_counters_match_what_was_served(session):
    cfg = MockConfig(**FAST, tokens_per_chunk=(3, 1, 2), output_tokens=12, num_speculative_tokens=3)
    async with running_mock_server(cfg) as url:
        before = await scrape_metrics(session, url)
        results = await asyncio.gather(
            *(
                post(session, url + "/v1/completions", {"prompt": f"prompt number {i}", **STREAM_USAGE})
                for i in range(5)
            )
        )
        after = await scrape_metrics(session, url)
    assert all(r.status == 200 for r in results)
    stats = acceptance_between(adapter_for("other"), before, after)
    assert stats is not None
    # 5 requests x 6 steps of (3, 1, 2, 3, 1, 2) tokens: accepted 2+0+1 per cycle, k = 3 drafted per step
    assert (stats.drafts, stats.draft_tokens, stats.accepted_tokens) == (30, 90, 30)
    assert stats.acceptance_length == pytest.approx(2.0)  # == mean tokens per chunk
    assert stats.acceptance_rate == pytest.approx(1 / 3)
    assert stats.per_position == pytest.approx((2 / 3, 1 / 3, 0.0))
    d = counter_deltas(before, after, ["vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success"])
    assert d == {"vllm:prompt_tokens": 15.0, "vllm:generation_tokens": 60.0, "vllm:request_success": 5.0}
    assert after.total("vllm:num_requests_running") == 0.0


async def test_no_spec_counters_without_speculation(session):
    async with running_mock_server(MockConfig(**FAST)) as url:
        snap = await scrape_metrics(session, url)
    assert snap is not None and snap.resolve("vllm:spec_decode_num_drafts") is None
    assert snap.total("vllm:num_requests_waiting") == 0.0


async def test_max_concurrency_queues_requests_server_side(session):
    cfg = MockConfig(ttft_s=0.05, gap_s=0.05, output_tokens=4, max_concurrency=2)
    async with running_mock_server(cfg) as url:
        tasks = [
            asyncio.create_task(post(session, url + "/v1/completions", {"prompt": "p", "stream": True}))
            for _ in range(4)
        ]
        snap = None
        for _ in range(100):  # until all four have arrived
            snap = await scrape_metrics(session, url)
            if snap.total("vllm:num_requests_waiting") == 2:
                break
            await asyncio.sleep(0.005)
        results = await asyncio.gather(*tasks)
    assert snap.total("vllm:num_requests_running") == 2 and snap.total("vllm:num_requests_waiting") == 2
    firsts = sorted(r.text_chunks()[0][0] for r in results)
    lasts = sorted(r.text_chunks()[-1][0] for r in results)
    assert firsts[2] > lasts[0]  # the queued two start only after a running one has finished


async def test_cold_start_after_start_and_after_idleness(session):
    cfg = MockConfig(ttft_s=0.0, gap_s=0.0, output_tokens=1, cold_start_s=0.4, idle_reset_s=0.3)
    body = {"prompt": "p", "stream": True}
    async with running_mock_server(cfg) as url:
        cold = await post(session, url + "/v1/completions", body)
        warm = await post(session, url + "/v1/completions", body)
        await asyncio.sleep(0.35)
        cold_again = await post(session, url + "/v1/completions", body)
    assert cold.ttft_s >= 0.4 and cold_again.ttft_s >= 0.4
    assert warm.ttft_s < 0.2  # generous: no cold start, only loopback and scheduling


async def test_prefix_cache_saves_prefill(session):
    cfg = MockConfig(ttft_s=0.0, gap_s=0.0, output_tokens=1, prefill_s_per_token=0.002, prefix_cache=True)
    shared = " ".join(f"doc{i}" for i in range(200))
    async with running_mock_server(cfg) as url:
        first = await post(session, url + "/v1/completions", {"prompt": shared + " question one", "stream": True})
        body = {"prompt": shared + " question two", "stream": True, **STREAM_USAGE}
        second = await post(session, url + "/v1/completions", body)
        snap = await scrape_metrics(session, url)
    assert first.ttft_s >= 202 * 0.002  # all 202 prompt tokens prefilled
    usage = second.events[-2][1]["usage"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 192}  # 12 full blocks of 16
    assert second.ttft_s < first.ttft_s
    assert snap.total("vllm:prefix_cache_queries") == 404 and snap.total("vllm:prefix_cache_hits") == 192


def _binomial_ok(k: int, n: int, p: float) -> bool:
    return abs(k - n * p) <= 4 * math.sqrt(n * p * (1 - p)) + 1


async def test_http_faults_fire_at_their_rates(session):
    cfg = MockConfig(**FAST, output_tokens=1, fault_5xx_rate=0.1, fault_429_rate=0.2, retry_after_s=2.5, seed=1)
    n = 400
    async with running_mock_server(cfg) as url:
        results = [await post(session, url + "/v1/completions", {"prompt": "p"}) for _ in range(n)]
    statuses = [r.status for r in results]
    assert _binomial_ok(statuses.count(500), n, 0.1) and _binomial_ok(statuses.count(429), n, 0.2)
    assert statuses.count(200) + statuses.count(500) + statuses.count(429) == n
    limited = next(r for r in results if r.status == 429)
    assert limited.headers["Retry-After"] == "3"
    _assert_openai_error(limited, 429, "rate_limit_exceeded")
    _assert_openai_error(next(r for r in results if r.status == 500), 500, "mock_fault")


async def _classify(session, url: str) -> str:
    try:
        r = await post(session, url + "/v1/completions", {"prompt": "p", "stream": True}, timeout_s=5)
    except aiohttp.ClientPayloadError:
        return "drop"
    kinds = {"malformed" for _, ev in r.events if isinstance(ev, str) and ev != "[DONE]"}
    kinds |= {"error_event" for _, ev in r.events if isinstance(ev, dict) and "error" in ev}
    assert len(kinds) <= 1
    if not kinds:
        assert r.text_chunks()[-1][1]["choices"][0]["finish_reason"] == "stop"
        return "ok"
    if "error_event" in kinds:
        assert r.events[-1][1] == "[DONE]" and r.text_chunks()  # some text came before the error
    return kinds.pop()


async def test_stream_faults_fire_at_their_rates(session):
    rates = {"fault_drop_rate": 0.1, "fault_malformed_rate": 0.1, "fault_error_event_rate": 0.1}
    cfg = MockConfig(**FAST, tokens_per_chunk=1, output_tokens=4, seed=2, **rates)
    n = 300
    async with running_mock_server(cfg) as url:
        kinds = [await _classify(session, url) for _ in range(n)]
    for kind in ("drop", "malformed", "error_event"):
        assert _binomial_ok(kinds.count(kind), n, 0.1), (kind, kinds.count(kind))
    assert kinds.count("ok") + kinds.count("drop") + kinds.count("malformed") + kinds.count("error_event") == n


async def test_stall_trips_the_client_timeout_and_frees_the_slot(session):
    cfg = MockConfig(ttft_s=0.0, gap_s=0.01, output_tokens=5, fault_stall_rate=1.0, fault_stall_s=60.0)
    async with running_mock_server(cfg) as url:
        with pytest.raises(asyncio.TimeoutError):
            await post(session, url + "/v1/completions", {"prompt": "p", "stream": True}, timeout_s=0.3)
        running = None
        for _ in range(100):
            running = (await scrape_metrics(session, url)).total("vllm:num_requests_running")
            if running == 0:
                break
            await asyncio.sleep(0.02)
    assert running == 0


async def test_short_stall_delays_but_completes(session):
    cfg = MockConfig(ttft_s=0.0, gap_s=0.0, output_tokens=4, fault_stall_rate=1.0, fault_stall_s=0.3)
    async with running_mock_server(cfg) as url:
        r = await post(session, url + "/v1/completions", {"prompt": "p", "stream": True})
    # the stall is in the answer's time: a gap between two reads can come out shorter than it when the read
    # before it was late (a busy loop), but the last read cannot come sooner than the stall after sending
    assert r.events[-1][0] - r.t_send >= 0.3 and r.events[-1][1] == "[DONE]"


def test_thread_backed_server_for_sync_callers():
    import urllib.request

    with mock_server_in_thread(MockConfig(**FAST, output_tokens=3)) as url:
        req = urllib.request.Request(
            url + "/v1/completions",
            data=json.dumps({"prompt": "p"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = json.loads(resp.read())
    assert body["usage"]["completion_tokens"] == 3


async def test_serial_prefill_queues_prefills_but_not_decode(session):
    cfg = MockConfig(ttft_s=0.0, gap_s=0.0, output_tokens=1, prefill_s_per_token=0.002, serial_prefill=True)
    prompt = " ".join(f"w{i}" for i in range(100))  # 0.2 s of prefill each
    async with running_mock_server(cfg) as url:
        results = await asyncio.gather(
            *(post(session, url + "/v1/completions", {"prompt": prompt, "stream": True}) for _ in range(3))
        )
    ttfts = sorted(r.ttft_s for r in results)
    assert ttfts[2] >= 0.6  # the third prefill waited for two others
    firsts = sorted(r.text_chunks()[0][0] for r in results)
    assert firsts[1] - firsts[0] >= 0.19 and firsts[2] - firsts[1] >= 0.19  # one prefill at a time


async def test_send_times_are_recorded_on_the_shared_monotonic_clock(session):
    import time

    cfg = MockConfig(ttft_s=0.0, gap_s=0.005, tokens_per_chunk=2, output_tokens=6, record_send_times=True)
    async with running_mock_server(cfg) as url:
        t0 = time.monotonic()
        r = await post(session, url + "/v1/completions", {"prompt": "timed prompt", "stream": True})
        async with session.get(url + "/mock/send_times") as resp:
            log = await resp.json()
    (entry,) = log["requests"]
    assert entry["prompt"] == "timed prompt" and len(entry["chunks_s"]) == 3
    assert t0 <= entry["arrival_s"] <= entry["chunks_s"][0]
    # each chunk was written before the client saw it (perf_counter and monotonic share CLOCK_MONOTONIC on Linux)
    seen = [t for t, _ in r.text_chunks()]
    assert all(w <= s for w, s in zip(entry["chunks_s"], seen, strict=True))
    async with running_mock_server(MockConfig(**FAST)) as url, session.get(url + "/mock/send_times") as resp:
        assert resp.status == 404


async def test_ttft_jitter_spreads_first_chunks(session):
    cfg = MockConfig(ttft_s=0.05, ttft_jitter_s=0.2, gap_s=0.0, output_tokens=1, seed=5)
    async with running_mock_server(cfg) as url:
        results = await asyncio.gather(
            *(post(session, url + "/v1/completions", {"prompt": "p", "stream": True}) for _ in range(8))
        )
    ttfts = sorted(r.ttft_s for r in results)
    assert ttfts[0] >= 0.05
    assert ttfts[-1] - ttfts[0] >= 0.05  # 8 uniform draws over 200 ms: spread out (P(range < 50 ms) < 1e-3)


async def test_truth_log_has_each_stream_received_before_its_handler_and_writes(session, tmp_path):
    import time

    from speculab.mock.truth_log import read_truth_log

    path = tmp_path / "truth.jsonl"
    cfg = MockConfig(ttft_s=0.0, gap_s=0.005, tokens_per_chunk=2, output_tokens=6, truth_log=str(path))
    async with running_mock_server(cfg) as url:
        t0 = time.time_ns()
        await post(session, url + "/v1/completions", {"prompt": "timed prompt", "stream": True})
        await post(session, url + "/v1/completions", {"prompt": "not streamed", "stream": False})
        headers = {"X-Request-Id": "r-2", "Content-Type": "application/json"}
        body = json.dumps({"prompt": "second", "stream": True})
        async with session.post(url + "/v1/completions", data=body, headers=headers) as resp:
            await resp.read()
        t1 = time.time_ns()
        first, second = read_truth_log(path)  # flushed between requests, the server still running
    assert first["prompt"] == "timed prompt" and first["request_id"] is None and len(first["chunks_ns"]) == 3
    assert second["prompt"] == "second" and second["request_id"] == "r-2"
    for line in (first, second):  # on CLOCK_REALTIME, in the order things happened
        writes = [t for pair in zip(line["chunks_ns"], line["chunks_done_ns"], strict=True) for t in pair]
        times = [line["received_ns"], line["handler_ns"], *writes]
        assert t0 <= times[0] and times == sorted(times) and times[-1] <= t1
        assert line["received_ns"] != line["handler_ns"]  # the connection's own stamp, not the handler's fallback
