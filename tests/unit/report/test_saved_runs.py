"""Result directories written by earlier releases still load, re-render, and give the same summary.json (every key
the old file had, with its value; a later release may add keys)."""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from speculab.harness.verdict.model import Report, WarningKind
from speculab.report.console.ab import ab_renderable
from speculab.report.html.page import view
from speculab.report.phrases import warning_lines
from speculab.report.render import render_run_dir
from speculab.report.summary import summary_dict

FIXTURES = Path(__file__).parent / "fixtures"


def _missing_or_changed(old: Any, new: Any, path: str = "") -> list[str]:
    """Where `new` lacks or changed what `old` holds (keys `new` adds are fine: a later release may add fields)."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [path or "."]
        return [
            p
            for k, v in old.items()
            for p in (_missing_or_changed(v, new[k], f"{path}.{k}") if k in new else [f"{path}.{k}"])
        ]
    if isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            return [path]
        return [
            p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in _missing_or_changed(a, b, f"{path}[{i}]")
        ]
    return [] if old == new else [path]


_OVER_REPEATS = re.compile(
    r"\.(output_tok_s|requests_per_s|total_tok_s|usd_per_mtok|cost_ratio|throughput_ratio)\.(low|high)$"
)


def _at(d: Any, path: str) -> Any:
    """The value at a path `_missing_or_changed` names ('.levels[0].arms[1].output_tok_s.low')."""
    for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", path):
        d = d[key] if key else d[int(index)]
    return d


def test_a_run_saved_before_the_verdict_moved_rerenders_to_the_same_summary(tmp_path: Path):
    saved = FIXTURES / "ab_run_v1"
    run = tmp_path / "run"
    shutil.copytree(saved, run)
    (run / "summary.json").unlink()
    report = render_run_dir(run)
    old, new = json.loads((saved / "summary.json").read_text()), json.loads((run / "summary.json").read_text())
    changed = _missing_or_changed(old, new)
    # the verdict line is a sentence made when rendering: a release may word it anew (the margin, since #23); it is
    # still there, with the same numbers
    lines = [p for p in changed if p.endswith(".verdict_line")]
    # a release may warn about more (since #23: launch pairs that differ by more than the margin), never less; since
    # #35 a warning is a record with its sentence beside it (`text`), where the old file wrote the sentence alone
    assert all(isinstance(w, str) for w in old["warnings"]) and all(w["kind"] for w in new["warnings"])
    assert set(old["warnings"]) <= {w["text"] for w in new["warnings"]}, new["warnings"]
    sentences = {".warnings", *(f".candidates[{i}].correctness.warnings" for i in range(len(old["candidates"])))}
    sentences |= {
        f".candidates[{i}].what_if[{j}].notes"
        for i, c in enumerate(old["candidates"])
        for j in range(len(c["what_if"]))
    }
    # since #36 a ratio's interval over fewer than 3 repeats (this run has 2) is withheld: its bounds are null
    withheld = [p for p in changed if _OVER_REPEATS.search(p)]
    assert old["setup"]["repeats"] < 3 and withheld and all(_at(new, p) is None for p in withheld), withheld
    changed = [p for p in changed if p not in withheld]
    # since summary /2 (#48 item 3) a gate's reason is a record, null where the gate is ok (the old file: "")
    assert new["schema"] == "speculab.report.summary/2" and old["schema"] == "speculab.report.summary/1"
    reasons = [p for p in changed if p.endswith(".gate_reason")]
    assert all(_at(old, p) == "" and _at(new, p) is None for p in reasons), reasons
    changed = [p for p in changed if p not in reasons and p != ".schema"]
    # and so is a metric's note and a candidate's single-change note (null where there is none; the old file: ""),
    # its sentence beside it
    notes = [p for p in changed if p.endswith((".note", ".change_note"))]
    assert all(_at(new, p) == ({**_at(new, p), "text": _at(old, p)} if _at(old, p) else None) for p in notes), notes
    changed = [p for p in changed if p not in notes]
    # and so are the correctness verdict and each failed check, their sentences beside them
    said = [p for p in changed if p.endswith(".correctness.verdict") or re.search(r"_checks\.failures\[\d+\]$", p)]
    assert said and all(_at(new, p)["text"] == _at(old, p) for p in said), said
    changed = [p for p in changed if p not in said]
    assert not [p for p in changed if p not in lines and re.sub(r"\[\d+\]$", "", p) not in sentences], changed[:10]
    for o, n in zip(old["candidates"], new["candidates"], strict=True):
        assert o["correctness"]["warnings"] == [w["text"] for w in n["correctness"]["warnings"]]
        # since #48 item 3 the what-if model's notes are records, their sentence beside them (`text`)
        assert [w["notes"] for w in o["what_if"]] == [[x["text"] for x in w["notes"]] for w in n["what_if"]]
    for o, n in zip(old["candidates"], new["candidates"], strict=True):
        assert n["verdict_line"].startswith(o["verdict_line"].split(" faster")[0])
    assert (run / "report.html").stat().st_size > 0
    # and the old summary.json itself reads back as the model, keeping every key and value it had (its verdict_line
    # key is the writer's, not the model's); fields added since read as their defaults; its warnings, sentences then,
    # read as records of kind `note` that say the same words
    again = Report.from_json((saved / "summary.json").read_text())
    assert all(w.kind == WarningKind.NOTE for w in again.warnings)
    assert warning_lines(again.warnings) == old["warnings"]
    assert all(c.gate_reason is None for lv in again.levels for c in lv.comparisons)  # "" there: no reason to say
    kept = {k: v for k, v in again.to_dict().items()}
    kept["warnings"] = warning_lines(again.warnings)
    for lv in kept["levels"]:  # the model says "no reason" as null where the old file said ""
        for c in lv["comparisons"]:
            c["gate_reason"] = "" if c["gate_reason"] is None else c["gate_reason"]
            for m in (m for key in ("metrics", "by_category", "by_turn", "by_prompt_length") for m in c[key]):
                m["note"] = m["note"]["fields"]["text"] if m["note"] else ""  # a sentence read as a note, "" none
        for r in lv["ranking"]:
            if r["vs_best"]:
                r["vs_best"]["note"] = r["vs_best"]["note"]["fields"]["text"] if r["vs_best"]["note"] else ""
    old_model = {k: v for k, v in old.items()}
    for c, k in zip(old_model["candidates"], kept["candidates"], strict=True):
        c.pop("verdict_line", None)
        k["correctness"]["warnings"] = [x["fields"]["text"] for x in k["correctness"]["warnings"]]
        k["correctness"]["verdict"] = k["correctness"]["verdict"]["fields"]["text"]  # a sentence read as a note
        for side in (k["correctness"]["baseline_checks"], k["correctness"]["candidate_checks"]):
            if side:
                side["failures"] = [x["fields"]["text"] for x in side["failures"]]
        for w in k["what_if"]:  # the old file's notes read back as notes of those words
            w["notes"] = [x["fields"]["text"] for x in w["notes"]]
        # the single-change note: a sentence read as a note, "" as none (null)
        k["change_note"] = k["change_note"]["fields"]["text"] if k["change_note"] else ""
    assert not _missing_or_changed(old_model, kept), _missing_or_changed(old_model, kept)[:10]
    assert again.margin == {} and report.margin["tpot_s"] == 0.03  # an old summary says nothing of a margin
    tp = again.levels[0].comparisons[0].metric("tpot_s")
    assert tp is not None and tp.decision == "" and tp.verdict  # old: only the verdict; renderers fall back to it


def test_an_old_summary_whose_warnings_are_sentences_renders_them_once(tmp_path: Path):
    """A summary.json written when warnings were sentences: each reads as a `note` with its words, summary.json writes
    it back as an object with that sentence, and the console and HTML print a sentence given twice once."""
    old = json.loads((FIXTURES / "ab_run_v1" / "summary.json").read_text())
    said = old["warnings"][0]
    old["warnings"] = [said, "the run was interrupted: the report covers the part that ran", said]
    report = Report.from_json(json.dumps(old))
    assert [w.kind for w in report.warnings] == [WarningKind.NOTE] * 3
    written = summary_dict(report)["warnings"]
    assert [w["text"] for w in written] == old["warnings"] and {w["kind"] for w in written} == {"note"}
    assert warning_lines(report.warnings) == old["warnings"][:2]
    assert view(report)["warnings"] == old["warnings"][:2]
    console = Console(record=True, width=400)
    console.print(ab_renderable(report))
    assert console.export_text().count(said[:60]) == 1


@functools.cache  # frozen, and built by two tests: once
def _gated_report() -> Report:
    """Every gate: errors at concurrency 1, load not achieved at 8 req/s, a candidate that made no drafts, no runs at
    concurrency 16, a repeat cut short."""
    from dataclasses import replace

    from fakes.ab_inputs import ArmEffect, make_inputs
    from speculab.harness.design import LevelSpec
    from speculab.harness.verdict.build import build_report
    from speculab.harness.verdict.model import ReportOptions

    levels = (
        LevelSpec("concurrency", 1, ("low", "sweep")),
        LevelSpec("concurrency", 4, ("sweep",)),
        LevelSpec("rate", 8, ("sweep",)),
        LevelSpec("concurrency", 16, ("operating", "sweep")),
    )
    flaky = ArmEffect(tpot_factor={"c1": 0.5, "c4": 0.6, "r8": 0.5}, acceptance_length=2.5, error_rate=0.3)
    slow = ArmEffect(
        tpot_factor={"c1": 0.5, "c4": 0.6, "r8": 0.5}, acceptance_length=2.5, achieved_fraction={"r8": 0.8}
    )
    cands = {"ngram-k4": flaky, "ngram-k2": ArmEffect(acceptance_length=1.0), "ngram-k6": slow}
    inputs = make_inputs(n_prompts=8, repeats=2, levels=levels, candidates=cands, skip=(("ngram-k4", "c16"),))
    runs = list(inputs.runs)
    i = next(j for j, r in enumerate(runs) if r.arm == "baseline" and r.level == "c4" and r.repeat == 2)
    runs[i] = replace(runs[i], records=runs[i].records[:5], interrupted=True)
    return build_report(inputs.with_runs(runs), ReportOptions(n_resamples=100))


def _text(record: dict[str, Any] | None) -> str:
    return record["text"] if record else ""


def _notes_as_sentences(d: dict[str, Any]) -> dict[str, Any]:
    """A summary /2 as it was written before a metric's note was a record (#48 item 3, in /1 and /2 alike): each
    note its sentence, "" where there was none."""
    d = json.loads(json.dumps(d))
    for lv in d["levels"]:
        for c in lv["comparisons"]:
            for m in (m for key in ("metrics", "by_category", "by_turn", "by_prompt_length") for m in c[key]):
                m["note"] = _text(m["note"])
        for r in lv["ranking"]:
            if r["vs_best"]:
                r["vs_best"]["note"] = _text(r["vs_best"]["note"])
    return d


def _correctness_as_sentences(d: dict[str, Any]) -> dict[str, Any]:
    """A summary /2 as it was written before the correctness verdict and its failed checks were records (#48 item 3,
    in /1 and /2 alike): each its sentence."""
    d = json.loads(json.dumps(d))
    for c in d["candidates"]:
        if k := c["correctness"]:
            k["verdict"] = k["verdict"]["text"]
            for side in (k["baseline_checks"], k["candidate_checks"]):
                if side:
                    side["failures"] = [f["text"] for f in side["failures"]]
    return d


@functools.cache
def _said_gated() -> tuple[str, str]:
    """What the console and report.html say of the gated report's summary.json read back (two tests compare older
    files' words with these: drawn once)."""
    return _said(Report.from_json(json.dumps(summary_dict(_gated_report()))))


