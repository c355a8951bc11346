"""The search finds a known crossover (issue 39, done-means): a plain and a speculative mock as the two arms of a
two-URL A/B, the candidate 2x faster per token at one stream and its effect shrinking linearly with the streams in
flight, so that speculation stops paying at concurrency 24 (`mock.truth`). The search over 1-48 must report an
interval that holds 24, at most 12 streams wide, after at most 10 probes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.fakes.words import words

from integration.mock_process import mock_child
from speculab.commands.run.blocks import Silent
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_crossover
from speculab.report.render import render_run_dir

# One token per chunk against two at the same gap: 2x faster per token at one stream. The candidate's gaps grow by
# 1/23 per extra request in flight: its relative per-token time is (1 + (c - 1) / 23) / 2, which is 1 at c = 24.
# 17 tokens (odd) make the 2x exact. Gaps of 30 ms keep 48 streams at ~1,600 chunks/s: at 20 ms (~2,400 chunks/s) the
# client of a slower 2-core VM (AMD EPYC Zen 3, 2026-12-06) held only 93-95% of the baseline's 48 streams, below the
# verdict's 95% load gate, and the search measured its top probe again until its budget ran out. The gap's length
# does not move the crossover (`mock.truth`). The mock's timing is the truth here: `paced`.
TOKENS = 17
PLAIN = {"ttft_s": 0.002, "gap_s": 0.03, "tokens_per_chunk": 1, "output_tokens": TOKENS}
SPEC = PLAIN | {"tokens_per_chunk": 2, "decode_slowdown_per_request": 1 / 23, "num_speculative_tokens": 1}


def done_means_yaml(url_a: str, url_b: str) -> str:
    """Issue 39's done-means search: 1-48 streams, tolerance 12, at most 10 probes, on the PLAIN and SPEC mocks."""
    return f"""
workload: {{spec: "synthetic:input=10,output={TOKENS}", num_prompts: 288, warmup_requests: 2}}
sampling: {{max_tokens: {TOKENS}, seed: 0}}
loads: {{search: {{kind: concurrency, low: 1, high: 48, tolerance: 12, max_probes: 10, groups: 6, max_groups: 6}}}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
"""


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_a_search_brackets_the_known_crossover_within_tolerance_and_budget(tmp_path: Path) -> None:
    truth = true_crossover(MockConfig(**PLAIN), MockConfig(**SPEC))
    assert truth == pytest.approx(24.0)
    out = tmp_path / "run"
    with mock_child(**PLAIN) as (url_a, _), mock_child(**SPEC) as (url_b, _):
        outcome = asyncio.run(run_plan(plan_experiment(parse_experiment(done_means_yaml(url_a, url_b))), out))
    assert not outcome.interrupted
    search = build_report(load_inputs(out)).search
    assert search is not None
    c = search.crossover
    assert search.status == "crosses", search
    assert c.low is not None and c.high is not None and c.estimate is not None
    assert c.low <= truth <= c.high, (c, search.probes)
    assert c.high - c.low <= 12, (c, search.probes)
    assert len(search.probes) <= 10, search.probes
    assert search.stop == "tolerance", search.stop

    render_run_dir(out)  # summary.json and report.html, as `speculab report DIR` writes them
    saved = json.loads((out / "summary.json").read_text())["search"]
    assert {"kind", "metric", "candidate", "crossover", "probes", "status"} <= set(saved)
    assert saved["kind"] == "concurrency" and saved["metric"] == "tpot_s" and saved["candidate"] == "ngram-k1"
    assert set(saved["crossover"]) == {"estimate", "low", "high"}
    assert saved["probes"] == list(search.probes)
    assert saved["probes"][:3] == [1, 7, 48]  # both ends and the geometric middle first
    # every probe is a level like any other: its own verdict, in the report's levels
    levels = json.loads((out / "summary.json").read_text())["levels"]
    assert {lv["value"] for lv in levels} == set(search.probes)
    html = (out / "report.html").read_text()
    assert "The search for the crossover" in html and "search: ngram k=1 stops paying on TPOT at concurrency" in html


