"""SearchMode's rounds without servers (commands.run.probing.rounds): each round's loads become levels of the plan and
the record, the levels before count as done, and a search with no verdict at any probe stops rather than guessing."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from speculab.commands.run.blocks import Silent
from speculab.commands.run.lifecycle import RunRecord
from speculab.commands.run.plan import RunPlan, plan_experiment
from speculab.commands.run.probing.rounds import SearchMode
from speculab.config import parse_experiment
from speculab.harness.verdict.model import SearchCrossover, SearchPoint, SearchView
from speculab.report.phrases import warning_text

EXPERIMENT = """
workload: {spec: "synthetic:input=10,output=9", num_prompts: 300}
loads: {search: {kind: concurrency, low: 1, high: 48, tolerance: 12, max_probes: 10, groups: 6}}
baseline: {url: "http://127.0.0.1:9"}
candidate: {url: "http://127.0.0.1:10"}
speculation: {method: ngram, num_speculative_tokens: 1}
"""


@dataclass
class FakeLife:
    """What SearchMode reads and writes of a `Lifecycle`, with nothing on disk."""

    plan: RunPlan
    record: RunRecord
    notes: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    reporter: Silent = field(default_factory=Silent)
    interrupted: bool = False

    @property
    def setup(self):
        return self.record.setup

    @setup.setter
    def setup(self, setup) -> None:
        from dataclasses import replace

        self.record = replace(self.record, setup=setup)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def write_inputs(self) -> None:
        pass


class Inner:
    """The run's mode: records which levels it was asked to run (those not done)."""

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    async def run(self, life: FakeLife) -> None:
        self.ran.append([lv.key for lv in life.setup.levels if ("baseline", lv.key, 1) not in life.record.done])


def _view(life: FakeLife, effects: dict[float, tuple[float, ...]]) -> SearchView:
    points = tuple(
        SearchPoint(lv.value, lv.key, math.nan, math.nan, math.nan, None, effects.get(lv.value, ()))
        for lv in life.setup.levels
    )
    return SearchView("concurrency", "tpot_s", None, SearchCrossover(None, None, None), tuple(p.load for p in points),
                      "undetermined", 0.95, "fit", 1, 48, 12, 10, points)  # fmt: skip


class Judged(SearchMode):
    def __init__(self, inner: Inner, effects: dict[float, tuple[float, ...]]):
        super().__init__(inner)
        self.effects = effects

    def judge(self, life):  # the verdict, scripted
        from types import SimpleNamespace

        return SimpleNamespace(search=_view(life, self.effects), levels=())


def _life() -> FakeLife:
    plan = plan_experiment(parse_experiment(EXPERIMENT))
    return FakeLife(plan, RunRecord.start(plan, None))


def test_no_verdict_at_any_probe_stops_after_the_first_round():
    life, inner = _life(), Inner()
    asyncio.run(Judged(inner, {}).run(life))
    assert inner.ran == [["c1", "c7", "c48"]]
    assert life.setup.search["stop"] == "no verdict" and life.setup.search["rounds"] == [[1, 7, 48]]
    assert any(n.startswith("the search stopped: no probe had a verdict") for n in map(warning_text, life.notes))
    assert [lv.prompts for lv in life.plan.setup.levels] == [6, 42, 288]  # the plan the block runner sends by
    assert [lv.concurrency for lv in life.plan.loads] == [1, 7, 48]


def test_each_round_runs_only_its_own_loads():
    life, inner = _life(), Inner()
    # faster at 1 and 7, slower at 48, and every later probe (the scripted verdict knows only these three): the
    # search splits the bracket, then measures again, until its budget is spent
    effects = {1.0: (0.7,) * 6, 7.0: (0.4,) * 6, 48.0: (-0.4,) * 6}
    asyncio.run(Judged(inner, effects).run(life))
    assert inner.ran[0] == ["c1", "c7", "c48"] and all(len(r) == 1 for r in inner.ran[1:])
    assert sum(len(r) for r in inner.ran) <= 10
    assert life.setup.search["stop"] is not None


class Said(Silent):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def phase(self, text: str) -> None:
        self.lines.append(text)


EFFECTS = {1.0: (0.7,) * 6, 7.0: (0.4,) * 6, 48.0: (-0.4,) * 6}