def _said(r: Report) -> tuple[str, str]:
    """What the console prints and what report.html shows (its view's data) of a report."""
    console = Console(record=True, width=300)
    console.print(ab_renderable(r))
    return console.export_text(), json.dumps(view(r), sort_keys=True, default=str)


def _as_v1(d: dict[str, Any]) -> dict[str, Any]:
    """A summary /2 as a /1 file said it: each gate's reason, what is missing, each load left out and each metric's
    note as its sentence, a gated verdict 'no verdict: <reason>'."""
    d = _correctness_as_sentences(_notes_as_sentences(d)) | {"schema": "speculab.report.summary/1"}
    d["missing"] = [m["text"] for m in d["missing"]]
    for lv in d["levels"]:
        for c in lv["comparisons"]:
            reason = c["gate_reason"]["text"] if c["gate_reason"] else ""
            c["gate_reason"] = reason
            c["verdict"] = f"no verdict: {reason}" if c["verdict"] == "no verdict" else c["verdict"]
    for c in d["candidates"]:
        if c["crossover"]:
            c["crossover"]["excluded"] = [e["text"] for e in c["crossover"]["excluded"]]
    return d


def test_a_summary_whose_gate_reasons_are_sentences_renders_the_same_words() -> None:
    """summary.json /1 saved a gate's reason, what was missing and a crossover's left-out loads as sentences: read back
    they are notes, and the console and report.html say what a /2 file's records say."""
    report = _gated_report()
    new = summary_dict(report)
    comps = [c for lv in new["levels"] for c in lv["comparisons"]]
    kinds = {c["gate_reason"]["kind"] for c in comps if c["gate_reason"]}
    assert kinds >= {"gate_no_runs", "gate_error_rate", "gate_no_drafts", "gate_load_not_achieved"}, kinds
    assert {m["kind"] for m in new["missing"]} == {"no_runs", "repeats_cut"}
    old = Report.from_json(json.dumps(_as_v1(new)))
    assert old.missing and all(m.kind == WarningKind.NOTE for m in old.missing)
    # the /2 file read back, as the /1 one is (NaN is null in both)
    (new_console, new_page), (old_console, old_page) = _said_gated(), _said(old)
    assert "no verdict: ngram k=4 error rate " in new_page and "is above the 2% gate" in new_page
    assert "missing: ngram k=4 at concurrency 16" in new_console
    assert old_console == new_console
    assert old_page == new_page


