"""Prometheus snapshots and the numbers derived from them, on metric text in vLLM's and SGLang's real format."""

from __future__ import annotations

import contextlib
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from speculab.harness.servers.scrape import (
    MetricsSnapshot,
    counter_deltas,
    metrics_url,
    parse_metrics,
    scrape_metrics,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _load(name: str) -> MetricsSnapshot:
    return parse_metrics((FIXTURES / name).read_text())


def test_parse_keeps_every_sample_with_labels_and_types():
    snap = _load("vllm_spec_before.prom")
    assert len(snap.samples) == 24  # _created gauges included: nothing is dropped
    created = snap.select("vllm:prompt_tokens_created", engine="1")
    assert created[0].value == pytest.approx(1.7329810227341852e9)
    assert snap.total("vllm:prompt_tokens_total") == 20000.0
    assert snap.total("vllm:prompt_tokens_total", engine="0") == 12000.0
    assert ("vllm:spec_decode_num_drafts", "counter") in snap.types


def test_total_suffix_is_optional_both_ways():
    snap = _load("vllm_spec_before.prom")
    assert snap.total("vllm:spec_decode_num_drafts") == snap.total("vllm:spec_decode_num_drafts_total") == 500.0
    bare = parse_metrics("# TYPE speculab:spec_decode_num_drafts untyped\nspeculab:spec_decode_num_drafts 7\n")
    assert bare.total("speculab:spec_decode_num_drafts_total") == 7.0
    assert bare.total("speculab:nothing") is None


def test_counter_deltas_for_token_counters():
    before, after = _load("vllm_spec_before.prom"), _load("vllm_spec_after.prom")
    d = counter_deltas(before, after, ["vllm:prompt_tokens", "vllm:generation_tokens_total", "vllm:absent_total"])
    assert d == {"vllm:prompt_tokens": 3000.0, "vllm:generation_tokens_total": 500.0, "vllm:absent_total": None}
    assert counter_deltas(after, before, ["vllm:prompt_tokens"]) == {"vllm:prompt_tokens": None}  # reset
    assert counter_deltas(parse_metrics(""), after, ["vllm:prompt_tokens"]) == {"vllm:prompt_tokens": 23000.0}


def test_snapshot_round_trips_through_dict():
    snap = _load("vllm_spec_after.prom")
    again = MetricsSnapshot.from_dict(snap.to_dict())
    assert again == snap


def test_metrics_url_is_at_the_root():
    assert metrics_url("http://h:8000") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000/v1/") == "http://h:8000/metrics"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


async def _serve(routes: dict[str, web.Response]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    for path, resp in routes.items():
        app.router.add_get(path, _handler(resp))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


def _handler(resp: web.Response):
    async def handle(_request: web.Request) -> web.Response:
        return resp

    return handle


async def test_scrape_metrics_over_http():
    good = web.Response(text=_read("vllm_spec_before.prom"), content_type="text/plain")
    html = web.Response(text="<html><body>not metrics {</body></html>", content_type="text/html")
    runner, url = await _serve({"/metrics": good})
    runner2, url2 = await _serve({"/metrics": html})
    runner3, url3 = await _serve({})
    try:
        async with aiohttp.ClientSession() as session:
            times = iter([42.0])
            snap = await scrape_metrics(session, url + "/v1", clock=lambda: next(times))
            assert snap is not None and snap.t_s == 42.0
            assert snap.total("vllm:spec_decode_num_drafts") == 500.0
            assert await scrape_metrics(session, url2) is None  # a page that is not Prometheus text
            assert await scrape_metrics(session, url3) is None  # 404
            await runner3.cleanup()
            assert await scrape_metrics(session, url3, timeout_s=2) is None  # nothing listening
    finally:
        await runner.cleanup()
        await runner2.cleanup()
        await runner3.cleanup()


async def test_scrape_sends_the_endpoint_key_when_metrics_are_private():
    """`speculab serve --metrics-private` keeps /metrics behind the key: the harness must send it to read acceptance."""
    seen: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != "Bearer k-1":
            return web.Response(status=401)
        return web.Response(text=_read("vllm_spec_before.prom"), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        async with aiohttp.ClientSession() as session:
            assert await scrape_metrics(session, f"http://{host}:{port}") is None
            snap = await scrape_metrics(session, f"http://{host}:{port}", api_key="k-1")
    finally:
        await runner.cleanup()
    assert snap is not None and seen == [None, "Bearer k-1"]


@pytest.mark.parametrize(
    "text",
    [
        "this is not { prometheus",
        'vllm:num_requests_running{model="a} 1\n',
        "vllm:num_requests_running 1 2 3 4\n",
        "# TYPE a counter\n# TYPE a gauge\na 1\n",
        "<html><body>login required</body></html>",
    ],
)
def test_text_the_parser_chokes_on_is_a_value_error_only(text):
    """Issue 25: prometheus_client's parser raises more than ValueError on junk; callers catch ValueError."""
    with contextlib.suppress(ValueError):
        parse_metrics(text)


def test_samples_that_are_not_finite_numbers_are_left_out():
    snap = parse_metrics("a_total NaN\nb_total +Inf\nc_total 1e308\nd_total -Inf\ne_total 3\nf_total 1e15\n")
    assert {s.name: s.value for s in snap.samples} == {"e_total": 3.0, "f_total": 1e15}  # 1e308: past 1e300
    assert snap.total("a_total") is None  # a NaN counter reads as not exposed, never as a number


def test_counters_that_accept_more_than_they_draft_give_no_acceptance():
    from speculab.harness.servers.acceptance import acceptance_with_reason
    from speculab.harness.servers.adapters import adapter_for
    from speculab.report.phrases import reason_text

    def snap(drafts, tokens, accepted):
        return parse_metrics(
            f"vllm:spec_decode_num_drafts_total {drafts}\nvllm:spec_decode_num_draft_tokens_total {tokens}\n"
            f"vllm:spec_decode_num_accepted_tokens_total {accepted}\n"
        )

    acc, why = acceptance_with_reason(adapter_for("vllm"), snap(0, 0, 0), snap(10, 20, 50))
    assert acc is None and why is not None and why.fields["accepted_delta"] == 50 and why.fields["drafted_delta"] == 20
    assert reason_text(why) == (
        "vllm:spec_decode_num_accepted_tokens_total grew more than vllm:spec_decode_num_draft_tokens_total (50 > 20): "
        "the counters are inconsistent"
    )
    acc, why = acceptance_with_reason(adapter_for("vllm"), snap(0, 0, 0), snap(10, 20, 10))
    assert acc is not None and acc.acceptance_rate == 0.5


@pytest.mark.parametrize("name", ["vllm_spec_before.prom", "vllm_spec_after.prom", "sglang_spec.prom"])
def test_only_the_families_asked_for_are_parsed_and_they_are_parsed_whole(name: str):
    text = (FIXTURES / name).read_text()
    whole = parse_metrics(text)
    families = [f for f, _ in whole.types]
    assert len(families) >= 3
    for family in families:
        base = family.removesuffix("_total")
        some = parse_metrics(text, only=[family])
        assert some.samples == tuple(s for s in whole.samples if s.name.startswith(base)) != ()
        assert some.types == tuple((f, t) for f, t in whole.types if f.startswith(base))
    both = parse_metrics(text, only=[families[0], families[-1] + "_total"])
    assert {s.name for s in both.samples} == {
        s.name for s in whole.samples if s.name.startswith((families[0], families[-1]))
    }
    assert parse_metrics(text, only=["nothing:here"]).samples == ()
