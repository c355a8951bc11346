"""The headline's answers, for `--fail-on` (a CI gate: exit 5 when one the user named is among them), and the error
gate's first failure (exit 4): read from a built report, so every command that gives a verdict gates the same way.
Moved here from the verdict's builder, which makes the report; this reads it."""

from __future__ import annotations

from dataclasses import replace

from speculab.config.experiment import DEFAULT_DECIDE_ON
from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE, error_gate
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.verdict.model import Answer, Report


def report_error_gate(report: Report, max_error_rate: float) -> ReportWarning | None:
    """The first arm and load that fail the error gate, the gate's record about them (the command's exit says it);
    None when all pass."""
    for lv in report.levels:
        for a in lv.arms:
            why = error_gate(a.error, a.sent, a.errors_by_category, max_error_rate)
            if why is not None:
                label = next((x.label for x in report.arms if x.name == a.arm), a.arm)
                return replace(why, subject=label, load=lv.label)
    return None


# ---------------------------------------------------------------------------------------------------------------
# The headline's answers, for `--fail-on` (a CI gate: exit 5 when one the user named is among them)
# ---------------------------------------------------------------------------------------------------------------

# What `--fail-on` may name: a candidate's answer at a load on the deciding metric (`Ratio.decision`), "no-verdict"
# for a load a gate left without one (runs missing, speculation not active, load not achieved, too few pairs), "worse"
# for the correctness answer (`CorrectnessComparison.worse`) and "errors" for the error gate (`--max-error-rate`).
FAIL_ON_ANSWERS = ("slower", "inconclusive", "equivalent", "no-verdict", "worse", "errors")
_DECISIONS = ("faster", "slower", "equivalent", "inconclusive", "errors")


def headline_answers(report: Report) -> tuple[Answer, ...]:
    """Every headline answer of the report as (answer, where it was given): each candidate's answer on the deciding
    metric (TPOT unless `decide_on`) at each load, or its gate's; each candidate's correctness when worse; and the
    error gate when it failed (where: the gate's record, whom and where it failed)."""
    labels = {a.name: a.label for a in report.arms}
    deciding = report.options.get("decide_on", DEFAULT_DECIDE_ON)
    out: list[Answer] = []
    for lv in report.levels:
        for c in lv.comparisons:
            r = c.metric(deciding) if c.gate == "ok" else None
            answer = r.decision if r is not None and r.decision else c.decision
            answer = answer if answer in _DECISIONS else "no-verdict"
            out.append((answer, f"{labels.get(c.candidate, c.candidate)} at {lv.label}"))
    out += [("worse", f"{c.label}'s correctness") for c in report.candidates if c.correctness and c.correctness.worse]
    gate = report_error_gate(report, report.options.get("max_error_rate", DEFAULT_MAX_ERROR_RATE))
    if gate is not None:
        out.append(("errors", gate))
    return tuple(out)
