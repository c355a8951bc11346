"""A search resumed (`speculab run --resume DIR`): where it stands, read from what DIR's inputs.json recorded.

The experiment file plans a search with no levels (it places them as it goes), so the plan `--resume` checks is that
empty one, and the levels come from DIR: each round's probes as written (their loads, the prompts each was sized to,
a load measured again as its next `attempt`), the candidate followed, and why it stopped. Those levels are then
blocks like a fixed level's: what finished is kept, what was cut short runs again from the start with the same
seeds (`commands.run.resume`). The round it was in is finished rather than placed afresh: its loads were placed from
the probes before it, which have not changed, so the policy (a pure function of the probes measured,
`harness.search.policy.next_loads`) would place them again, and finishing it keeps the blocks that had finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from speculab.commands.run.plan import RunPlan
from speculab.config import LoadLevel
from speculab.harness.design import LevelSpec, Setup


def load_of(spec: LevelSpec) -> LoadLevel:
    """A probe's level as the load the block runner offers: a closed loop of whole streams, or a Poisson rate."""
    return LoadLevel(concurrency=int(spec.value)) if spec.kind == "concurrency" else LoadLevel(rate_rps=spec.value)


def searched_plan(plan: RunPlan, recorded: Setup) -> RunPlan:
    """The plan with the levels its search placed so far (`recorded`: inputs.json's setup, or the run's record);
    a plan without a search, as it is."""
    if plan.setup.search is None or recorded.search is None:
        return plan
    setup = replace(plan.setup, levels=recorded.levels, search=recorded.search)
    return replace(plan, setup=setup, loads=tuple(load_of(lv) for lv in recorded.levels))


def complete(search: Mapping[str, Any] | None) -> bool:
    """The search ended (its stop recorded): a resume has nothing left to place."""
    return search is not None and search.get("stop") is not None


def probes_before_last(search: Mapping[str, Any]) -> int:
    """Probes measured before the round recorded last (which may have been cut short: no probe until it finishes)."""
    return sum(len(r) for r in search["rounds"][:-1])


def last_round(setup: Setup) -> tuple[LevelSpec, ...]:
    """The levels of the round recorded last (a round's probes are the last levels added), () before any."""
    rounds = setup.search["rounds"] if setup.search is not None else []
    return setup.levels[len(setup.levels) - len(rounds[-1]) :] if rounds else ()


def resume_line(root: object, search: Mapping[str, Any], done: int, blocks: int) -> str:
    """The terminal's line as a search resumes: complete, or where it stands and what runs next."""
    if complete(search):
        return f"resuming {root}: the search is complete (it stopped: {search['stop']}); nothing to run"
    rounds = search["rounds"]
    probes = sum(len(r) for r in rounds)
    return (
        f"resuming {root}: the search had placed {probes} probe(s) in {len(rounds)} round(s); {done} of {blocks} "
        f"of their blocks had finished; {blocks - done} to run, then it goes on placing probes"
    )
