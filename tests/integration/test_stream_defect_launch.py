"""Stream against unary through `speculab run` (issue 50 item 3.2's done-means): two launched mock servers, the
candidate scripted to drop its last 2 tokens only when streaming (vllm#30204). The candidate is named as a
streaming-path defect, distinct from outputs that differ; the plain arm is not. And in two-URL mode, both arms
streaming whole, and above temperature 0."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from fakes.cli_runner import run_main
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs, unary_file
from speculab.harness.servers.process import free_port
from speculab.harness.verdict.build import build_report
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

SRC = str(Path(__file__).resolve().parents[2] / "src")


def mock(port: int, *extra: str) -> str:
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "1", "--gap-ms", "1"]
    return json.dumps([*args, "--output-tokens", "9", *extra])


def test_a_candidate_that_drops_its_last_tokens_only_when_streaming_is_named_a_streaming_defect(tmp_path, capsys):
    port = free_port()
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"""
workload: {{spec: "synthetic:input=10,output=9", num_prompts: 8, warmup_requests: 0}}
sampling: {{max_tokens: 9}}
loads: {{operating: {{concurrency: 2}}}}
checks: {{stream_unary: 4}}
baseline:
  launch: {{engine: other, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {mock(port, "--tokens-per-chunk", "2", "--stream-drop-last-tokens", "2")}}}
""",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code, stdout, err = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, err
    for arm in ("baseline", "ngram-k1"):  # each arm's sample, a file of its own, unary
        unary = [json.loads(line) for line in (out / "runs" / arm / "unary.jsonl").read_text().splitlines()]
        assert len(unary) == 4 and not any(r["stream"] for r in unary)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    corr = summary["candidates"][0]["correctness"]
    assert corr["worse"] and corr["verdict"]["kind"] == "streaming_defect"
    check = corr["stream_unary"]
    assert check["baseline"]["passed"] == check["baseline"]["checked"] == 4  # the plain arm streams whole
    assert check["candidate"]["passed"] == 0 and check["candidate"]["checked"] == 4
    first = check["finding"]["fields"]["first"]
    assert (first["kind"], first["dropped_tokens"]) == ("dropped", 2)
    assert check["finding"]["text"].startswith("streaming-path defect: 4 of 4 prompts streamed otherwise")
    kinds = [w["kind"] for w in corr["warnings"]]
    assert kinds.count("streaming_defect") == 1  # the candidate's; none for the baseline
    assert "correctness: streaming-path defect" in stdout, stdout
    # faster, but a defect of its streams holds it back: correctness is a guardrail
    assert {a["answer"] for a in summary["recommendation"]["answers"]} == {"plain"}


def test_two_url_mode_sends_each_arm_its_sample_after_the_first_load_and_a_sound_candidate_streams_alike(tmp_path):
    """The same check when both servers are already running: each arm's sample once, after the first load; two mocks
    that stream whole are alike, and above temperature 0 nothing is sent and the report says it was not judged."""
    fast = MockConfig(ttft_s=0.001, gap_s=0.001, output_tokens=6)
    with mock_server_in_thread(fast) as a, mock_server_in_thread(fast) as b:
        for temperature in (0.0, 0.7):
            y = f"""
workload: {{spec: "synthetic:input=10,output=6", num_prompts: 8}}
sampling: {{max_tokens: 6, temperature: {temperature}}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 2}}}}
checks: {{stream_unary: 3}}
baseline: {{url: "{a}"}}
candidate: {{url: "{b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""
            out = tmp_path / f"t{temperature}"
            asyncio.run(run_plan(plan_experiment(parse_experiment(y)), out))
            inputs = load_inputs(out)
            check = build_report(inputs).candidates[0].correctness.stream_unary
            if temperature == 0:
                assert {arm: len(recs) for arm, recs in inputs.unary.items()} == {"baseline": 3, "ngram-k2": 3}
                assert check.finding.kind.value == "stream_unary_alike" and not check.worse
            else:
                assert (
                    not unary_file(out, "baseline").exists() and check.finding.kind.value == "stream_unary_not_judged"
                )
