"""SGLang's per-request acceptance over its OpenAI API (#40 item 5): asked with `return_spec_tokens_details`, read from
`sglext.spec_tokens_details` in a stream (a chunk of its own) and in a body. The fixture is shaped from SGLang's
source of that field (fixtures/sglang_spec_tokens_details.json says where)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from speculab.commands.bench.run import bench_endpoint
from speculab.harness.client.endpoint import EndpointConfig
from speculab.harness.client.probe import ServerInfo
from speculab.harness.client.response import build_record
from speculab.harness.client.stream import StreamState
from speculab.harness.records import RequestSpec
from speculab.harness.servers.adapters import response_reader
from speculab.protocol.chunks import MalformedChunk, parse_body

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "sglang_spec_tokens_details.json").read_text())
SPEC = RequestSpec(index=0, prompt="p")
READ = response_reader("sglang")
EXPECTED = {"drafts": 4, "draft_tokens": 12, "accepted_tokens": 8, "source": "sglang sglext.spec_tokens_details"}


def _streamed(events: list) -> object:
    st = StreamState("chat", read=READ)
    t = 1.0
    for ev in [*events, "[DONE]"]:
        t += 0.01
        data = ev if isinstance(ev, str) else json.dumps(ev)
        if st.feed(f"data: {data}\n\n".encode(), t):
            break
    return st.record(spec=SPEC, scheduled_s=0.9, sent_s=1.0, end_s=t)


def _unary(body: dict) -> object:
    d = parse_body(json.dumps(body), "completions")
    return build_record(SPEC, d, scheduled_s=0.9, sent_s=1.0, end_s=1.2, warmup=False, stream=False, error=None,
                        logprobs=None, read=READ)  # fmt: skip


def test_a_stream_carries_it_in_a_chunk_of_its_own_before_usage() -> None:
    r = _streamed(FIXTURE["stream"])
    assert r.ok and r.output_text == "one two three four" and r.completion_tokens == 12
    assert r.speculation == EXPECTED
    kept = r.extra["spec_tokens_details"]  # the server's own rate and length, as it said them
    assert kept["spec_accept_rate"] == pytest.approx(8 / 12) and kept["spec_accept_length"] == 3.0
    assert kept["spec_verify_ct"] == 4 and "spec_correct_drafts_histogram" in kept["dropped"]


def test_a_body_carries_it_at_its_top_level() -> None:
    r = _unary(FIXTURE["body"])
    assert r.ok and r.speculation == EXPECTED
    assert r.extra["spec_tokens_details"]["spec_num_proposed_drafts"] == 12


def test_n_above_one_gives_a_list_and_the_first_is_read() -> None:
    body = json.loads(json.dumps(FIXTURE["body"]))
    first = body["sglext"]["spec_tokens_details"]
    body["sglext"]["spec_tokens_details"] = [first, {**first, "spec_verify_ct": 99}]
    assert _unary(body).speculation == EXPECTED


def test_sglangs_zero_for_a_count_it_lacks_is_not_an_acceptance_above_one() -> None:
    body = json.loads(json.dumps(FIXTURE["body"]))
    body["sglext"]["spec_tokens_details"]["spec_num_proposed_drafts"] = 0  # `or 0`: a release that does not count it
    assert _unary(body).speculation == {**EXPECTED, "draft_tokens": None, "accepted_tokens": None}


@pytest.mark.parametrize("sglext", [None, "x", {"spec_tokens_details": None}, {"spec_tokens_details": []}])
def test_no_details_is_no_speculation_not_an_error(sglext) -> None:
    body = {**FIXTURE["body"], "sglext": sglext}
    r = _unary(body)
    assert r.ok and r.speculation is None and "spec_tokens_details" not in r.extra


def test_details_nested_past_the_depth_limit_are_malformed() -> None:
    deep: object = 1
    for _ in range(100):
        deep = [deep]
    body = json.loads(json.dumps(FIXTURE["body"]))
    body["sglext"]["spec_tokens_details"]["spec_cap_lens_histogram"] = deep
    with pytest.raises(MalformedChunk):
        parse_body(json.dumps(body), "completions")


def test_an_sglang_endpoint_is_asked_for_the_details_and_the_users_extra_body_wins() -> None:
    info = ServerInfo(("m",), ({"id": "m"},))
    ep, engine = bench_endpoint(EndpointConfig(base_url="http://s", model="m"), info, {"sglang:spec_accept_length"})
    assert engine == "sglang" and ep.extra_body == {"return_spec_tokens_details": True}
    assert ep.read == response_reader("sglang")  # and its answers are read by its adapter
    mine = EndpointConfig(base_url="http://s", model="m", extra_body={"return_spec_tokens_details": False})
    assert bench_endpoint(mine, info, {"sglang:spec_accept_length"})[0].extra_body == {
        "return_spec_tokens_details": False
    }
    other, engine = bench_endpoint(EndpointConfig(base_url="http://v", model="m"), info, {"vllm:num_requests_running"})
    assert engine == "vllm" and "return_spec_tokens_details" not in other.extra_body


def test_the_run_asks_an_sglang_arm_for_the_details(tmp_path: Path) -> None:
    from speculab.commands.run.blocks import BlockRunner, Silent
    from speculab.commands.run.plan import plan_experiment
    from speculab.config import parse_experiment

    plan = plan_experiment(
        parse_experiment("""
workload: {spec: "synthetic:input=10,output=8", num_prompts: 2}
loads: {operating: {concurrency: 1}}
baseline: {url: "http://a:1"}
candidate: {url: "http://b:1"}
speculation: {method: ngram, num_speculative_tokens: 2}
""")
    )
    engines = {"baseline": "sglang", "ngram-k2": "vllm"}
    runner = BlockRunner(plan, tmp_path, None, asyncio.Event(), Silent(), lambda: 0.0, engines.__getitem__)  # type: ignore[arg-type]
    base, cand = plan.arms
    assert runner.endpoint(base, "m").extra_body["return_spec_tokens_details"] is True
    assert "return_spec_tokens_details" not in runner.endpoint(cand, "m").extra_body
