"""A search's size before it runs (`speculab run --dry-run`, and the lines every run prints first): the worst case
of `harness.search.policy.search_budget` (the first round, then every further probe at the highest load), in
requests per arm and launches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from speculab.commands.run.plan import RunPlan
from speculab.commands.run.probing.rounds import probe_level, search_spec
from speculab.harness.design import LevelSpec
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.search.policy import first_round, search_budget


def worst_case_levels(design: Mapping[str, Any]) -> tuple[LevelSpec, ...]:
    """The probes of the costliest search the design allows: the first round, then the rest at the highest load."""
    spec = search_spec(design)
    first = first_round(spec)
    loads = (*first, *[spec.high] * (spec.max_probes - len(first)))
    out: list[LevelSpec] = []
    for load in loads:
        out.append(probe_level(design, load, out)[0])
    return tuple(out)


def worst_case_rounds(design: Mapping[str, Any]) -> int:
    """Rounds of the costliest search: the first, then one probe a round."""
    spec = search_spec(design)
    return 1 + spec.max_probes - len(first_round(spec))


def search_size_lines(plan: RunPlan) -> list[str | ReportWarning]:
    """The search's budget: probes, requests per arm at most, launches at most; a warning (a record the CLI words)
    when the workload is too small for its largest probe."""
    design = plan.setup.search
    assert design is not None
    spec = search_spec(design)
    budget = search_budget(spec, int(design["groups"]))
    arms, repeats, items = len(plan.arms), plan.setup.repeats, plan.setup.items
    levels = worst_case_levels(design)
    sent = sum(len(lv.items_of(items)) for lv in levels)
    first = ", ".join(f"{x:g}" for x in first_round(spec))
    lines: list[str | ReportWarning] = [
        f"search: {spec.kind} {spec.low:g} to {spec.high:g}, at most {budget.probes} probes (first round {first}; "
        f"then one a round until the crossover's interval is at most {spec.tolerance:g} wide)",
        f"requests: at most {sent} per arm over the search and repeat ({design['groups']} groups of the requests in "
        f"flight per probe; {budget.largest_probe_prompts} at {spec.high:g}); {arms} arms x {repeats} repeats = at "
        f"most {sent * arms * repeats}",
    ]
    if not budget.group_size_known:
        lines[-1] = f"{lines[-1]} (a rate's requests in flight are measured: its first round sends the whole workload)"
    if plan.launch_mode:
        rounds = worst_case_rounds(design)
        lines.append(
            f"launches: at most {arms * repeats * rounds} ({arms} arms x {repeats} repeats x up to {rounds} rounds, "
            "one server at a time)"
        )
    if budget.group_size_known and budget.largest_probe_prompts > len(items):
        few = {"high": spec.high, "needed": budget.largest_probe_prompts, "have": len(items)}
        lines.append(ReportWarning(WarningKind.SEARCH_FEW_PROMPTS, fields=few))
    return lines
