"""`SearchMode`: the search's rounds over the run's own mode (launch or two-URL).

Each round adds its loads to the plan as levels (role "search", each sending the prompts a verdict needs at that load:
`probe_prompts`; a load measured again, what its own spread says would decide it: `probe_groups`), runs them with the
run's mode while every level measured before counts as done, then asks the verdict for the effect at every probe so
far and the fit (`search_view`, the same numbers summary.json `search` holds), and the policy where to probe next or
why to stop. inputs.json records each round's loads, the candidate followed and the stop, as they happen, so an
interrupted search leaves a readable partial run (`speculab report DIR`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from speculab.commands.run.lifecycle import Lifecycle
from speculab.commands.run.looks import LOOK_RESAMPLES
from speculab.commands.run.probing.resumed import complete, last_round, load_of, probes_before_last, searched_plan
from speculab.config import LoadLevel
from speculab.config.experiment import SEARCH_MAX_GROUPS
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.search.fit import CrossoverFit, Probe
from speculab.harness.search.policy import SearchSpec, next_loads, probe_groups, probe_prompts, stop_reason
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions, SearchView

ROLE = "search"


class Inner(Protocol):
    async def run(self, life: Lifecycle) -> None: ...


def search_spec(design: Mapping[str, Any]) -> SearchSpec:
    """inputs.json's search design -> the policy's spec."""
    seeded = tuple(float(x) for x in design.get("seeded") or ())  # `run --prediction`: the predicted interval
    groups = int(design["groups"])
    # `max_groups` absent: the default cap (a search recorded before the key had none, and resumes with it)
    cap = max(groups, int(design.get("max_groups") or SEARCH_MAX_GROUPS))
    kind, low, high, tolerance, max_probes = (design[k] for k in ("kind", "low", "high", "tolerance", "max_probes"))
    return SearchSpec(kind, low, high, tolerance, max_probes, seeded, groups, cap)


def probe_level(
    design: Mapping[str, Any],
    load: float,
    before: Sequence[LevelSpec],
    in_flight: float | None = None,
    groups: int | None = None,
) -> tuple[LevelSpec, LoadLevel]:
    """One probe as a level: a whole concurrency (a closed loop's workers) or a Poisson rate, sending the prompts its
    verdict needs (`probe_prompts`: `groups` groups of the requests in flight; None: the design's, a first
    measurement's). A rate's requests in flight are known only once measured (`in_flight`, from the nearest probe);
    before that it sends the whole workload, as a fixed level does. A load measured before is measured again as its
    next `attempt`, on the prompts after those its earlier attempts sent."""
    kind, groups = design["kind"], int(design["groups"]) if groups is None else groups
    # a whole number of streams; a rate to 3 significant digits (a level's key and label, `r89.4`, not `r89.3576`)
    value = float(max(1, round(load))) if kind == "concurrency" else float(f"{load:.3g}")
    earlier = [lv for lv in before if lv.kind == kind and lv.value == value]
    attempt = 1 + len(earlier)
    if kind == "concurrency":
        n: int | None = probe_prompts(kind, value, groups)
    else:
        n = probe_prompts(kind, value, groups, in_flight) if in_flight is not None else None
    sent = [lv.prompts for lv in earlier]
    # set only where the sizes differ, so that a search of equal probes records its levels as before
    start = sum(sent) if n is not None and None not in sent and sum(sent) != n * len(sent) else None  # type: ignore[arg-type]
    arrival = None if kind == "concurrency" else "poisson"
    spec = LevelSpec(kind, value, (ROLE,), arrival, prompts=n, attempt=attempt, start=start)
    return spec, load_of(spec)


class SearchMode:
    """The run's mode, round after round, at the loads the search places."""

    def __init__(self, inner: Inner):
        self.inner = inner

    async def run(self, life: Lifecycle) -> None:
        assert life.setup.search is not None
        if complete(life.setup.search):  # a finished search resumed: nothing is left to place
            life.reporter.phase(f"the search is complete (it stopped: {life.setup.search['stop']})")
            return
        spec = search_spec(life.setup.search)
        probes: tuple[Probe, ...] = ()
        fit: CrossoverFit | None = None
        report: Report | None = None
        said = self.resume(life)  # a resumed search first finishes the round it recorded last
        while said or (said := self.next_round(life, spec, probes, fit, report)):
            report = await self.measure(life, said)
            if report is None:  # interrupted: noted
                return
            assert report.search is not None  # the setup has a search
            probes, fit = probes_of(report.search), fit_of(report.search)
            life.reporter.phase(progress_line(report.search))
            if not any(p.effects for p in probes):  # nothing to fit or place a probe by: more of it would not help
                life.note(ReportWarning(WarningKind.SEARCH_NO_VERDICT))
                self.record(life, stop="no verdict")
                life.reporter.phase("search stopped: no probe had a verdict")
                return
            said = ""
        self.record(life, stop=stop_reason(spec, probes, fit) or "no further probe")
        life.reporter.phase(f"search stopped: {life.setup.search['stop']}")

    def resume(self, life: Lifecycle) -> str:
        """A resumed search: the levels it placed become the block runner's again, and the round recorded last is
        finished (its blocks that finished count as done; `probing.resumed` says why it is not placed afresh); the
        round's loads, or "" for a search starting now."""
        design = life.setup.search
        assert design is not None
        if not design["rounds"]:
            return ""
        life.plan = searched_plan(life.plan, life.setup)
        said = ", ".join(lv.label for lv in last_round(life.setup))
        life.reporter.phase(f"search round {len(design['rounds'])}: finishing {said} (resumed)")
        return said

    def next_round(
        self,
        life: Lifecycle,
        spec: SearchSpec,
        probes: tuple[Probe, ...],
        fit: CrossoverFit | None,
        report: Report | None,
    ) -> str:
        """The policy's next loads as a round of the plan, or "" when it places none."""
        loads = next_loads(spec, probes, fit)
        if not loads:
            return ""
        said = ", ".join(lv.label for lv in self.add_round(life, loads, report))
        assert life.setup.search is not None
        life.reporter.phase(f"search round {len(life.setup.search['rounds'])}: probing {said}")
        return said

    async def measure(self, life: Lifecycle, said: str) -> Report | None:
        """The round's levels run by the run's mode, then the verdict over every probe so far; None when the run was
        interrupted (noted: a round cut short is no probe)."""
        await self.inner.run(life)
        if life.interrupted or life.stop.is_set():
            design = life.setup.search
            assert design is not None
            cut = {"probes": probes_before_last(design), "round": len(design["rounds"]), "probing": said}
            life.note(ReportWarning(WarningKind.SEARCH_INTERRUPTED, fields=cut))
            return None
        return self.judge(life)

    def add_round(self, life: Lifecycle, loads: Sequence[float], report: Report | None) -> list[LevelSpec]:
        """The round's loads as levels of the plan and the record; every level before them counts as done, so the
        mode runs only these."""
        design = life.setup.search
        assert design is not None
        done = {
            (a.info.name, lv.key, r)
            for a in life.plan.arms
            for lv in life.setup.levels
            for r in range(1, life.setup.repeats + 1)
        }
        specs: list[LevelSpec] = []
        new: list[LoadLevel] = []
        policy, probes = search_spec(design), probes_of(report.search) if report and report.search else ()
        for load in loads:
            groups = probe_groups(policy, probes, load)  # a load measured again: sized from its own spread
            spec, lv = probe_level(design, load, (*life.setup.levels, *specs), _in_flight(report, load), groups)
            specs.append(spec)
            new.append(lv)
        rounds = [*design["rounds"], [s.value for s in specs]]
        setup = replace(life.setup, levels=(*life.setup.levels, *specs), search={**design, "rounds": rounds})
        plan_setup = replace(life.plan.setup, levels=setup.levels, search=setup.search)
        life.plan = replace(life.plan, setup=plan_setup, loads=(*life.plan.loads, *new))
        life.setup = setup
        life.record = replace(life.record, done=life.record.done | done)
        self.note_short(life, specs)
        life.write_inputs()
        return specs

    def note_short(self, life: Lifecycle, specs: Sequence[LevelSpec]) -> None:
        """A probe that needs more prompts than the workload holds sends them all: say so, once per probe."""
        have = len(life.setup.items)
        for s in specs:
            if s.prompts is not None and s.prompts > have:
                short = {"load": s.label, "prompts": s.prompts, "have": have}
                life.note(ReportWarning(WarningKind.SEARCH_PROMPTS_SHORT, fields=short))

    def judge(self, life: Lifecycle) -> Report:
        """The verdict over every probe so far (its `search` the answer); the followed candidate recorded once
        chosen, so later rounds follow the same one."""
        life.write_inputs()
        report = build_report(load_inputs(life.out), ReportOptions(n_resamples=LOOK_RESAMPLES))
        design = life.setup.search
        assert design is not None and report.search is not None
        if design.get("candidate") is None and report.search.candidate is not None:
            self.record(life, candidate=report.search.candidate)
        return report

    def record(self, life: Lifecycle, **what: Any) -> None:
        design = life.setup.search
        assert design is not None
        search = {**design, **what}
        life.setup = replace(life.setup, search=search)
        life.plan = replace(life.plan, setup=replace(life.plan.setup, search=search))
        life.write_inputs()


def _in_flight(report: Report | None, load: float) -> float | None:
    """Requests in flight at the measured probe nearest `load`, scaled to it (Little's law: in flight = rate x
    latency, the latency taken as the nearest probe's); None before any probe measured them."""
    near = []
    for lv in report.levels if report is not None else ():
        got = [a.achieved_concurrency for a in lv.arms if a.achieved_concurrency is not None]
        if got and lv.value > 0:
            near.append((abs(math.log(lv.value / load)), max(got) * load / lv.value))
    return min(near)[1] if near else None


def probes_of(view: SearchView) -> tuple[Probe, ...]:
    """The verdict's probes as the policy takes them, every measurement counted (one without a verdict has no
    effects: the fit leaves it out, the budget counts it)."""
    return tuple(Probe(p.load, p.effects) for p in view.points)


def fit_of(view: SearchView) -> CrossoverFit:
    """The fit the verdict made, as the policy takes it: per load probed, (load, mean effect over its units, fitted
    effect, units), a load measured again pooled as the fit pools it."""
    units: dict[float, list[float]] = {}
    fitted: dict[float, float] = {}
    for p in view.points:
        if p.effects and p.fitted is not None:
            units.setdefault(p.load, []).extend(p.effects)
            fitted[p.load] = p.fitted
    points = tuple((x, math.fsum(u) / len(u), fitted[x], float(len(u))) for x, u in sorted(units.items()))
    c = view.crossover
    return CrossoverFit(view.status, c.estimate, c.low, c.high, view.confidence, points, view.method)


def progress_line(view: SearchView) -> str:
    """After a round: the probes so far and the crossover's interval as it stands."""
    c = view.crossover
    where = (
        f"crossover {c.estimate:.3g} [{c.low:.3g}–{c.high:.3g}]"
        if c.estimate is not None and c.low is not None and c.high is not None
        else f"crossover {view.status}"
    )
    return f"search after {len(view.probes)} probe(s): {where}"
