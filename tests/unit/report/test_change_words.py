"""The words the single-change check's note said when it was a sentence made below the report (fixtures/
change_words.json, saved from the code before #48 item 3 made it a record) are the words its record gives now: on the
terminal before a run, among the report's warnings, in report.html's setup, in summary.json, and in the refusal."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from fakes.ab_inputs import make_inputs
from speculab.commands.compare.pairing import _served_change, inputs_from_results
from speculab.commands.run.lifecycle import RunRecord
from speculab.commands.run.plan import derive_candidate, enforce_single_change, plan_experiment
from speculab.config import SpeculationConfig, parse_experiment
from speculab.errors import UserError
from speculab.harness.design import ArmInfo, LevelSpec
from speculab.harness.results.ab_run import ABRun, ChangeCheck
from speculab.harness.results.warnings import WarningKind
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.process import ServerCommand
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report
from speculab.report.console.ab import print_change
from speculab.report.html.sections import setup_rows
from speculab.report.phrases import warning_text
from speculab.report.summary import summary_dict

FIXTURE = Path(__file__).parent / "fixtures" / "change_words.json"
VLLM_FILES = Path(__file__).parents[2] / "fixtures" / "imports" / "vllm"  # two vLLM bench serve results
NAME = "ngram-k4"  # make_inputs' candidate
VLLM = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000")
NGRAM = SpeculationConfig("ngram", 4, prompt_lookup_max=4, prompt_lookup_min=2)
SAID_NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
TWO_URL = """
workload: "synthetic:input=10,output=8"
loads: {operating: {concurrency: 2}}
baseline: {url: "http://a:1"}
candidate: {url: "http://b:2", model: m2}
speculation: {method: ngram, num_speculative_tokens: 4}
"""


def _derived(engine: str = "vllm", command: tuple[str, ...] | None = None, env: dict | None = None) -> ChangeCheck:
    base = ServerCommand(VLLM if engine == "vllm" else ("srv", "--port", "8000"), 8000, {"A": "1"})
    return derive_candidate(adapter_for(engine), base, NGRAM, name=NAME, command=command, env=env)[1]


def _said(spec: dict | None, **args: object) -> dict:
    """What speculab serve's /version says it runs, as an arm's server_info keeps it."""
    server_args = {"model": "demo", "max_num_seqs": 8, **args, "speculative_config": spec}
    version = {"name": "speculab", "speculative_config": spec, "server_args": server_args}
    return {"version": version, "models": [], "detected_engine": "speculab"}


def _run_said(base: dict, cand: dict) -> ChangeCheck:
    """A two-URL run's change, checked from what both servers said (the lifecycle's `said_change`)."""
    arms = (ArmInfo("baseline", "plain", server_info=base), ArmInfo(NAME, "ngram k=4", server_info=cand))
    two_url = plan_experiment(parse_experiment(TWO_URL)).changes[0]
    return RunRecord(setup=None, arms=arms).said_change(replace(two_url, candidate=NAME), arms[0])  # type: ignore[arg-type]


def _compared(base: dict, cand: dict) -> ChangeCheck:
    """compare's change of two separate runs: checked from what both servers said, else why not."""
    return replace(_served_change(SimpleNamespace(info=base), SimpleNamespace(info=cand)), candidate=NAME)  # type: ignore[arg-type]


EXTRA = (*VLLM, "--max-model-len", "4096", "--speculative-config", '{"method":"ngram"}')
SPEC = (*VLLM, "--speculative-config", '{"method":"ngram"}')


def _changes() -> dict[str, ChangeCheck | None]:
    """Every way the check ends, made by the code that makes it (None: no comparison recorded)."""
    extra, env, same = _derived(command=EXTRA), _derived(command=SPEC, env={"A": "2"}), _derived(command=VLLM)
    two = _derived(command=(*EXTRA, "--enforce-eager"), env={"A": "1", "B": "x"})
    return {
        "verified": _derived(),
        "engine_other": _derived("other", command=("srv", "--port", "8000", "--spec")),
        "extra_flag": extra,
        "extra_flag_allowed": enforce_single_change(extra, True),
        "env_only": env,
        "env_only_allowed": enforce_single_change(env, True),
        "extra_and_env_allowed": enforce_single_change(two, True),
        "identical": same,
        "identical_allowed": enforce_single_change(same, True),
        "two_url": replace(plan_experiment(parse_experiment(TWO_URL)).changes[0], candidate=NAME),
        "said_verified": _run_said(_said(None), _said(SAID_NGRAM)),
        "said_more": _run_said(_said(None), _said(SAID_NGRAM, max_num_seqs=16)),
        "said_nothing": _run_said({}, _said(SAID_NGRAM)),
        "compare_said": _compared(_said(None), _said(SAID_NGRAM)),
        "compare_separate": _compared({"version": "0.1"}, {}),
        "compare_files": replace(
            inputs_from_results(VLLM_FILES / "baseline.json", VLLM_FILES / "candidate.json").changes[0], candidate=NAME
        ),
        "not_recorded": None,
    }


