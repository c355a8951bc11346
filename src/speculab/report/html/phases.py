"""report.html's phased load (issue 52): both arms' latency over the schedule's time with the load beneath (and the
acceptance each response reported, where the engine reports it), and a row per window: its load and span, each
candidate's decision with its interval and its answer, each arm's p99 and stalled requests."""

from __future__ import annotations

from typing import Any

from speculab.harness.verdict.model import METRIC_LABELS, TPOT, PhaseView, PhaseWindowView, Report
from speculab.report.formatting import ms, speedup, speedup_range
from speculab.report.html.plots import phase_timeline
from speculab.report.html.sections import arm_labels


def phases_view(report: Report) -> dict[str, Any] | None:
    """The phases section's plot and rows; None for a run without a phased load."""
    if not report.phases:
        return None
    labels = arm_labels(report)
    rows = []
    for p in report.phases:
        for w in (p.transition, p.steady):
            if w is not None:
                rows.append(_row(p, w, labels))
    return {"plot": _plot(report, labels), "rows": rows}


def _row(p: PhaseView, w: PhaseWindowView, labels: dict[str, str]) -> dict[str, Any]:
    answers = {a.candidate: a for a in w.answers}
    decisions = []
    for m in w.metrics:
        what = METRIC_LABELS.get(m.metric, m.metric)
        who = labels.get(m.candidate, m.candidate)
        decisions.append(
            f"{who}: {what} {m.decision} {speedup(m.speedup)} {speedup_range(m.speedup_low, m.speedup_high)}"
        )
    return {
        "window": "transition into" if w.key.startswith("t") else "phase",
        "label": w.label,
        "load": p.label,
        "span": f"{w.start_s:g}–{w.end_s:g} s",
        "decisions": decisions,
        "answers": [f"{labels.get(c, c)}: {a.answer} ({a.why})" for c, a in answers.items()],
        "arms": [
            f"{labels.get(a.arm, a.arm)}: TPOT p99 {ms(a.tpot_p99_s)}, E2E p99 {ms(a.e2e_p99_s)}, "
            f"stalled {a.stalled_requests if a.stalled_requests is not None else 'not in the file'} of {a.sent}"
            for a in w.arms
        ],
    }


def _plot(report: Report, labels: dict[str, str]) -> str:
    """TPOT over the schedule where the requests have one, else E2E; acceptance and k from the engine's counters
    where it counts them, else acceptance per response where responses carry it; the load as a step per phase."""
    tpot = [p for p in report.timeline if p.tpot_s is not None]
    metric, key = ("TPOT", TPOT.name) if tpot else ("E2E", "e2e_s")
    latency: dict[str, tuple[list[float], list[float]]] = {}
    per_response: dict[str, tuple[list[float], list[float]]] = {}
    for p in report.timeline:
        name = labels.get(p.arm, p.arm)
        _add(latency, name, p.t_s, getattr(p, key))
        _add(per_response, name, p.t_s, p.acceptance)
    counted: dict[str, tuple[list[float], list[float]]] = {}
    k_in_use: dict[str, tuple[list[float], list[float]]] = {}
    for c in report.speculation_timeline:
        name = labels.get(c.arm, c.arm)
        _add(counted, name, c.t_s, c.acceptance)
        _add(k_in_use, name, c.t_s, c.k)
    if not latency:
        return ""
    last = report.phases[-1]
    load = ([p.start_s for p in report.phases] + [last.end_s], [p.value for p in report.phases] + [last.value])
    spans = [(p.transition.start_s, p.transition.end_s) for p in report.phases if p.transition is not None]
    load_name = "concurrency" if report.phases[0].kind == "concurrency" else "req/s"
    acceptance = counted or per_response
    return phase_timeline(latency, acceptance, k_in_use, load, spans, metric=metric, load_name=load_name)


def _add(series: dict[str, tuple[list[float], list[float]]], name: str, t: float, v: float | None) -> None:
    if v is not None:
        series.setdefault(name, ([], []))[0].append(t)
        series[name][1].append(v)
