"""`speculab run` / `demo`: the workload fitted to the servers' context before the first request (`workload.fit`).

The context comes from, in order: `--max-model-len`; the baseline's launch command (its engine's context flag); in
two-URL mode the baseline's /v1/models. In launch mode without a context flag it is known only once the first
server is up: launch mode then fits after that server's /v1/models and before its first request. Either way every
arm, level and repeat sends the same fitted items, and inputs.json records what was left out (`Setup.fit`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from speculab.harness.experiment.lifecycle import Lifecycle
from speculab.harness.experiment.plan import RunPlan
from speculab.harness.workload.fit import Fit, context_from_cards, fit_items, fit_note

# the flag that sets each engine's context length on its command line (llama.cpp splits --ctx-size over slots)
_CONTEXT_FLAGS = {
    "speculab": ("--max-model-len",),
    "vllm": ("--max-model-len",),
    "sglang": ("--context-length",),
    "tgi": ("--max-total-tokens",),
}


def command_context(engine: str | None, command: Sequence[str]) -> int | None:
    """The context length a launch command sets (`--flag N` or `--flag=N`), None where it does not say."""
    for flag in _CONTEXT_FLAGS.get(engine or "", ()):
        for i, arg in enumerate(command):
            value = command[i + 1] if arg == flag and i + 1 < len(command) else arg.partition("=")[2]
            if (arg == flag or arg.startswith(flag + "=")) and value.isdigit():
                return int(value)
    return None


def planned_context(plan: RunPlan) -> int | None:
    """The context known before anything starts: --max-model-len, else the baseline's launch command."""
    base = plan.arms[0]
    if plan.max_model_len is not None:
        return plan.max_model_len
    return command_context(base.info.engine, base.launch.command) if base.launch is not None else None


def fit_plan(plan: RunPlan, context: int | None) -> tuple[RunPlan, Fit]:
    """The plan with its items fitted to `context` (pure): items from the plan's pool (the whole set, so that a
    prompt left out is replaced by the next), taken to num_prompts; capped limits carried by the items."""
    s = plan.setup
    pool = plan.pool or s.items
    sp = plan.sampling
    fit = fit_items(pool, context=context, policy=plan.fit_policy, max_tokens=sp.max_tokens,
                    overrides_items=sp.max_tokens_overrides_items,
                    num_prompts=plan.num_prompts if plan.pool else None, seed=s.seed)  # fmt: skip
    setup = replace(s, items=fit.items, fit=fit.to_manifest())
    sampling = replace(sp, max_tokens_overrides_items=False) if fit.capped else sp
    return replace(plan, setup=setup, sampling=sampling), fit


def fit_lifecycle(life: Lifecycle, context: int | None) -> None:
    """Fit the run in progress (before its first request) and say what was left out, once."""
    fitted, fit = fit_plan(life.plan, context)
    life.plan = fitted
    life.setup = replace(life.setup, items=fitted.setup.items, fit=fitted.setup.fit)
    note = fit_note(fit)
    if note is not None:
        life.notes.append(note)
        life.reporter.phase(note)


async def fit_when_known(life: Lifecycle) -> None:
    """Before the run: fit with the context known now (a flag, the launch command, or the baseline's /v1/models in
    two-URL mode); in launch mode with none, launch mode calls `fit_after_launch` once the first server is up."""
    context = planned_context(life.plan)
    if context is None and not life.plan.launch_mode:
        model, info, _ = await life.probe(life.plan.arms[0])
        context = context_from_cards(info.model_cards, model)
    if context is not None or not life.plan.launch_mode:
        fit_lifecycle(life, context)


def fit_after_launch(life: Lifecycle, info_cards: Sequence[Mapping[str, Any]], model: str) -> None:
    """Launch mode, the first server up: fit now if nothing did before (`Setup.fit` is None until fitted)."""
    if life.setup.fit is None:
        fit_lifecycle(life, context_from_cards(info_cards, model))
