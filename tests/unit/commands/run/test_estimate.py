"""experiment.preflight: a run's size from its design, and the duration arithmetic from probe timings (no clock:
the timings are given, so the sums are checked exactly)."""

from __future__ import annotations

import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.preflight import REPORT_S, STOP_S, Timing, estimate_line, estimate_s, size_lines
from speculab.config import parse_experiment

EXPERIMENT = """
workload: {spec: "builtin:grounded", num_prompts: 24, warmup_requests: 4}
sampling: {max_tokens: 64}
loads: {low: {concurrency: 1}, operating: {concurrency: 4}}
repeats: 2
baseline:
  launch: {engine: speculab, command: ["python", "-m", "speculab", "serve", "demo", "--port", "8999"], port: 8999}
speculation:
  - {method: ngram, num_speculative_tokens: 2}
  - {method: ngram, num_speculative_tokens: 4}
"""


def _plan(text: str = EXPERIMENT):
    return plan_experiment(parse_experiment(text, "e.yaml"))


def test_size_lines_count_requests_and_launches() -> None:
    lines = size_lines(_plan())
    assert lines == [
        "requests: 24 per arm and load; 3 arms x 2 loads x 2 repeats = 288 (+ 4 warmup per launch, 8 unary per arm)",
        "launches: 6 (3 arms x 2 repeats, one server at a time)",
    ]
    adaptive = _plan(EXPERIMENT.replace("repeats: 2", "repeats: {min: 1, max: 4, until: decided}"))
    assert "up to 4 repeats = up to 576" in size_lines(adaptive)[0]
    unchecked = _plan(EXPERIMENT + "checks: false\n")
    assert size_lines(unchecked)[0].endswith("= 288 (+ 4 warmup per launch)")  # no unary sample: nothing to add


def test_e2e_between_and_beyond_the_probes() -> None:
    t = Timing(e2e_s=1.0, batch=4, batch_e2e_s=2.5)
    assert t.e2e_at(1) == 1.0 and t.e2e_at(4) == 2.5 and t.e2e_at(2) == pytest.approx(1.5)
    assert t.e2e_at(8) == pytest.approx(5.0)  # past the probed batch: requests wait their turn
    assert Timing(e2e_s=1.0).e2e_at(4) == 4.0  # no batch probe: no batching gain assumed


def test_estimate_adds_levels_launches_warmup_and_the_report() -> None:
    plan = _plan()
    t = Timing(e2e_s=1.0, batch=4, batch_e2e_s=2.0, launch_s=10.0, probes=8)
    per_repeat = (24 * 1.0 + 0.5) + (24 * 2.0 / 4 + 1.0)  # c=1: N x e2e (+ half a request); c=4: N x e2e / 4 (+ half)
    per_launch = 10.0 + 4 * 1.0 + 1.0 + STOP_S  # start-up, warmup at the first level's concurrency, first token, stop
    unary = 3 * 8 * 1.0  # each arm's 8 prompts sent unary, at the first level's concurrency (1)
    assert estimate_s(plan, t) == pytest.approx(6 * per_repeat + 6 * per_launch + unary + REPORT_S)
    assert estimate_line(plan, t).startswith("estimated duration: ~")
    assert "unknown (nothing answers" in estimate_line(plan, None, "nothing answers at http://x")


def test_init_grows_the_starter_to_its_target_in_whole_groups() -> None:
    from speculab.commands.init.starter import StarterSize, sized_to_target

    plan = _plan()
    t = Timing(e2e_s=1.0, batch=4, batch_e2e_s=2.0, launch_s=None, probes=8)
    size = StarterSize(512, max_tokens=64, num_prompts=24, operating_concurrency=4)
    grown = sized_to_target(plan, t, None, size, target_s=600.0)
    assert grown.num_prompts % 4 == 0 and grown.num_prompts > 24 and grown.launches == 6
    assert grown.estimate_s is not None and 500 < grown.estimate_s <= 600
    kept = sized_to_target(plan, t, None, size, target_s=60.0)  # the minimum costs more: it stays, said as it is
    assert kept.num_prompts == 24 and kept.estimate_s is not None and kept.estimate_s > 60
