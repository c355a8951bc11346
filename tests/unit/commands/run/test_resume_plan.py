"""`speculab run --resume DIR` before anything runs: the plan identity and its check (a changed experiment is refused
in one line naming what changed), the design's blocks in its order, which run again, and the paths it resolves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.resume import (
    block_units,
    blocks_to_run,
    check_same_plan,
    plan_identity,
    prepare_resume,
    resume_paths,
)
from speculab.config import parse_experiment
from speculab.errors import UserError
from speculab.harness.results.ab_dir import repeat_dir, write_setup
from speculab.harness.results.ab_run import ABRun, ChangeCheck
from speculab.harness.results.blocks import BlockState
from speculab.harness.results.warnings import WarningKind
from speculab.report.phrases import warning_text

MOCK = ["python", "-m", "speculab", "mock-server", "--port", "8000"]


def launch_yaml(*, prompts: int = 6, seed: int = 0, sweep: str = "", candidate: str = "") -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: {prompts}}}
sampling: {{max_tokens: 16, seed: {seed}}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 4}}{sweep}}}
repeats: 2
baseline: {{launch: {{engine: other, command: {json.dumps(MOCK)}, port: 8000}}}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
candidate: {{command: {json.dumps([*MOCK, "--tokens-per-chunk", "3"])}{candidate}}}
"""


def two_url_yaml() -> str:
    return """
workload: {spec: "synthetic:input=10,output=8", num_prompts: 6}
loads: {low: {concurrency: 1}, operating: {concurrency: 2}}
repeats: 2
baseline: {url: "http://127.0.0.1:9"}
candidate: {url: "http://127.0.0.1:10"}
speculation: {method: ngram, num_speculative_tokens: 2}
"""


def plan_of(text: str):
    return plan_experiment(parse_experiment(text))


def test_the_same_file_plans_the_same_identity() -> None:
    a, b = plan_identity(plan_of(launch_yaml())), plan_identity(plan_of(launch_yaml()))
    assert a == b and len(a["sha256"]) == 64
    assert set(a["parts"]) == {"workload", "sampling", "loads", "repeats", "arms", "the rest of the setup"}


@pytest.mark.parametrize(
    ("changed", "part"),
    [
        (launch_yaml(prompts=7), "workload"),
        (launch_yaml(seed=1), "workload, sampling"),  # the seed draws the synthetic prompts too
        (launch_yaml(sweep=", sweep: [{concurrency: 1}, {concurrency: 8}]"), "loads"),
        (launch_yaml().replace("repeats: 2", "repeats: 3"), "repeats"),
        (launch_yaml().replace("repeats: 2", "repeats: 2\ncache: {reset: never}"), "loads"),  # #40: blocks differ
        (launch_yaml(candidate=", env: {X: '1'}"), "arms"),
        (launch_yaml().replace("loads:", "slos: {ttft_s: 1}\nloads:"), "the rest of the setup"),
    ],
)
def test_a_changed_experiment_is_refused_in_one_line_naming_what_changed(
    tmp_path: Path, changed: str, part: str
) -> None:
    recorded = plan_identity(plan_of(launch_yaml()))
    with pytest.raises(UserError) as e:
        check_same_plan(tmp_path, recorded, plan_of(changed))
    msg = str(e.value)
    assert "\n" not in msg and f"({part} changed)" in msg and "start a new run with --output" in msg
    check_same_plan(tmp_path, recorded, plan_of(launch_yaml()))  # unchanged: accepted


def test_a_run_recorded_when_change_notes_were_sentences_still_resumes(tmp_path: Path) -> None:
    """Before #48 item 3 the identity hashed each change note as its sentence ("" none); inputs.json kept that sentence,
    read back as a `note` record: the check hashes it in its place, so such a run resumes, and a changed plan is still
    refused."""
    plan = plan_of(launch_yaml())
    assert plan.changes and plan.changes[0].note is not None  # engine other: the change could not be checked
    said = warning_text(plan.changes[0].note)  # the words the note had when the run was recorded
    old = [ChangeCheck.from_dict({**c.to_dict(), "note": said}) for c in plan.changes]
    assert old[0].note is not None and old[0].note.kind == WarningKind.NOTE
    recorded = plan_identity(plan, {c.candidate: said for c in plan.changes})  # as the code of that time hashed it
    assert recorded["sha256"] != plan_identity(plan)["sha256"]
    with pytest.raises(UserError, match=r"\(arms changed\)"):
        check_same_plan(tmp_path, recorded, plan)  # without the saved sentences: the note's form differs
    check_same_plan(tmp_path, recorded, plan, old)
    with pytest.raises(UserError, match=r"\(workload changed\)"):
        check_same_plan(tmp_path, recorded, plan_of(launch_yaml(prompts=8)), old)
    # a run that kept records: nothing stands in, its identity must match as it is
    with pytest.raises(UserError):
        check_same_plan(tmp_path, recorded, plan, plan.changes)


