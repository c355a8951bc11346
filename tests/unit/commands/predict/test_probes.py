"""The probes `speculab predict` plans: the load range, the three loads, the two phases and the engine's forced
acceptance in the cost phase, and what a full K x load sweep would send instead."""

from __future__ import annotations

import json

import pytest

from speculab.commands.predict.probes import (
    acceptance_experiment,
    cost_experiment,
    plan_probes,
    probe_loads,
    sweep_loads,
)
from speculab.config import parse_experiment
from speculab.errors import UserError
from speculab.harness.servers.adapters import adapter_for


def experiment(
    engine: str, loads: str = "{search: {kind: concurrency, low: 1, high: 32, tolerance: 4}}", extra: str = ""
):
    text = f"""
workload: {{spec: builtin:grounded, num_prompts: 24}}
loads: {loads}
baseline:
  launch: {{engine: {engine}, command: [serve, --port, "8000"], port: 8000}}
speculation: [{{method: ngram, num_speculative_tokens: 4}}, {{method: ngram, num_speculative_tokens: 2}}]
"""
    return parse_experiment(text, "exp.yaml")


def test_three_loads_across_the_range_and_a_sweep_of_every_k_at_the_powers_of_two():
    assert probe_loads(1, 32) == (1, 6, 32) and probe_loads(1, 2) == (1, 2)
    assert sweep_loads(1, 32) == (1, 2, 4, 8, 16, 32)
    plan = plan_probes(experiment("vllm"), prompts=24)
    assert plan.loads == (1, 6, 32) and plan.requests == 3 * 3 * 24
    assert plan.sweep_requests == (1 + 4 + 2) * 6 * 24 and plan.requests <= plan.sweep_requests / 4
    assert plan.forced == ("ngram-k4", "ngram-k2")


def test_the_acceptance_phase_runs_the_low_end_and_the_cost_phase_forces_the_measured_rates():
    exp = experiment("vllm")
    first = acceptance_experiment(exp)
    assert [lv.value for lv in first.loads.all_levels()] == [1] and first.repeats == 1
    cost = cost_experiment(exp, {"ngram-k4": (0.8, 0.5, 0.3, 0.1)})
    assert sorted(lv.value for lv in cost.loads.all_levels()) == [6, 32]
    k4, k2 = cost.speculations
    assert json.loads(k4.speculative_config_json())["synthetic_acceptance_rates"] == [0.8, 0.5, 0.3, 0.1]
    assert k4.options["rejection_sample_method"] == "synthetic" and k4.name is None  # the same candidate name
    assert "rejection_sample_method" not in k2.options  # no rates measured for it: real acceptance


def test_each_engine_forces_acceptance_its_own_way_or_not_at_all():
    exp = experiment("speculab")
    sp = exp.speculations[0]
    forced = adapter_for("speculab").force_acceptance(sp, (0.8, 0.6))
    assert forced.engine_args[-2:] == ("--forced-acceptance-rates", "0.8,0.6")
    padded = adapter_for("vllm").force_acceptance(sp, (0.9,))
    assert padded.options["synthetic_acceptance_rates"] == [0.9, 0.0, 0.0, 0.0]  # vLLM takes exactly K
    assert adapter_for("other").force_acceptance is None
    explicit = parse_experiment(
        """
workload: {spec: builtin:grounded, num_prompts: 24}
loads: {low: {concurrency: 1}, operating: {concurrency: 8}}
baseline: {launch: {engine: vllm, command: [serve, --port, "8000"], port: 8000}}
speculation: {method: ngram, num_speculative_tokens: 4}
candidate: {command: [serve, --port, "8000", --speculative-config, "{}"]}
""",
        "exp.yaml",
    )
    assert plan_probes(explicit, 24).forced == ()  # an explicit command keeps its own flags


def test_a_range_the_model_cannot_take_is_a_user_error():
    with pytest.raises(UserError, match="needs concurrency loads"):
        plan_probes(experiment("vllm", "{low: {rate: 1}, operating: {rate: 4}}"), 24)


def test_a_forced_candidate_is_still_a_single_change_from_the_baseline():
    from speculab.commands.run.plan import plan_experiment

    for engine in ("speculab", "vllm"):
        exp = experiment(engine, "{low: {concurrency: 1}, operating: {concurrency: 8}}")
        plan = plan_experiment(cost_experiment(exp, {"ngram-k4": (0.8, 0.5, 0.3, 0.1)}))
        assert all(c.verified for c in plan.changes), (engine, plan.changes)