def _resumed_after(whole: FakeLife, rounds: int, finished: int) -> FakeLife:
    """The life a resume starts from (`prepare_resume`): the plan as the file makes it (no levels), the record as
    DIR's inputs.json had it after `rounds` rounds of `whole`'s search, the first `finished` of them whole."""
    from dataclasses import replace

    design = whole.setup.search
    placed = sum(len(r) for r in design["rounds"][:rounds])
    levels = whole.setup.levels[:placed]
    search = {**design, "rounds": design["rounds"][:rounds], "stop": None}
    plan = plan_experiment(parse_experiment(EXPERIMENT))
    measured = sum(len(r) for r in design["rounds"][:finished])
    done = frozenset((a.info.name, lv.key, 1) for a in plan.arms for lv in levels[:measured])
    record = replace(RunRecord.start(plan, None), setup=replace(plan.setup, levels=levels, search=search), done=done)
    return FakeLife(plan, record, reporter=Said())


def test_a_resumed_search_finishes_its_last_round_then_places_as_the_whole_search_did():
    whole = _life()
    asyncio.run(Judged(Inner(), EFFECTS).run(whole))
    assert len(whole.setup.search["rounds"]) >= 3  # a search long enough to be cut in its middle
    life, inner = _resumed_after(whole, rounds=2, finished=1), Inner()
    asyncio.run(Judged(inner, EFFECTS).run(life))
    cut = whole.setup.levels[3 : 3 + len(whole.setup.search["rounds"][1])]
    assert inner.ran[0] == [lv.key for lv in cut]  # the round cut short, run again; the first round's levels are not
    assert life.setup.search["rounds"] == whole.setup.search["rounds"]  # then the same probes: a pure policy
    assert life.setup.search["stop"] == whole.setup.search["stop"]
    assert [lv.key for lv in life.setup.levels] == [lv.key for lv in whole.setup.levels]
    assert [lv.concurrency for lv in life.plan.loads] == [lv.concurrency for lv in whole.plan.loads]  # runner's
    assert life.reporter.lines[0] == f"search round 2: finishing {', '.join(lv.label for lv in cut)} (resumed)"


def test_a_search_killed_between_rounds_runs_nothing_again_before_its_next_round():
    whole = _life()
    asyncio.run(Judged(Inner(), EFFECTS).run(whole))
    life, inner = _resumed_after(whole, rounds=2, finished=2), Inner()
    asyncio.run(Judged(inner, EFFECTS).run(life))
    assert inner.ran[0] == []  # the mode finds every block of the recorded rounds done
    assert life.setup.search["rounds"] == whole.setup.search["rounds"]


def test_a_finished_search_resumed_says_it_is_complete_and_runs_nothing():
    whole = _life()
    asyncio.run(Judged(Inner(), EFFECTS).run(whole))
    n = len(whole.setup.search["rounds"])
    life, inner = _resumed_after(whole, rounds=n, finished=n), Inner()
    from dataclasses import replace

    life.setup = replace(life.setup, search={**life.setup.search, "stop": whole.setup.search["stop"]})
    asyncio.run(Judged(inner, EFFECTS).run(life))
    assert inner.ran == [] and life.setup.search["rounds"] == whole.setup.search["rounds"]
    assert life.reporter.lines == [f"the search is complete (it stopped: {whole.setup.search['stop']})"]


def test_a_resumed_search_interrupted_again_counts_only_the_rounds_before_it():
    whole = _life()
    asyncio.run(Judged(Inner(), EFFECTS).run(whole))
    life = _resumed_after(whole, rounds=2, finished=1)
    life.stop.set()  # Ctrl-C while it finished the round cut short
    asyncio.run(Judged(Inner(), EFFECTS).run(life))
    assert any(
        n.startswith("the search was interrupted after 3 probe(s), in round 2") for n in map(warning_text, life.notes)
    )
    assert life.setup.search["stop"] is None and len(life.setup.search["rounds"]) == 2


def test_a_load_measured_again_is_sized_from_its_own_spread():
    """Issue 49: faster at 1 and 7 on their own units, at 48 open with a spread twice its mean: the search measures
    48 again, and that probe sends what 48's spread says would decide it (more than the first's 6 groups, at most
    the default cap of 24), on the prompts after those the first probe sent."""
    life, inner = _life(), Inner()
    effects = {1.0: (0.7,) * 6, 7.0: (0.4,) * 6, 48.0: (0.5, -0.1, 0.3, -0.2, 0.4, 0.0)}
    asyncio.run(Judged(inner, effects).run(life))
    assert inner.ran[:2] == [["c1", "c7", "c48"], ["c48-2"]]
    again = life.setup.levels[3]
    assert 6 * 48 < again.prompts <= 24 * 48 and again.prompts % 48 == 0 and again.start == 6 * 48
