"""Cache reset between blocks (#40 item 1): the experiment key, what launch mode puts in the arms' environment, and
what one reset comes to against a scripted server (reset, refused, no answer, unavailable, off)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.config import parse_experiment
from speculab.errors import UserError
from speculab.harness.records import CacheResetOutcome
from speculab.harness.results.warnings import WarningKind
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.cache_reset import refusal_warning, reset_caches
from speculab.harness.servers.process import free_port
from speculab.mock.script import MockConfig
from speculab.mock.server import running_mock_server
from speculab.report.phrases import warning_text

VLLM = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000"]


def _yaml(cache: str = "", env: str = "{A: '1'}", candidate: str = "") -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 4}}
loads: {{operating: {{concurrency: 1}}}}
baseline: {{launch: {{engine: vllm, command: {json.dumps(VLLM)}, port: 8000, env: {env}}}}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
{cache}
{candidate}
"""


def test_the_key_defaults_to_between_blocks_and_refuses_other_values_in_one_line() -> None:
    assert parse_experiment(_yaml()).cache_reset == "between-blocks"
    assert parse_experiment(_yaml("cache: {reset: never}")).cache_reset == "never"
    with pytest.raises(UserError) as ei:
        parse_experiment(_yaml("cache: {reset: sometimes}"))
    assert "cache.reset" in str(ei.value) and "\n" not in str(ei.value)


def test_launch_mode_sets_vllms_dev_mode_in_every_arm_alike() -> None:
    plan = plan_experiment(parse_experiment(_yaml()))
    envs = [dict(a.launch.env) for a in plan.arms if a.launch is not None]
    assert envs == [{"A": "1", "VLLM_SERVER_DEV_MODE": "1"}] * 2
    assert plan.changes[0].verified  # the environments are equal: still a single change
    cand = [*VLLM, "--speculative-config", "{}"]
    given = plan_experiment(
        parse_experiment(_yaml(candidate=f"candidate: {{command: {json.dumps(cand)}, env: {{A: '1'}}}}"))
    )
    assert [a.launch.env.get("VLLM_SERVER_DEV_MODE") for a in given.arms if a.launch] == ["1", "1"]


def test_never_leaves_the_environment_as_given_and_a_users_value_stays() -> None:
    plan = plan_experiment(parse_experiment(_yaml("cache: {reset: never}")))
    assert plan.cache_reset == "never"
    assert all("VLLM_SERVER_DEV_MODE" not in a.launch.env for a in plan.arms if a.launch)
    theirs = plan_experiment(parse_experiment(_yaml(env="{VLLM_SERVER_DEV_MODE: '0'}")))
    assert {a.launch.env["VLLM_SERVER_DEV_MODE"] for a in theirs.arms if a.launch} == {"0"}


def _reset(cfg: MockConfig, engine: str = "vllm", **kw) -> CacheResetOutcome:
    async def go() -> CacheResetOutcome:
        async with running_mock_server(cfg) as url, aiohttp.ClientSession() as session:
            return await reset_caches(session, url + "/v1", adapter_for(engine).cache_reset, 3, **kw)

    return asyncio.run(go())


def test_a_server_that_answers_2xx_is_reset(capfd) -> None:
    done = _reset(MockConfig(prefix_cache=True, dev_mode=True))
    assert done == CacheResetOutcome(3, "reset", ("/reset_prefix_cache",))
    assert capfd.readouterr().err.count("mock-server: prefix cache reset") == 1  # at the root, not under /v1


def test_a_refusal_keeps_the_status_and_the_servers_words() -> None:
    done = _reset(MockConfig(prefix_cache=True))  # no dev mode: 404, as vLLM
    assert done.outcome == "refused" and done.endpoints == ("/reset_prefix_cache",)
    assert done.detail.startswith("POST /reset_prefix_cache: HTTP 404 (")
    assert "/reset_prefix_cache" in done.detail.split("HTTP 404", 1)[1]  # the mock's JSON error message


def test_a_2xx_that_says_success_false_did_not_reset() -> None:
    """vLLM 0.32 answers 200 {"success": false} while blocks are still held (entrypoints/serve/dev/cache)."""
    from aiohttp import web

    async def go() -> CacheResetOutcome:
        async def held(_: web.Request) -> web.Response:
            return web.json_response({"success": False})

        async def flushed(_: web.Request) -> web.Response:
            return web.Response(text="Cache flushed.")

        app = web.Application()
        app.router.add_post("/reset_prefix_cache", held)
        app.router.add_post("/flush_cache", flushed)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        try:
            async with aiohttp.ClientSession() as session:
                refused = await reset_caches(session, url, adapter_for("vllm").cache_reset, 0)
                done = await reset_caches(session, url, adapter_for("sglang").cache_reset, 0)
        finally:
            await runner.cleanup()
        assert done.outcome == "reset"  # SGLang's plain-text answer: its status says it
        return refused

    held = asyncio.run(go())
    assert held.outcome == "refused" and held.detail == "POST /reset_prefix_cache: HTTP 200 with success: false"


def test_off_and_unavailable_send_nothing(capfd) -> None:
    assert _reset(MockConfig(dev_mode=True), mode="never") == CacheResetOutcome(3, "off")
    assert _reset(MockConfig(dev_mode=True), engine="tgi") == CacheResetOutcome(3, "unavailable")
    assert "prefix cache reset" not in capfd.readouterr().err


def test_a_server_that_does_not_answer_is_refused_with_why() -> None:
    async def go() -> CacheResetOutcome:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
            return await reset_caches(session, url, adapter_for("sglang").cache_reset, 0, timeout_s=5)

    done = asyncio.run(go())
    assert done.outcome == "refused" and done.detail.startswith("POST /flush_cache: no answer: ")


def test_the_note_names_the_server_what_it_said_and_both_ways_out() -> None:
    done = CacheResetOutcome(0, "refused", ("/reset_prefix_cache",), "POST /reset_prefix_cache: HTTP 404")
    refused = refusal_warning("candidate ngram-k2", "http://b:8000", done, adapter_for("vllm").cache_reset)
    assert refused.kind == WarningKind.CACHE_RESET_REFUSED and refused.subject == "candidate ngram-k2"
    assert refused.fields["env"] == {"VLLM_SERVER_DEV_MODE": "1"}
    note = warning_text(refused)  # the report's words
    assert note.startswith("candidate ngram-k2: the server at http://b:8000 refused to reset its cache")
    assert "(POST /reset_prefix_cache: HTTP 404)" in note and "start it with VLLM_SERVER_DEV_MODE=1" in note
    assert "`cache: {reset: never}`" in note
    other = warning_text(refusal_warning("baseline", "http://a", done, adapter_for("sglang").cache_reset))
    assert "check that the server allows it" in other


def test_the_outcome_round_trips_through_run_json() -> None:
    done = CacheResetOutcome(2, "refused", ("/flush_cache",), "POST /flush_cache: HTTP 400")
    assert CacheResetOutcome.from_dict(json.loads(json.dumps(done.to_dict()))) == done
