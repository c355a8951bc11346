"""A known crossover (issue 39 item 5): a plain and a speculative mock run as the two arms of a two-URL A/B, whose
measured TPOT speedup follows `mock.truth`'s formula at each load and changes sign where the formula says."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from integration.mock_process import mock_child
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_crossover, true_tpot_speedup

# One token per chunk against two at the same gap: 2x faster per token at one stream. The candidate's gaps grow by
# a quarter per extra request in flight, so its relative per-token time is (1 + 0.25 (c - 1)) / 2: crossover at 5.
# 17 tokens (odd) make the 2x exact: 16 gaps of one token against 8 of two.
TOKENS = 17
PLAIN = {"ttft_s": 0.002, "gap_s": 0.005, "tokens_per_chunk": 1, "output_tokens": TOKENS}
SPEC = PLAIN | {"tokens_per_chunk": 2, "decode_slowdown_per_request": 0.25, "num_speculative_tokens": 1}
LEVELS = {1: "c1", 3: "c3", 9: "c9"}
# The client's and server's wake-ups are late by a millisecond or two on a busy 2-core machine; over 16 token
# intervals of 2.5-15 ms that moved a ratio by under 1 % here (2 runs), well inside this and far from the sign change.
TOLERANCE = 0.10


@pytest.mark.slow
# the mock's scripted times (5 ms gaps), held to 10 %: beside paced tests, not ordinary ones. As an ordinary test it
# failed twice on the 2-core Zen 3 VM beside CPU-bound tests (a speedup 12 % off, 2026-12-06; a TPOT pair dropped,
# its chunks read at once, in a clean-clone rehearsal of 2026-12-07)
@pytest.mark.paced
def test_two_url_ab_of_scripted_mocks_measures_the_known_crossover(tmp_path: Path) -> None:
    truth = {c: true_tpot_speedup(MockConfig(**PLAIN), MockConfig(**SPEC), c) for c in LEVELS}
    assert true_crossover(MockConfig(**PLAIN), MockConfig(**SPEC)) == pytest.approx(5.0)
    assert truth[1] == pytest.approx(2.0) and truth[3] > 1 > truth[9]
    with mock_child(**PLAIN) as (url_a, _), mock_child(**SPEC) as (url_b, _):
        y = f"""
workload: {{spec: "synthetic:input=10,output={TOKENS}", num_prompts: 27, warmup_requests: 2}}
sampling: {{max_tokens: {TOKENS}, seed: 0}}
loads: {{operating: {{concurrency: 9}}, sweep: [{{concurrency: 1}}, {{concurrency: 3}}, {{concurrency: 9}}]}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
"""
        asyncio.run(run_plan(plan_experiment(parse_experiment(y)), tmp_path / "run"))
    report = build_report(load_inputs(tmp_path / "run"))
    measured = {}
    for c, level in LEVELS.items():
        comparison = report.level(level).comparison("ngram-k1")
        assert comparison is not None, level
        tpot = comparison.metric("tpot_s")
        # every prompt paired or counted out; a few pairs may drop where a request's chunks were read at once (its
        # TPOT undefined): 3 of 27 at c3 once on the held lane beside the suite's background (2026-12-07), the
        # speedup still within its tolerance. Pairing every prompt exactly is test_ab_workers'.
        assert tpot is not None and tpot.n_pairs + tpot.n_dropped == 27 and tpot.n_pairs >= 24, (level, tpot)
        measured[c] = tpot.speedup
    for c, speedup in measured.items():
        assert speedup == pytest.approx(truth[c], rel=TOLERANCE), (measured, truth)
    assert measured[1] > measured[3] > 1 > measured[9], measured  # faster below the crossover, slower above it