def _refusals() -> dict[str, str]:
    """What `speculab run` says when it refuses a change that is not speculation alone."""
    said = {}
    for case in ("extra_flag", "env_only", "identical"):
        with pytest.raises(UserError) as e:
            enforce_single_change(_changes()[case], False)  # type: ignore[arg-type]
        said[case] = str(e.value)
    return said


def _console(change: ChangeCheck) -> list[str]:
    out = io.StringIO()
    print_change(Console(file=out, width=300, color_system=None), change)
    return out.getvalue().splitlines()


def _text(saved: Any) -> str:
    """summary.json's change_note: its sentence (a file before #48 item 3), its record's `text`, or none ("")."""
    return saved if isinstance(saved, str) else saved["text"] if saved is not None else ""


def _report_words(report: Report) -> dict[str, Any]:
    change_kinds = (WarningKind.NOT_SINGLE_CHANGE, WarningKind.CHANGE_UNVERIFIED)
    (row,) = setup_rows(report)["changes"]
    return {
        "warnings": [warning_text(w) for w in report.warnings if w.kind in change_kinds],
        "html": row,
        "summary": _text(summary_dict(report)["candidates"][0]["change_note"]),
    }


def _words(change: ChangeCheck | None, inputs: ABRun) -> dict[str, Any]:
    """Everything a person reads of one change: before the run, in the report, and in the report read back from
    inputs.json and summary.json as `speculab report` reads them."""
    ab = replace(inputs, changes=(change,) if change is not None else ())
    saved = ABRun.from_setup_dict(json.loads(json.dumps(ab.setup_dict())), ab.runs)  # inputs.json, read back
    report = build_report(saved)
    back = Report.from_json(json.dumps(summary_dict(report)))  # summary.json, read back
    said = {"console": _console(change) if change is not None else [], **_report_words(report)}
    return {**said, "read_back": _report_words(back)}


def said() -> dict[str, Any]:
    """The words every case says (the fixture was this, run on the code before the note was a record)."""
    inputs = make_inputs(n_prompts=6, repeats=1, levels=(LevelSpec("concurrency", 1, ("low",)),))
    return {
        "changes": {case: _words(c, inputs) for case, c in _changes().items()},
        "refusals": _refusals(),
    }


@pytest.fixture(scope="module")
def now() -> dict[str, Any]:
    return said()


@pytest.mark.parametrize("case", sorted(json.loads(FIXTURE.read_text(encoding="utf-8"))["changes"]))
def test_each_change_says_what_it_said(case: str, now: dict[str, Any]) -> None:
    assert now["changes"][case] == json.loads(FIXTURE.read_text(encoding="utf-8"))["changes"][case]


def test_a_refused_change_says_what_it_said(now: dict[str, Any]) -> None:
    assert now["refusals"] == json.loads(FIXTURE.read_text(encoding="utf-8"))["refusals"]


def _saved_as_sentence(record: Any, sentence: str) -> Any:
    """Where a file keeps the note (a record, or null for none), the sentence a file before #48 item 3 kept."""
    return sentence if isinstance(record, dict) or record is None else record


@pytest.mark.parametrize("case", sorted(json.loads(FIXTURE.read_text(encoding="utf-8"))["changes"]))
def test_files_that_kept_the_note_as_its_sentence_say_what_they_said(case: str) -> None:
    """inputs.json and summary.json written before the note was a record kept its sentence ("" for none): read back,
    they render the words the records do."""
    before = json.loads(FIXTURE.read_text(encoding="utf-8"))["changes"][case]
    sentence = before["summary"]
    change = _changes()[case]
    inputs = make_inputs(n_prompts=6, repeats=1, levels=(LevelSpec("concurrency", 1, ("low",)),))
    d = replace(inputs, changes=(change,) if change is not None else ()).setup_dict()
    for c in d["changes"]:
        c["note"] = sentence
    report = build_report(ABRun.from_setup_dict(json.loads(json.dumps(d)), inputs.runs))
    assert _report_words(report) == {k: before[k] for k in ("warnings", "html", "summary")}
    s = summary_dict(report)
    s["candidates"][0]["change_note"] = sentence
    for w in s["warnings"]:
        if w["kind"] == WarningKind.CHANGE_UNVERIFIED.value:
            w["fields"]["note"] = _saved_as_sentence(w["fields"]["note"], sentence)
    assert _report_words(Report.from_json(json.dumps(s))) == before["read_back"]
