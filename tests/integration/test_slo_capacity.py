"""Each arm's highest load within its SLO, found on the two mocks (issue 39 item 3): a plain mock whose TPOT is the
same at every load and a speculative one 2x faster per token at one stream whose gaps stretch with the streams in
flight (`mock.truth`). A TPOT limit between the two puts the speculative arm's edge at a known concurrency and the
plain arm outside it at every load: the search's run must report an interval that holds the edge, and that plain
misses it already at the lowest load."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from integration.mock_process import mock_child
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_tpot_s
from speculab.report.render import render_run_dir

# 9 tokens (odd: two a chunk make it exactly 2x) at 20 ms gaps: plain 20 ms per token at every load; the candidate
# 10 ms x (1 + (c - 1) / 4), so speculation stops paying at 5 streams
TOKENS = 9
PLAIN = {"ttft_s": 0.002, "gap_s": 0.02, "tokens_per_chunk": 1, "output_tokens": TOKENS}
SPEC = PLAIN | {"tokens_per_chunk": 2, "decode_slowdown_per_request": 0.25, "num_speculative_tokens": 1}
LIMIT_S = 0.01875  # the candidate's TPOT at 4.5 streams: 7 % above its 4, 6 % below its 5; below plain's 20 ms


def _edge(cfg: MockConfig, limit_s: float) -> float:
    """The (real) concurrency at which the mock's true TPOT reaches the limit: it is a (1 + s (c - 1))."""
    a = true_tpot_s(cfg, 1)
    assert a is not None
    return 1 + (limit_s / a - 1) / cfg.decode_slowdown_per_request


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_each_arm_gets_its_highest_load_within_the_slo_from_the_search_probes(tmp_path: Path) -> None:
    truth = _edge(MockConfig(**SPEC), LIMIT_S)
    assert truth == pytest.approx(4.5)
    assert (true_tpot_s(MockConfig(**PLAIN), 1) or 0) > LIMIT_S  # plain is outside the SLO at any load
    out = tmp_path / "run"
    with mock_child(**PLAIN) as (url_a, _), mock_child(**SPEC) as (url_b, _):
        y = f"""
workload: {{spec: "synthetic:input=10,output={TOKENS}", num_prompts: 96, warmup_requests: 1}}
sampling: {{max_tokens: {TOKENS}, seed: 0}}
loads: {{search: {{kind: concurrency, low: 1, high: 16, tolerance: 2, max_probes: 6, groups: 6, max_groups: 6}}}}
slos: {{tpot_s: {LIMIT_S}, attainment: 0.9}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
"""
        outcome = asyncio.run(run_plan(plan_experiment(parse_experiment(y)), out))
    assert not outcome.interrupted
    report = build_report(load_inputs(out))
    cap = report.slo_capacity
    assert cap is not None and report.search is not None and report.search.goodput == cap
    spec, plain = cap["ngram-k1"], cap["baseline"]
    probes = sorted(report.search.probes)
    assert spec.status == "crosses", (spec, probes)
    # a probe's 6 groups all within the SLO do not decide it (docs/statistics.md): the lower end may stay open
    assert spec.high is not None and (spec.low or 0) <= truth <= spec.high, (spec, probes)
    assert spec.estimate is not None and (spec.low or 0) <= spec.estimate <= spec.high
    assert plain.status == "misses throughout" and plain.high == probes[0], (plain, probes)
    assert dict(spec.metric_limits) == {"tpot_s": LIMIT_S} and spec.target == 0.9

    render_run_dir(out)  # summary.json and report.html, as `speculab report DIR` writes them
    saved = json.loads((out / "summary.json").read_text())
    assert set(saved["slo_capacity"]["ngram-k1"]) >= {"estimate", "low", "high", "status", "target", "metric_limits"}
    assert saved["search"]["goodput"] == saved["slo_capacity"]
    html = (out / "report.html").read_text()
    assert "Highest load within the SLO" in html and "misses it already at the lowest load (concurrency 1)" in html
