"""`SearchMode`: the search's rounds over the run's own mode (launch or two-URL).

Each round adds its loads to the plan as levels (role "search", each sending the prompts a verdict needs at that load:
`probe_prompts`), runs them with the run's mode while every level measured before counts as done, then asks the
verdict for the effect at every probe so far and the fit (`search_view`, the same numbers summary.json `search` holds),
and the policy where to probe next or why to stop. inputs.json records each round's loads, the candidate followed and
the stop, as they happen, so an interrupted search leaves a readable partial run (`speculab report DIR`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from speculab.config import LoadLevel
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.run.lifecycle import Lifecycle
from speculab.harness.run.looks import LOOK_RESAMPLES
from speculab.harness.search.fit import CrossoverFit, Probe
from speculab.harness.search.policy import SearchSpec, next_loads, probe_prompts, stop_reason
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions, SearchView

ROLE = "search"


class Inner(Protocol):
    async def run(self, life: Lifecycle) -> None: ...


def search_spec(design: Mapping[str, Any]) -> SearchSpec:
    """inputs.json's search design -> the policy's spec."""
    return SearchSpec(design["kind"], design["low"], design["high"], design["tolerance"], design["max_probes"])


def probe_level(design: Mapping[str, Any], load: float) -> tuple[LevelSpec, LoadLevel]:
    """One probe as a level: a whole concurrency (a closed loop's workers), or a Poisson rate."""
    kind, groups = design["kind"], int(design["groups"])
    n = probe_prompts(kind, load, groups)
    if kind == "concurrency":
        c = max(1, round(load))
        return LevelSpec(kind, c, (ROLE,), prompts=n), LoadLevel(concurrency=c)
    return LevelSpec(kind, load, (ROLE,), "poisson", prompts=n), LoadLevel(rate_rps=load)


class SearchMode:
    """The run's mode, round after round, at the loads the search places."""

    def __init__(self, inner: Inner):
        self.inner = inner

    async def run(self, life: Lifecycle) -> None:
        assert life.setup.search is not None
        spec = search_spec(life.setup.search)
        probes: tuple[Probe, ...] = ()
        fit: CrossoverFit | None = None
        loads = next_loads(spec, probes, fit)
        while loads:
            fresh = self.add_round(life, loads)
            if not fresh:  # every load the policy asked for was measured already (whole concurrencies)
                self.stopped(life, "the loads it asked for next were measured already")
                return
            said = ", ".join(lv.label for lv in fresh)
            life.reporter.phase(f"search round {len(life.setup.search['rounds'])}: probing {said}")
            await self.inner.run(life)
            if life.interrupted or life.stop.is_set():
                n = len(_measured(life))
                life.note(f"the search was interrupted after {n} probe(s): its answer covers the loads that ran")
                return
            view = self.judge(life)
            probes, fit = probes_of(view), fit_of(view)
            life.reporter.phase(progress_line(view))
            why = stop_reason(spec, probes, fit)
            if why:
                self.stopped(life, why)
                return
            loads = next_loads(spec, probes, fit)
        self.stopped(life, "the policy placed no further probe")

    def add_round(self, life: Lifecycle, loads: Sequence[float]) -> list[LevelSpec]:
        """The round's new loads as levels of the plan and the record (those measured before left out); every
        level before them counts as done, so the mode runs only these."""
        design = life.setup.search
        assert design is not None
        have = {lv.key for lv in life.setup.levels}
        new: dict[str, tuple[LevelSpec, LoadLevel]] = {}
        for load in loads:
            spec, lv = probe_level(design, load)
            if spec.key not in have:
                new.setdefault(spec.key, (spec, lv))
        if not new:
            return []
        done = {
            (a.info.name, lv.key, r)
            for a in life.plan.arms
            for lv in life.setup.levels
            for r in range(1, life.setup.repeats + 1)
        }
        specs = tuple(s for s, _ in new.values())
        rounds = [*design["rounds"], [s.value for s in specs]]
        setup = replace(life.setup, levels=(*life.setup.levels, *specs), search={**design, "rounds": rounds})
        plan_setup = replace(life.plan.setup, levels=setup.levels, search=setup.search)
        life.plan = replace(life.plan, setup=plan_setup, loads=(*life.plan.loads, *(lv for _, lv in new.values())))
        life.setup = setup
        life.record = replace(life.record, done=life.record.done | done)
        self.note_short(life, specs)
        life.write_inputs()
        return list(specs)

    def note_short(self, life: Lifecycle, specs: Sequence[LevelSpec]) -> None:
        """A probe that needs more prompts than the workload holds sends them all: say so, once per probe."""
        have = len(life.setup.items)
        for s in specs:
            if s.prompts is not None and s.prompts > have:
                life.note(
                    f"the search's probe at {s.label} needs {s.prompts} prompts for its groups and the workload has "
                    f"{have}: it sent them all (raise workload.num_prompts)"
                )

    def judge(self, life: Lifecycle) -> SearchView:
        """The verdict's search answer over every probe so far; the followed candidate recorded once chosen."""
        life.write_inputs()
        report = build_report(load_inputs(life.out), ReportOptions(n_resamples=LOOK_RESAMPLES))
        assert report.search is not None  # the setup has a search
        design = life.setup.search
        assert design is not None
        if design.get("candidate") is None and report.search.candidate is not None:
            self.record(life, candidate=report.search.candidate)
        return report.search

    def stopped(self, life: Lifecycle, why: str) -> None:
        self.record(life, stop=why)
        life.reporter.phase(f"search stopped: {why}")

    def record(self, life: Lifecycle, **what: Any) -> None:
        design = life.setup.search
        assert design is not None
        search = {**design, **what}
        life.setup = replace(life.setup, search=search)
        life.plan = replace(life.plan, setup=replace(life.plan.setup, search=search))
        life.write_inputs()


def _measured(life: Lifecycle) -> list[LevelSpec]:
    return [lv for lv in life.setup.levels if ROLE in lv.roles]


def probes_of(view: SearchView) -> tuple[Probe, ...]:
    """The verdict's probes as the fit takes them, in the order measured (a load without a verdict has no effects)."""
    by_load = {p.load: p for p in view.points}
    return tuple(Probe(load, by_load[load].effects) for load in view.probes if load in by_load)


def fit_of(view: SearchView) -> CrossoverFit:
    """The fit the verdict made, as the policy takes it."""
    c = view.crossover
    points = tuple((p.load, p.fitted) for p in view.points)
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