def test_a_summary_whose_metric_notes_are_sentences_renders_the_same_words() -> None:
    """Before #48 item 3 a metric's note (why it has no verdict: too few groups of prompts sent together) was saved
    as its sentence, "" where none, in summary.json /1 and /2 alike: read back it is a note, "" none, and the console
    and report.html say what the records say; summary.json writes each record with its text."""
    report = _gated_report()
    new = summary_dict(report)
    notes = [m["note"] for lv in new["levels"] for c in lv["comparisons"] for m in c["metrics"] if m["note"]]
    assert notes and {n["kind"] for n in notes} == {"metric_few_groups"}, notes
    assert all(n["text"].startswith("only ") and "prompts sent together" in n["text"] for n in notes), notes
    before = _notes_as_sentences(new)
    old = Report.from_json(json.dumps(before))
    ratios = [m for lv in old.levels for c in lv.comparisons for m in c.metrics]
    assert {m.note.kind for m in ratios if m.note is not None} == {WarningKind.NOTE}
    assert any(m.note is None for m in ratios)  # "": none to say
    said = _said(old)
    assert said == _said_gated()
    assert "too few pairs: ngram k=6: only 2 groups of 4 prompts sent together (8 pairs)" in said[0]  # the console
    assert "only 2 groups of 4 prompts sent together" in said[1]  # report.html