# crossing at 5 (gaps growing by a quarter per extra stream) in 1-16: the first round's bracket, 4 to 16, is far
# wider than the tolerance, so a second round certainly follows the first. Gaps of 10 ms: with 2 ms ones (12 ms
# requests) a busy machine's client kept 94% of one stream in flight, 81% of 16, every probe below the 95% load gate,
# and the search stopped with no verdict before its second round (a clean-clone rehearsal, 2026-12-06)
FAST = PLAIN | {"gap_s": 0.01, "output_tokens": 5}
FAST_SPEC = FAST | {"tokens_per_chunk": 2, "decode_slowdown_per_request": 0.25, "num_speculative_tokens": 1}


STOPS = ("tolerance", "budget", "faster throughout", "slower throughout", "no verdict", "no further probe")


def small_search_yaml(url_a: str, url_b: str) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=5", num_prompts: 100, warmup_requests: 1}}
sampling: {{max_tokens: 5}}
loads: {{search: {{kind: concurrency, low: 1, high: 16, tolerance: 2, max_probes: 5, groups: 6, max_groups: 6}}}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
"""


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_an_interrupted_search_leaves_a_partial_run_that_says_so_then_resumes_to_its_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    stop = asyncio.Event()

    class StopAfterFirstRound(Silent):
        def phase(self, text: str) -> None:
            if text.startswith("search after"):
                stop.set()  # as a Ctrl-C between rounds would

    class Said(Silent):
        def __init__(self) -> None:
            self.lines: list[str] = []

        def phase(self, text: str) -> None:
            self.lines.append(text)

    with mock_child(**FAST) as (url_a, _), mock_child(**FAST_SPEC) as (url_b, _):
        plan = plan_experiment(parse_experiment(small_search_yaml(url_a, url_b)))
        outcome = asyncio.run(run_plan(plan, out, stop=stop, reporter=StopAfterFirstRound()))
        assert outcome.interrupted
        inputs = load_inputs(out)
        assert any(
            n.startswith("the search was interrupted after 3 probe(s), in round 2") for n in words(inputs.notes)
        ), inputs.notes
        report = build_report(inputs)
        assert report.search is not None and report.search.stop is None  # it did not finish, and says so
        assert report.search.probes == (1, 4, 16)  # the round it was about to run was not measured
        assert report.recommendation is not None and report.recommendation.form == "incomplete"
        render_run_dir(out)  # `speculab report DIR` reads the partial run
        assert json.loads((out / "summary.json").read_text())["search"]["probes"] == [1, 4, 16]
        cut = inputs.setup.search["rounds"]  # type: ignore[index]

        said = Said()
        resumed = asyncio.run(run_plan(plan_experiment(parse_experiment(small_search_yaml(url_a, url_b))), out,
                                       resume=True, reporter=said))  # fmt: skip
        assert not resumed.interrupted
        again = Said()
        asyncio.run(run_plan(plan, out, resume=True, reporter=again))  # a finished search: nothing runs
    # the rounds recorded when it stopped, the one it was about to run included (which loads the policy placed there
    # depends on how the first round measured: c16 may need measuring again where the machine cannot offer 16)
    placed = f"placed {sum(len(r) for r in cut)} probe(s) in {len(cut)} round(s)"
    assert said.lines[0].startswith(f"resuming {out}: the search had {placed}"), said.lines
    assert any(line.endswith("(resumed)") for line in said.lines)
    assert any(line.startswith("the search is complete (it stopped: ") for line in again.lines), again.lines
    inputs = load_inputs(out)
    assert inputs.setup.search["rounds"][: len(cut)] == cut  # type: ignore[index]  # the rounds measured count
    assert not any(n.startswith("the search was interrupted") for n in words(inputs.notes)), inputs.notes
    search = build_report(inputs).search
    # it went on to one of a search's ends (where this short, fast search ends depends on the machine's load: a
    # probe whose offered load was not achieved has no verdict; the known truth is the kill test's, below)
    assert search is not None and search.stop in STOPS and len(search.probes) > 3, search
    render_run_dir(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["search"]["probes"][:3] == [1, 4, 16] and summary["search"]["stop"] == search.stop
    assert any("resumed at" in json.dumps(w) for w in summary["warnings"])  # summary.json says it was resumed
