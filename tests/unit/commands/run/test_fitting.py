"""experiment.preflight: the context a launch command sets, and a plan fitted to it before the first request."""

from __future__ import annotations

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.preflight import command_context, fit_plan, planned_context
from speculab.config import parse_experiment

EXPERIMENT = """
workload: {spec: "builtin:grounded", num_prompts: 24, fit: FIT}
sampling: {max_tokens: 128}
loads: {low: {concurrency: 1}, operating: {concurrency: 4}}
baseline:
  launch: {engine: speculab, command: ["python", "-m", "speculab", "serve", "demo", "--port", "8999"CTX], port: 8999}
speculation: {method: ngram, num_speculative_tokens: 4}
"""


def _plan(fit: str = "skip", ctx: str = "", max_model_len: int | None = None):
    text = EXPERIMENT.replace("FIT", fit).replace("CTX", ctx)
    return plan_experiment(parse_experiment(text, "e.yaml"), max_model_len=max_model_len)


def test_command_context_reads_each_engines_flag() -> None:
    assert command_context("vllm", ["vllm", "serve", "m", "--max-model-len", "4096"]) == 4096
    assert command_context("speculab", ["speculab", "serve", "demo", "--max-model-len=512"]) == 512
    assert command_context("sglang", ["python", "-m", "sglang.launch_server", "--context-length", "8192"]) == 8192
    assert command_context("tgi", ["text-generation-launcher", "--max-total-tokens", "2048"]) == 2048
    assert command_context("vllm", ["vllm", "serve", "m"]) is None
    assert command_context("other", ["srv", "--max-model-len", "4096"]) is None  # flags of an unknown engine


def test_planned_context_prefers_the_flag_then_the_command() -> None:
    assert planned_context(_plan()) is None  # known only once the first server is up
    assert planned_context(_plan(ctx=', "--max-model-len", "512"')) == 512
    assert planned_context(_plan(ctx=', "--max-model-len", "512"', max_model_len=1024)) == 1024


def test_fit_plan_takes_num_prompts_that_fit_from_the_whole_set() -> None:
    plan = _plan()
    assert len(plan.setup.items) == 24 and len(plan.pool) > 24 and plan.setup.fit is None
    fitted, fit = fit_plan(plan, 512)
    assert len(fitted.setup.items) == 24 and fit.left_out
    assert not {it.prompt_id for it in fitted.setup.items} & set(fit.left_out)
    assert fitted.setup.fit is not None and fitted.setup.fit["left_out"] == list(fit.left_out)
    same, nothing = fit_plan(plan, 100_000)
    assert same.setup.items == plan.setup.items and not nothing.changed


def test_cap_makes_the_items_carry_their_limits() -> None:
    plan = _plan(fit="cap")
    assert plan.sampling.max_tokens_overrides_items  # sampling.max_tokens given: it wins over the items' own
    fitted, fit = fit_plan(plan, 512)
    assert fit.capped and not fitted.sampling.max_tokens_overrides_items
    assert all(it.max_tokens is not None and it.max_tokens <= 128 for it in fitted.setup.items)
