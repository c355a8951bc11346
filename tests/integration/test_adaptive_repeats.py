"""Adaptive repeats through the lifecycle (two-URL mode against mocks): a look after each repeat from `min`, each at
its own alpha; the run stops once the looks say decided, records every look, and the report's verdicts take the
last look's level."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.fakes.words import screen_lines, words

from speculab.commands.run import looks as run_looks
from speculab.commands.run.plan import describe_plan, plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats.sequential import look_alphas
from speculab.harness.verdict.build import build_report
from speculab.mock.requests import MockConfig
from speculab.mock.server import mock_server_in_thread

FAST = MockConfig(ttft_s=0.002, gap_s=0.001, output_tokens=4)


def experiment(url_a: str, url_b: str, repeats: str) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 8, warmup_requests: 1}}
sampling: {{max_tokens: 4}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 1}}}}
repeats: {repeats}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""


# a comparison still open, as a look returns it (a record the report words)
OPEN_FIELDS = {"candidate": "ngram-k2", "at": "concurrency 1", "decision": "inconclusive", "speedup": 1.02}
OPEN = ReportWarning(WarningKind.LOOK_OPEN, fields={**OPEN_FIELDS, "low": 0.99, "high": 1.05, "margin": 0.03})


class Scripted:
    """A `decide` that answers from a script (decided at the n-th look) and records what it was asked."""

    def __init__(self, decided_at: int):
        self.decided_at, self.calls = decided_at, []

    def __call__(self, out: Path, alpha: float) -> tuple[bool, list[ReportWarning]]:
        self.calls.append((alpha,))
        done = len(self.calls) >= self.decided_at
        return done, [] if done else [OPEN]


@pytest.mark.parametrize(("decided_at", "expected_repeats"), [(1, 2), (2, 3), (9, 4)])
def test_looks_from_min_stop_when_decided_or_at_max(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decided_at: int, expected_repeats: int
) -> None:
    scripted = Scripted(decided_at)
    monkeypatch.setattr(run_looks, "take_look", scripted)  # the lifecycle asks the verdict's looks module
    with mock_server_in_thread(FAST) as a, mock_server_in_thread(FAST) as b:
        plan = plan_experiment(parse_experiment(experiment(a, b, "{min: 2, max: 4, until: decided, mdc: 0.03}")))
        assert "2 to 4 repeats, until every verdict is decided" in "\n".join(screen_lines(describe_plan(plan)))
        out = tmp_path / "run"
        asyncio.run(run_plan(plan, out))
    inputs = load_inputs(out)
    alphas = look_alphas(2, 4)
    assert [c[0] for c in scripted.calls] == [alphas[r] for r in range(2, expected_repeats + 1)]
    assert inputs.setup.repeats == expected_repeats
    assert sorted({r.repeat for r in inputs.runs}) == list(range(1, expected_repeats + 1))
    looks = inputs.setup.sequential["looks"]
    assert [lk["repeat"] for lk in looks] == list(range(2, expected_repeats + 1))
    report = build_report(inputs)
    assert report.options["confidence"] == pytest.approx(1 - looks[-1]["alpha"])  # the last look's level
    assert not report.missing  # stopping early is the design, not missing repeats
    if expected_repeats < 4:
        assert any("adaptive repeats: every verdict was decided after repeat" in n for n in words(inputs.notes))
    # each look that did not stop keeps what was open, as records (the report's words)
    kept = [words(lk["undecided"]) for lk in looks]
    said = "ngram-k2 at concurrency 1 (inconclusive: 1.02× [0.99–1.05] against the ±3% margin)"
    assert kept == [[] if lk["decided"] else [said] for lk in looks]