def test_a_run_without_a_recorded_plan_cannot_be_resumed(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="records no plan to check against"):
        check_same_plan(tmp_path, None, plan_of(launch_yaml()))


def test_blocks_in_the_designs_order() -> None:
    launch = block_units(plan_of(launch_yaml()), 2)
    # launch mode: one block a unit; ABBA over repeats, every level per launch
    assert [u[0] for u in launch] == [
        ("baseline", "c1", 1),
        ("baseline", "c4", 1),
        ("ngram-k2", "c1", 1),
        ("ngram-k2", "c4", 1),
        ("ngram-k2", "c1", 2),
        ("ngram-k2", "c4", 2),
        ("baseline", "c1", 2),
        ("baseline", "c4", 2),
    ]
    assert all(len(u) == 1 for u in launch)
    # two-URL mode: a level's blocks of both arms are interleaved, so they finish (or run again) together
    assert block_units(plan_of(two_url_yaml()), 1) == [
        (("baseline", "c1", 1), ("ngram-k2", "c1", 1)),
        (("baseline", "c2", 1), ("ngram-k2", "c2", 1)),
    ]


def test_which_blocks_run_again() -> None:
    C, CUT, M = BlockState.COMPLETE, BlockState.INTERRUPTED, BlockState.MISSING
    units = [(("b", "c1", 1), ("k", "c1", 1)), (("b", "c2", 1), ("k", "c2", 1)), (("b", "c1", 2), ("k", "c1", 2))]
    states = {
        ("b", "c1", 1): C, ("k", "c1", 1): C,
        ("b", "c2", 1): C, ("k", "c2", 1): CUT,  # killed between the two arms' run.json
        ("b", "c1", 2): M, ("k", "c1", 2): M,
    }  # fmt: skip
    done, aside = blocks_to_run(units, states)
    assert done == {("b", "c1", 1), ("k", "c1", 1)}
    assert aside == [("b", "c2", 1), ("k", "c2", 1)]  # both arms of the level run again; nothing never started


def _started(root: Path, plan, blocks: dict[tuple[str, str, int], bool], *, inputs: bool = True) -> None:
    """A run directory as a kill leaves it: inputs.json with the plan, finished (True) and cut (False) blocks."""
    if inputs:
        write_setup(root, ABRun(plan.setup, tuple(a.info for a in plan.arms), plan.changes, plan=plan_identity(plan)))
    for (arm, level, repeat), whole in blocks.items():
        d = repeat_dir(root, arm, level, repeat)
        d.mkdir(parents=True)
        (d / "requests.jsonl").write_text('{"index": 0}\n{"index": 1}\n{"ind')  # a torn last line: killed mid-write
        if whole:
            (d / "run.json").write_text(json.dumps({"interrupted": False}))


def test_prepare_resume_sets_interrupted_blocks_aside_and_notes_them(tmp_path: Path) -> None:
    plan = plan_of(launch_yaml())
    _started(tmp_path, plan, {("baseline", "c1", 1): True, ("baseline", "c4", 1): False})
    resumed = prepare_resume(plan, tmp_path)
    assert resumed.done == {("baseline", "c1", 1)}
    assert (tmp_path / "runs/baseline/c4/r1.interrupted-1/requests.jsonl").is_file()
    assert not (tmp_path / "runs/baseline/c4/r1").exists()
    assert resumed.summary.startswith(f"resuming {tmp_path}: 1 of 8 blocks had finished; 7 to run")
    assert any(n.startswith("resumed at ") and "without a word (killed" in n for n in map(warning_text, resumed.notes))
    assert any(
        "at concurrency 4, repeat 1: interrupted after 3 records" in n and "runs/baseline/c4/r1.interrupted-1" in n
        for n in map(warning_text, resumed.notes)
    )
    assert resumed.setup.items == plan.setup.items  # the prompts are the plan's, as they were sent


def test_a_run_with_nothing_left_only_re_renders(tmp_path: Path) -> None:
    plan = plan_of(launch_yaml())
    every = [(a, lv, r) for a in ("baseline", "ngram-k2") for lv in ("c1", "c4") for r in (1, 2)]
    _started(tmp_path, plan, dict.fromkeys(every, True))
    resumed = prepare_resume(plan, tmp_path)  # e.g. killed while it rendered the report
    assert len(resumed.done) == 8 and resumed.summary.endswith("8 of 8 blocks had finished; 0 to run")
    assert not any(n.startswith("resumed at") for n in map(warning_text, resumed.notes))
    assert not list(tmp_path.glob("runs/*/*/*.interrupted-*"))


