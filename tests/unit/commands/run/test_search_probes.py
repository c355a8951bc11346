"""A search's probes as levels (commands.run.probing): what each sends, a load measured again, and the budget the
dry run prints (issue 39 items 1-2). No server: the plan and the arithmetic only."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes.words import screen_lines

from speculab.commands.run.plan import describe_plan, plan_experiment
from speculab.commands.run.preflight import Timing, estimate_s, size_lines
from speculab.commands.run.probing.budget import worst_case_levels
from speculab.commands.run.probing.rounds import probe_level
from speculab.config import parse_experiment
from speculab.harness.design import LevelSpec
from speculab.harness.records import RequestSpec
from speculab.harness.results.warnings import WarningKind

EXPERIMENT = """
workload: {spec: "synthetic:input=10,output=17", num_prompts: 400}
loads: {search: {kind: concurrency, low: 1, high: 48, tolerance: 12, max_probes: 10, groups: 6}}
repeats: 2
baseline:
  launch: {engine: speculab, command: ["python", "-m", "speculab", "serve", "demo", "--port", "8999"], port: 8999}
speculation: {method: ngram, num_speculative_tokens: 2}
"""


def _plan(text: str = EXPERIMENT):
    return plan_experiment(parse_experiment(text, "e.yaml"))


def test_a_search_plans_no_level_and_records_its_design():
    plan = _plan()
    assert plan.setup.levels == () and plan.loads == ()
    assert plan.setup.search == {
        "kind": "concurrency",
        "low": 1.0,
        "high": 48.0,
        "tolerance": 12.0,
        "max_probes": 10,
        "groups": 6,
        "metric": "tpot_s",
        "rounds": [],
        "candidate": None,
        "stop": None,
    }
    assert "loads: placed by the search" in describe_plan(plan)[1]


def test_a_probe_sends_what_its_verdict_needs_and_a_second_look_is_its_own_level():
    design = _plan().setup.search
    first, load = probe_level(design, 23.6, ())
    assert (first.value, first.prompts, first.key, first.roles) == (24.0, 6 * 24, "c24", ("search",))
    assert load.concurrency == 24
    again, _ = probe_level(design, 24, (first,))
    assert (again.key, again.attempt, again.label) == ("c24-2", 2, "concurrency 24 (probe 2)")
    rate = {**design, "kind": "rate"}
    unmeasured, _ = probe_level(rate, 2.5, ())
    assert unmeasured.prompts is None  # its requests in flight are not known yet: the whole workload, as a fixed level
    measured, lv = probe_level(rate, 2.5, (), in_flight=3.2)
    assert measured.prompts == 6 * 3 and lv.rate_rps == 2.5 and measured.arrival == "poisson"
    assert probe_level(rate, 89.3576, ())[0].key == "r89.4"  # to 3 significant digits


def test_a_level_sends_its_prompts_and_a_second_look_the_next_ones():
    items = tuple(RequestSpec(index=i, prompt=f"p{i}") for i in range(10))
    lv = LevelSpec("concurrency", 2, ("search",), prompts=4)
    assert [it.index for it in lv.items_of(items)] == [0, 1, 2, 3]
    assert [it.index for it in replace(lv, attempt=2).items_of(items)] == [4, 5, 6, 7]
    assert [it.index for it in replace(lv, attempt=3).items_of(items)] == [0, 1, 2, 3]  # no 4 more: the first again
    assert LevelSpec("concurrency", 2).items_of(items) == items
    convo = tuple(replace(it, conversation_id=f"c{i // 3}", turn=i % 3 + 1) for i, it in enumerate(items))
    assert len(lv.items_of(convo)) == 6  # never a turn without the turns before it


def test_a_fixed_level_is_saved_as_before():
    d = LevelSpec("concurrency", 4, ("operating",)).to_dict()
    assert "prompts" not in d and "attempt" not in d  # a run's plan identity (--resume) is unchanged
    probe = LevelSpec("concurrency", 4, ("search",), prompts=24, attempt=2)
    assert LevelSpec.from_dict(probe.to_dict()) == probe


def test_the_budget_is_the_costliest_search():
    plan = _plan()
    levels = worst_case_levels(plan.setup.search)
    assert [lv.value for lv in levels] == [1, 7, 48, *[48] * 7]
    assert [lv.key for lv in levels][2:5] == ["c48", "c48-2", "c48-3"]
    lines = size_lines(plan)
    assert lines[0].startswith("search: concurrency 1 to 48, at most 10 probes (first round 1, 7, 48;")
    # 6, 42 and 288 prompts in the first round (6 groups at 1, 7, 48), then 7 more probes at 48, each as large as
    # measuring a load again may grow (24 groups: 1152 prompts), which the 400 of the workload cap
    assert lines[1].startswith(f"requests: at most {6 + 42 + 288 + 7 * 400} per arm")
    assert "(6 groups of the requests in flight per probe, up to 24 measuring a load again; 288 at 48)" in lines[1]
    fixed = size_lines(_plan(EXPERIMENT.replace("groups: 6}", "groups: 6, max_groups: 6}")))
    assert fixed[1].startswith(f"requests: at most {6 + 42 + 288 + 7 * 288} per arm over the search and repeat (6 "
                               "groups of the requests in flight per probe; 288 at 48)")  # fmt: skip
    assert lines[2] == "launches: at most 32 (2 arms x 2 repeats x up to 8 rounds, one server at a time)"
    small = _plan(EXPERIMENT.replace("num_prompts: 400", "num_prompts: 100"))
    (few,) = [line for line in size_lines(small) if not isinstance(line, str)]  # a record the CLI words
    assert (few.kind, few.fields) == (WarningKind.SEARCH_FEW_PROMPTS, {"high": 48.0, "needed": 288, "have": 100})
    assert screen_lines(size_lines(small))[-1] == (
        "warning: a probe at 48 needs 288 prompts for its groups and the workload has 100: raise workload.num_prompts "
        "(or lower loads.search.high)"
    )
    assert estimate_s(plan, Timing(e2e_s=0.1, batch=16, batch_e2e_s=0.2)) > 0


def test_a_load_measured_again_larger_sends_the_prompts_after_those_sent_before():
    """Issue 49: a probe measured again is sized from its load's spread (`probe_groups`), so it need not be the
    first one's size; it starts where the earlier attempts stopped, and the record round-trips."""
    design = _plan().setup.search
    items = tuple(RequestSpec(index=i, prompt=f"p{i}") for i in range(60))
    first, _ = probe_level(design, 1, ())
    again, _ = probe_level(design, 1, (first,), groups=20)
    assert (first.prompts, again.prompts, again.start, again.attempt) == (6, 20, 6, 2)
    assert [it.index for it in again.items_of(items)] == list(range(6, 26))
    third, _ = probe_level(design, 1, (first, again), groups=20)
    assert third.start == 26 and [it.index for it in third.items_of(items)] == list(range(26, 46))
    assert LevelSpec.from_dict(again.to_dict()) == again
    same, _ = probe_level(design, 1, (first,))
    assert same.start is None and "start" not in same.to_dict()  # equal sizes are recorded as before
