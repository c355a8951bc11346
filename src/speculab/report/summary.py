"""summary.json of an A/B run: the verdict model as strict JSON, with each candidate's verdict line beside it.

The model (`harness.verdict.model.Report`) holds numbers and decisions; the one sentence a script reading this file
has always found, `candidates[].verdict_line`, is made here when the file is written (`report.phrases`), so the
file keeps its keys while the model stores no prose. Each warning is written as its record (`kind`, `subject`,
`load`, `fields`) with its sentence, `text`, beside it for people reading the file, and so is each record of what
is missing, each gate's reason (`gate_reason`), each metric's `note`, the correctness verdict and its failed checks,
each load a crossover left out and each candidate's single-change note (`change_note`) (schema /2; /1 and an early
/2 saved sentences).
`Report.from_json` reads the file back (the extra keys are ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculab.harness.results.summary_file import write_summary_file
from speculab.harness.verdict.model import CorrectnessComparison, LevelReport, Ratio, Report
from speculab.report.phrases import left_out_text, note_text, reason_text, verdict_line, warning_text


def _add_reason_texts(report: Report, d: dict[str, Any]) -> None:
    """Beside each record of what is missing, each gate's reason, each what-if note and each load a crossover left
    out: its `text`, the words report.html and the terminal say (a script reading the file finds them without the
    report package)."""
    d["missing"] = [{**md, "text": warning_text(m)} for m, md in zip(report.missing, d["missing"], strict=True)]
    for lv, lvd in zip(report.levels, d["levels"], strict=True):
        for comp, cd in zip(lv.comparisons, lvd["comparisons"], strict=True):
            if comp.gate_reason is not None:
                cd["gate_reason"] = {**cd["gate_reason"], "text": reason_text(comp.gate_reason)}
        _add_note_texts(lv, lvd)
    for c, cd in zip(report.candidates, d["candidates"], strict=True):
        if c.change_note is not None:
            cd["change_note"] = {**cd["change_note"], "text": reason_text(c.change_note)}
        for w, wd in zip(c.what_if, cd["what_if"], strict=True):
            wd["notes"] = [{**nd, "text": warning_text(n)} for n, nd in zip(w.notes, wd["notes"], strict=True)]
        if c.crossover is not None:
            xd = cd["crossover"]
            left_out = zip(c.crossover.excluded, xd["excluded"], strict=True)
            xd["excluded"] = [{**ed, "text": left_out_text(e)} for e, ed in left_out]


def _add_note_text(r: Ratio | None, rd: dict[str, Any] | None) -> None:
    """Beside a metric's note (why it has no verdict, or what to read it with): its `text`, as report.html says it."""
    if r is not None and rd is not None and r.note is not None:
        rd["note"] = {**rd["note"], "text": note_text(r)}


def _add_note_texts(lv: LevelReport, lvd: dict[str, Any]) -> None:
    """Every metric's note at a load: each candidate's comparisons, their breakdowns, and the ranking's."""
    for comp, cd in zip(lv.comparisons, lvd["comparisons"], strict=True):
        for key in ("metrics", "by_category", "by_turn", "by_prompt_length"):
            for r, rd in zip(getattr(comp, key), cd[key], strict=True):
                _add_note_text(r, rd)
    for rk, rkd in zip(lv.ranking, lvd["ranking"], strict=True):
        _add_note_text(rk.vs_best, rkd["vs_best"])


def _add_correctness_texts(k: CorrectnessComparison, kd: dict[str, Any]) -> None:
    """Beside the correctness verdict, each of its warnings, each arm's failed checks and the degeneration verdict: its
    `text`."""
    kd["verdict"] = {**kd["verdict"], "text": reason_text(k.verdict)}
    kd["warnings"] = [{**wd, "text": warning_text(w)} for w, wd in zip(k.warnings, kd["warnings"], strict=True)]
    if k.degeneration is not None:
        kd["degeneration"]["verdict"] = {**kd["degeneration"]["verdict"], "text": reason_text(k.degeneration.verdict)}
    for side, key in ((k.baseline_checks, "baseline_checks"), (k.candidate_checks, "candidate_checks")):
        if side is not None:
            said = zip(side.failures, kd[key]["failures"], strict=True)
            kd[key]["failures"] = [{**fd, "text": reason_text(f)} for f, fd in said]
    for check, key in ((k.stream_unary, "stream_unary"), (k.structured_output, "structured_output")):
        if check is not None:  # beyond equality: its finding, and each arm's failures, with their sentences
            kd[key]["finding"] = {**kd[key]["finding"], "text": reason_text(check.finding)}
            for arm, side in ((check.baseline, "baseline"), (check.candidate, "candidate")):
                if arm is not None:
                    said = zip(arm.failures, kd[key][side]["failures"], strict=True)
                    kd[key][side]["failures"] = [{**fd, "text": reason_text(f)} for f, fd in said]


def _add_breach_texts(report: Report, d: dict[str, Any]) -> None:
    """Beside each guardrail breach the recommendation did not hold against a candidate, its `text`."""
    rec = report.recommendation
    if rec is None:
        return
    for a, ad in zip(rec.answers, d["recommendation"]["answers"], strict=True):
        for g, gd in zip(a.guardrails, ad["guardrails"], strict=True):
            if g.breach is not None:
                gd["breach"] = {**gd["breach"], "text": warning_text(g.breach)}


def summary_dict(report: Report) -> dict[str, Any]:
    """The report as plain JSON data, `verdict_line` placed after each candidate's label (where it always was)."""
    d = report.to_dict()
    cands = []
    for c, cd in zip(report.candidates, d["candidates"], strict=True):
        out = {}
        for k, v in cd.items():
            out[k] = v
            if k == "label":
                out["verdict_line"] = verdict_line(report, c)
        cands.append(out)
    d["candidates"] = cands
    d["warnings"] = [{**wd, "text": warning_text(w)} for w, wd in zip(report.warnings, d["warnings"], strict=True)]
    _add_reason_texts(report, d)
    _add_breach_texts(report, d)
    for c, cd in zip(report.candidates, cands, strict=True):
        if c.correctness is not None:
            _add_correctness_texts(c.correctness, cd["correctness"])
    return d


def write_summary(out_dir: Path, report: Report) -> Path:
    """out_dir/summary.json of an A/B run (its schema the model's, `REPORT_SCHEMA`), the one writer of the kind;
    its path."""
    return write_summary_file(out_dir, summary_dict(report), indent=1)