def test_resume_paths(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(launch_yaml())
    plan = plan_experiment(parse_experiment(exp.read_text(), source=str(exp)))
    assert plan.source == str(exp.resolve())
    run = tmp_path / "run"
    _started(run, plan, {})
    assert resume_paths(run, None, None) == (exp.resolve(), run)  # the file DIR ran
    assert resume_paths(run, exp, run) == (exp, run)
    assert resume_paths(None, exp, None) == (exp, None)
    with pytest.raises(UserError, match="drop --output"):
        resume_paths(run, None, tmp_path / "other")
    with pytest.raises(UserError, match="give the experiment file"):
        resume_paths(None, None, None)
    exp.unlink()
    with pytest.raises(UserError, match=r"its experiment file .* is gone; give it: speculab run EXPERIMENT --resume"):
        resume_paths(run, None, None)


SEARCH = """
workload: {spec: "synthetic:input=10,output=8", num_prompts: 300}
loads: {search: {kind: concurrency, low: 1, high: 48, tolerance: 12, max_probes: 10, groups: 6}}
baseline: {url: "http://127.0.0.1:9"}
candidate: {url: "http://127.0.0.1:10"}
speculation: {method: ngram, num_speculative_tokens: 2}
"""


def _searched(root: Path, blocks: dict[tuple[str, str, int], bool], stop: str | None = None):
    """A search's directory as a kill leaves it: its first round (1, 7, 48) placed and recorded, the plan it checks
    the one the file makes (no levels); the file's plan returned."""
    from dataclasses import replace

    from speculab.commands.run.probing.rounds import probe_level

    plan = plan_of(SEARCH)
    design = plan.setup.search
    levels: list = []
    for load in (1, 7, 48):
        levels.append(probe_level(design, load, levels)[0])
    search = {**design, "rounds": [[1.0, 7.0, 48.0]], "stop": stop}
    setup = replace(plan.setup, levels=tuple(levels), search=search)
    write_setup(root, ABRun(setup, tuple(a.info for a in plan.arms), plan.changes, plan=plan_identity(plan)))
    _started(root, None, blocks, inputs=False)
    return plan


def test_a_search_resumes_at_the_levels_it_placed(tmp_path: Path) -> None:
    plan = _searched(
        tmp_path,
        {("baseline", "c1", 1): True, ("ngram-k2", "c1", 1): True, ("baseline", "c7", 1): True,
         ("ngram-k2", "c7", 1): False},
    )  # fmt: skip
    resumed = prepare_resume(plan, tmp_path)
    assert resumed.done == {("baseline", "c1", 1), ("ngram-k2", "c1", 1)}
    # two-URL mode: both arms of c7 run again, the one that finished set aside too
    assert sorted(p.parent.name + "/" + p.name for p in tmp_path.glob("runs/*/c7/r1.interrupted-*")) == [
        "c7/r1.interrupted-1",
        "c7/r1.interrupted-1",
    ]
    assert [lv.key for lv in resumed.setup.levels] == ["c1", "c7", "c48"]
    assert [lv.prompts for lv in resumed.setup.levels] == [6, 42, 288]  # as sized when placed
    assert resumed.setup.search["rounds"] == [[1.0, 7.0, 48.0]]
    assert resumed.summary == (
        f"resuming {tmp_path}: the search had placed 3 probe(s) in 1 round(s); 2 of 6 of their blocks had "
        "finished; 4 to run, then it goes on placing probes (2 started before, set aside: nothing is deleted)"
    )
    assert any(n.startswith("resumed at ") for n in map(warning_text, resumed.notes))


def test_a_search_killed_between_rounds_resumes_to_place_the_next(tmp_path: Path) -> None:
    every = {(a, lv, 1): True for a in ("baseline", "ngram-k2") for lv in ("c1", "c7", "c48")}
    resumed = prepare_resume(_searched(tmp_path, every), tmp_path)
    assert len(resumed.done) == 6 and "6 of 6 of their blocks had finished; 0 to run, then" in resumed.summary
    assert any(
        n.startswith("resumed at ") for n in map(warning_text, resumed.notes)
    )  # it goes on, so it says it was resumed


def test_a_finished_search_resumed_is_complete(tmp_path: Path) -> None:
    every = {(a, lv, 1): True for a in ("baseline", "ngram-k2") for lv in ("c1", "c7", "c48")}
    resumed = prepare_resume(_searched(tmp_path, every, stop="tolerance"), tmp_path)
    assert resumed.summary == f"resuming {tmp_path}: the search is complete (it stopped: tolerance); nothing to run"
    assert not any(n.startswith("resumed at") for n in map(warning_text, resumed.notes))


@pytest.mark.parametrize(
    "changed",
    [SEARCH.replace("tolerance: 12", "tolerance: 6"), SEARCH.replace("high: 48", "high: 64")],
)
def test_a_search_with_another_design_is_refused_as_its_loads_changed(tmp_path: Path, changed: str) -> None:
    recorded = plan_identity(plan_of(SEARCH))
    with pytest.raises(UserError, match=r"\(loads changed\)"):
        check_same_plan(tmp_path, recorded, plan_of(changed))
    check_same_plan(tmp_path, recorded, plan_of(SEARCH))
