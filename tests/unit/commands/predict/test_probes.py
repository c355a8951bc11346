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
    sglang = adapter_for("sglang").force_acceptance(sp, (0.8, 0.6, 0.4, 0.2, 0.1))  # past K: not counted
    # SGLang's length counts the bonus token: 1 + the unconditional rates of the K positions (2.0 + 1 = 3)
    assert dict(sglang.env) == {"SGLANG_SIMULATE_ACC_LEN": "3", "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}
    assert (sglang.engine_args, sglang.options) == (sp.engine_args, sp.options)  # no flag: SGLang has none
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

    for engine in ("speculab", "vllm", "sglang"):
        exp = experiment(engine, "{low: {concurrency: 1}, operating: {concurrency: 8}}")
        plan = plan_experiment(cost_experiment(exp, {"ngram-k4": (0.8, 0.5, 0.3, 0.1)}))
        assert all(c.verified for c in plan.changes), (engine, plan.changes)
        assert plan.arms[1].info.forced_acceptance and not plan.arms[2].info.forced_acceptance, engine


def test_sglangs_forced_candidate_is_launched_with_the_length_in_its_environment():
    """The launch spec the SGLang knob produces: the forced candidate's server gets SGLANG_SIMULATE_ACC_LEN (1 + the
    rates of its K positions) on top of the baseline's environment, the change says so, the baseline and the
    candidate without rates get nothing, and the arm is known forced before it starts."""
    from speculab.commands.run.plan import plan_experiment

    exp = parse_experiment(
        """
workload: {spec: builtin:grounded, num_prompts: 24}
loads: {low: {concurrency: 1}, operating: {concurrency: 8}}
baseline:
  launch: {engine: sglang, command: [serve, --port, "8000"], port: 8000, env: {HF_HOME: /models}}
speculation: [{method: ngram, num_speculative_tokens: 4}, {method: ngram, num_speculative_tokens: 2}]
""",
        "exp.yaml",
    )
    plan = plan_experiment(cost_experiment(exp, {"ngram-k4": (0.8, 0.5, 0.3, 0.1)}))
    base, k4, k2 = plan.arms
    assert base.launch.env == {"HF_HOME": "/models"} and k2.launch.env == {"HF_HOME": "/models"}
    assert k4.launch.env == {
        "HF_HOME": "/models",
        "SGLANG_SIMULATE_ACC_LEN": "2.7",
        "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
    }
    assert "SGLANG_SIMULATE_ACC_LEN" not in " ".join(k4.launch.command)  # the environment, not a flag
    assert k4.info.forced_acceptance == ("SGLANG_SIMULATE_ACC_LEN=2.7",)
    k4_change = next(c for c in plan.changes if c.candidate == k4.info.name)
    assert "env SGLANG_SIMULATE_ACC_LEN: (absent) -> 2.7" in k4_change.diff_lines and k4_change.verified


def test_check_k_adds_each_candidate_at_half_its_k_forced_to_its_first_rates():
    """`predict --check-k`: the cost phase also runs each candidate of K >= 2 at its second k, ceil(K / 2), named
    for it and forced to the first of the rates it measured; the acceptance phase and a K = 1 candidate are as
    without it, and the plan counts the extra requests."""
    exp = experiment("vllm")  # ngram K = 4 and K = 2
    cost = cost_experiment(exp, {"ngram-k4": (0.8, 0.5, 0.3, 0.1)}, check_k=True)
    names = [sp.name or f"{sp.method}-k{sp.num_speculative_tokens}" for sp in cost.speculations]
    assert names == ["ngram-k4", "ngram-k4-at-k2", "ngram-k2", "ngram-k2-at-k1"]
    at2 = cost.speculations[1]
    assert at2.num_speculative_tokens == 2 and at2.options["synthetic_acceptance_rates"] == [0.8, 0.5]
    assert "rejection_sample_method" not in cost.speculations[3].options  # no rates measured for ngram-k2
    assert cost_experiment(exp, {}, check_k=False).speculations == exp.speculations
    plan = plan_probes(exp, prompts=24, check_k=True)
    assert plan.checked == (("ngram-k4", 2), ("ngram-k2", 1))
    assert plan.requests == plan_probes(exp, prompts=24).requests + 2 * 2 * 24  # two more arms at the two cost loads
