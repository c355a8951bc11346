"""Planning a phased load (issue 52): one level run as one block per arm, its load the runner's schedule, and the
dry run's schedule lines; one block per arm in two-URL mode too; client workers refused with the fix. Nothing is
started here."""

from __future__ import annotations

import json

from speculab.commands.run.blocks import load_config
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.preflight import size_lines
from speculab.config import LoadPhase, parse_experiment

VLLM = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000"]
PHASES = "{transition_s: 2, phases: [{concurrency: 1, duration_s: 10}, {zigzag: {low: 2, high: 16, every: 5}}]}"


def _yaml(loads: str = PHASES, arms: str = "") -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 6}}
loads: {loads}
baseline:
  launch: {{engine: vllm, command: {json.dumps(VLLM)}, port: 8000}}
speculation: {{method: ngram, num_speculative_tokens: 4}}
{arms}
"""


def test_a_schedule_is_one_level_and_its_load_the_whole_schedule():
    plan = plan_experiment(parse_experiment(_yaml()))
    (level,) = plan.setup.levels
    assert (level.key, level.kind, level.value, level.transition_s) == ("phased", "concurrency", 16, 2.0)
    assert level.phases[:2] == (LoadPhase(1, None, 10.0), LoadPhase(2, None, 5.0))
    (lv,) = plan.loads
    load = load_config(lv, 6, warmup=2, seed=7)
    assert (load.mode, load.duration_s, load.transition_s, load.concurrency, load.num_prompts) == (
        "phased",
        35.0,
        2.0,
        16,
        None,
    )


def test_the_dry_run_prints_the_schedule_and_its_length():
    lines = size_lines(plan_experiment(parse_experiment(_yaml())))
    assert lines[0].startswith("schedule: 6 phases, 35 s per arm and repeat; 2 arms x 1 repeats = 70 s of load")
    assert lines[1:4] == [
        "  phase 1: concurrency 1 for 10 s (0–10 s)",
        "  phase 2: concurrency 2 for 5 s (10–15 s)",
        "  phase 3: concurrency 16 for 5 s (15–20 s)",
    ]
    assert lines[-1].startswith("launches: 2")


def test_in_two_url_mode_the_schedule_is_one_block_each_arm_runs_whole():
    """Two servers already running (no launch): each arm runs the whole schedule in turn, as in launch mode; the
    schedule is never cut into blocks of prompts (which two-URL mode makes of a fixed load)."""
    from types import SimpleNamespace

    from speculab.commands.run.modes import blocks_for

    y = _yaml(arms='candidate: {url: "http://b:2"}')
    y = y.replace(f"  launch: {{engine: vllm, command: {json.dumps(VLLM)}, port: 8000}}", '  url: "http://a:1"')
    plan = plan_experiment(parse_experiment(y))
    assert plan.setup.two_url_mode and [lv.key for lv in plan.setup.levels] == ["phased"]
    (block,) = blocks_for(SimpleNamespace(plan=plan, setup=plan.setup), 0)  # type: ignore[arg-type]
    assert block == plan.setup.items
