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
from speculab.harness.search.policy import SearchSpec, first_round, search_budget


def worst_case_levels(design: Mapping[str, Any]) -> tuple[LevelSpec, ...]:
    """The probes of the costliest search the design allows: the first round, then the rest at the highest load, each
    as large as a load measured again may be (`max_groups`)."""
    spec = search_spec(design)
    first = first_round(spec)
    out: list[LevelSpec] = []
    for load in first:
        out.append(probe_level(design, load, out)[0])
    for _ in range(spec.max_probes - len(first)):
        out.append(probe_level(design, spec.high, out, groups=spec.cap)[0])
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
    budget = search_budget(spec)
    arms, repeats, items = len(plan.arms), plan.setup.repeats, plan.setup.items
    levels = worst_case_levels(design)
    sent = sum(len(lv.items_of(items)) for lv in levels)
    first = ", ".join(f"{x:g}" for x in first_round(spec))
    lines: list[str | ReportWarning] = [
        f"search: {spec.kind} {spec.low:g} to {spec.high:g}, at most {budget.probes} probes (first round {first}; "
        f"then one a round until the crossover's interval is at most {spec.tolerance:g} wide)",
        f"requests: at most {sent} per arm over the search and repeat ({spec.groups} groups of the requests in "
        f"flight per probe{_up_to(spec)}; {budget.largest_probe_prompts} at {spec.high:g}); {arms} arms x {repeats} "
        f"repeats = at most {sent * arms * repeats}",
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


def _up_to(spec: SearchSpec) -> str:
    """`, up to 24 measuring a load again` where a probe may grow (`probe_groups`)."""
    return f", up to {spec.cap} measuring a load again" if spec.cap > spec.groups else ""