def test_a_summary_whose_correctness_verdict_and_failed_checks_are_sentences_renders_the_same_words() -> None:
    """Before #48 item 3 the correctness verdict and each failed check were saved as sentences, in summary.json /1 and
    /2 alike: read back they are notes, and the console and report.html say what the records say (a lower pass rate
    shown as bad in both); summary.json writes each record with its text."""
    from fakes.ab_inputs import make_inputs, with_check_failures
    from speculab.harness.verdict.build import build_report
    from speculab.harness.verdict.model import ReportOptions

    inputs = with_check_failures(make_inputs(n_prompts=40, repeats=1), "ngram-k4", 18)
    new = summary_dict(build_report(inputs, ReportOptions(n_resamples=100)))
    k = new["candidates"][0]["correctness"]
    assert k["verdict"]["kind"] in {"correctness_checks_lower", "correctness_worse"}, k["verdict"]
    assert k["verdict"]["text"].startswith("pass rate lower")
    assert {f["kind"] for f in k["candidate_checks"]["failures"]} == {"check_failed"}
    assert k["candidate_checks"]["failures"][0]["text"].endswith("check 'contains' failed: missing ' the'")
    old = Report.from_json(json.dumps(_correctness_as_sentences(new)))
    kept = old.candidates[0].correctness
    assert kept is not None and kept.verdict.kind == WarningKind.NOTE
    assert kept.candidate_checks is not None and {f.kind for f in kept.candidate_checks.failures} == {WarningKind.NOTE}
    (new_console, new_page), (old_console, old_page) = _said(Report.from_json(json.dumps(new))), _said(old)
    assert "correctness: pass rate lower" in new_console and "and 8 more" in new_page
    assert '"bad": true' in new_page
    assert old_console == new_console
    assert old_page == new_page
