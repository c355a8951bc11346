"""The recommendation's sentences (harness.verdict.recommendation): the headline, one line per band, what would
decide an undecided load, every guardrail's answer, what a run that did not finish finished. Made here, when
rendering, from the model's answers and numbers (formatted by `formatting`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from speculab.harness.verdict.choices import DISAGREE, NOT_USERS, TOLERATED
from speculab.harness.verdict.model import METRIC_LABELS, TPOT, UNDECIDED_CHOICE
from speculab.report.formatting import fine_speedup, margin_pct, seconds, speedup, speedup_range
from speculab.report.words import NOT_USERS_ANSWER
from speculab.report.words.verdict import guardrail_breach_text

# ---------------------------------------------------------------------------------------------------------------
# The recommendation (harness.verdict.recommendation): what to ship at each load band.
# ---------------------------------------------------------------------------------------------------------------

_FORM = {
    "plain": "keep plain decoding: no candidate is faster than the baseline beyond the margin at any measured load",
    "single": "ship {w} at every measured load",
    "off-above": "ship {w}, turned off above {axis} {edge}",
    "per-load": "the choice depends on the load: ship each band's configuration (a per-load schedule)",
}

GUARDRAIL_LABELS = {**METRIC_LABELS, "error_rate": "error rate", "correctness": "correctness"}


def _load_text(axis: str, v: float) -> str:
    return f"{v:g}" if axis == "concurrency" else f"{v:g} req/s"


def guardrail_phrase(g: Any) -> str:
    """One guardrail's answer with its numbers: 'TTFT 0.54× (slower) [0.38–0.91]', 'E2E not worse (1.20×
    [1.05–1.31])', 'error rate +4.0 points (p = 0.01)', 'correctness not measured', 'TTFT tolerated: 0.93× slower
    [0.93–0.94], +4.1 ms a request (within the 20.0 ms floor)'."""
    name = GUARDRAIL_LABELS.get(g.name, g.name)
    if g.answer == TOLERATED and getattr(g, "breach", None) is not None:
        return f"{name} {TOLERATED}: {guardrail_breach_text(g.breach.fields).removeprefix(name + ' ')}"
    if g.answer == "not measured" or not math.isfinite(g.estimate):
        return f"{name} {g.answer}"
    if g.name == "error_rate":
        p = f", p = {g.p_value:.2g}" if g.p_value is not None else ""
        return f"{name} {g.answer} ({g.estimate * 100:+.1f} points{p})"
    if g.name == "correctness":
        rng = f"[{g.low * 100:+.1f}…{g.high * 100:+.1f}]".replace("-", "−")
        return f"{name} {g.answer} (checks pass rate {g.estimate * 100:+.1f} points {rng})".replace("-", "−")
    rng = speedup_range(g.low, g.high)
    if g.answer == "worse":
        return f"{name} {fine_speedup(g.estimate)} slower {rng}"
    return f"{name} {g.answer} ({fine_speedup(g.estimate)} {rng})"


def _needed_phrase(a: Any) -> str:
    """What would decide an undecided answer, from its data ("" when nothing says)."""
    if a.needed is None:
        return ""
    if a.why == "not enough paired data" and a.needed_unit == "prompts":
        return f"; use at least {a.needed} prompts at this load"
    return f"; about {a.needed:,} {a.needed_unit} in all would likely decide it"


def answer_phrase(report: Any, a: Any) -> str:
    """Why one candidate got its answer at one load: 'TPOT 1.42× faster, but TTFT 0.54× slower [0.38–0.91]: not
    recommended', 'TPOT inconclusive 1.72× [0.90–2.50]; about 48 prompts in all would likely decide it'."""
    rec = report.recommendation
    what = METRIC_LABELS.get(rec.decide_on, rec.decide_on)
    est = f"{fine_speedup(a.speedup)} {speedup_range(a.speedup_low, a.speedup_high)}"
    if a.why == "guardrail":
        bad = [g for g in a.guardrails if g.answer in ("worse", "leans worse")]
        worse = ", ".join(guardrail_phrase(g) for g in bad)
        verdict = "not recommended" if a.answer == "plain" else "undecided"
        # a guardrail decides only where the deciding metric did not (equivalent and slower are their own why): it
        # was faster, inconclusive, or had too few pairs
        if math.isfinite(a.speedup_low) and a.speedup_low > 1 + rec.margin:
            lead = f"{what} {fine_speedup(a.speedup)} faster"
        elif math.isfinite(a.speedup_low) and math.isfinite(a.speedup_high):
            lead = f"{what} inconclusive {est}"
        else:
            lead = f"{what}: not enough paired data"
        return f"{lead}, but {worse}: {verdict}{_needed_phrase(a)}"
    if a.why == "faster":
        return f"{what} {est} faster"
    if a.why in ("equivalent", "slower", "inconclusive"):
        return f"{what} {a.why} {est}{_needed_phrase(a)}"
    if a.why == "not enough paired data":
        return f"{what}: not enough paired data{_needed_phrase(a)}"
    if a.why == "not finished":
        return "not finished"
    if a.why == NOT_USERS:  # the speed it showed, and why it decides nothing
        return f"{what} {est} measured, but {NOT_USERS_ANSWER}"
    return f"no verdict ({a.why})"


def predicted_lines(report: Any, level: Any) -> list[str]:
    """Under a load's table, in a run started from a prediction (`run --prediction`): each candidate's predicted
    TPOT speedup there beside the measured one, and whether the measurement fell inside the band."""
    labels = {a.name: a.label for a in report.arms}
    out = []
    for comp in level.comparisons:
        band, r = comp.predicted, comp.metric(TPOT.name)
        if band is None:
            continue
        who = labels.get(comp.candidate, comp.candidate)
        if not math.isfinite(band.estimate):
            out.append(f"  {who}: no prediction at this load (the cost fit's step time is not above 0 here)")
            continue
        said = f"  {who} predicted {band.estimate:.2f}× {speedup_range(band.low, band.high)}"
        if r is None or not (math.isfinite(r.speedup_low) and math.isfinite(r.speedup_high)):
            out.append(f"{said} (`speculab predict`); measured: no interval to hold it against")
            continue
        inside = r.speedup_low <= band.high and band.low <= r.speedup_high
        where = "overlaps the band" if inside else "outside the band (see the warnings for what likely broke)"
        measured = f"{r.speedup:.2f}× {speedup_range(r.speedup_low, r.speedup_high)}"
        out.append(f"{said} (`speculab predict`), measured {measured}: {where}")
    return out


def guardrail_lines(report: Any, level: Any) -> list[str]:
    """Under a load's table: each candidate's answer there and every guardrail's, so the table's TPOT verdict is never
    read as the recommendation (a candidate that did not run here: its row says "not run", nothing more)."""
    rec = getattr(report, "recommendation", None)
    if rec is None or not getattr(rec, "answers", ()):
        return []
    labels = {a.name: a.label for a in report.arms}
    out = []
    for a in (x for x in rec.answers if x.level == level.key and level.arm(x.candidate) is not None):
        guards = " · ".join(guardrail_phrase(g) for g in a.guardrails) or "none"
        out.append(f"  {labels.get(a.candidate, a.candidate)}: {a.answer} · guardrails: {guards}")
    return out


def _names(labels: Mapping[str, str], names: Sequence[str]) -> str:
    return ", ".join(labels.get(n, n) for n in names)


def _incomplete_lines(report: Any, run_dir: str) -> list[str]:
    """An interrupted or partial run: no ship or keep-plain answer; what finished, what did not, how to finish."""
    rec = report.recommendation
    labels = {a.name: a.label for a in report.arms}
    level_labels = {lv.key: lv.label for lv in report.levels}
    done: dict[str, list[str]] = {}
    not_done: dict[tuple[str, str], list[str]] = {}
    for p in rec.progress:
        if p.state == "finished":
            done.setdefault(p.level, []).append(p.arm)
        else:
            not_done.setdefault((p.level, p.state), []).append(p.arm)
    out = ["recommendation: none yet: the run did not finish, so it neither ships a candidate nor keeps plain"]
    if done:
        out.append(
            "  finished: " + "; ".join(f"{_names(labels, a)} at {level_labels.get(k, k)}" for k, a in done.items())
        )
    if not_done:
        parts = [f"{_names(labels, a)} at {level_labels.get(k, k)} ({state})" for (k, state), a in not_done.items()]
        out.append("  not finished: " + "; ".join(parts))
    out.append(f"  finish it: speculab run --resume {run_dir}")
    return out


def _headline(report: Any, labels: Mapping[str, str]) -> str:
    """The first line: the form's sentence; plain names a guardrail that kept a faster candidate out; undecided names
    the loads it could not decide and where it ships."""
    rec = report.recommendation
    loads = {c.level: c.label for c in rec.loads}
    search = getattr(report, "search", None)
    if rec.form == "undecided" and search is not None and search.status == "undetermined":
        return "undecided: the search did not place the crossover (see its line below)"
    if rec.form == "undecided":
        undecided = ", ".join(c.label for c in rec.loads if c.answer == "undecided")
        if all(c.decision == NOT_USERS for c in rec.loads if c.answer == "undecided"):
            return (
                f"undecided at {undecided}: acceptance here is not your traffic's, so no speed measured on it "
                "chooses speculation or k (see the first lines)"
            )
        ship = [c for c in rec.loads if c.answer == "ship"]
        shown = _tolerated_suffix(rec, loads)
        if ship and rec.winner:
            where = ", ".join(c.label for c in ship)
            who = labels.get(rec.winner, rec.winner)
            return f"ship {who} at {where} only; undecided at {undecided} (see below){shown}"
        if ship:
            return f"ship each decided band's configuration; undecided at {undecided} (see below){shown}"
        return f"undecided at {undecided}: no candidate is shown to pay there yet (see below)"
    blocked = [a for a in rec.answers if a.answer == "plain" and a.why == "guardrail" and math.isfinite(a.speedup)]
    if rec.form == "per-phase":
        return _per_phase_headline(report, labels)
    if rec.form == "plain" and blocked:
        a = max(blocked, key=lambda x: x.speedup)
        who = f"{labels.get(a.candidate, a.candidate)} at {loads.get(a.level, a.level)}"
        return f"keep plain decoding: {who}: {answer_phrase(report, a)}"
    return _ship_headline(report, labels, search) + _tolerated_suffix(rec, loads)


def _per_phase_headline(report: Any, labels: Mapping[str, str]) -> str:
    """A phased load whose windows chose differently: where each candidate ships, and the windows that keep plain
    with why (a transition where a guardrail broke, a phase where it does not pay), each named."""
    rec = report.recommendation
    ship = [c for c in rec.loads if c.answer == "ship"]
    who = ", ".join(dict.fromkeys(labels.get(c.choice, c.choice) for c in ship))
    where = ", ".join(c.label for c in ship)
    plain = []
    for c in rec.loads:
        if c.answer != "plain":
            continue
        why = [a for a in rec.answers if a.level == c.level and a.answer == "plain"]
        plain.append(f"{c.label} ({answer_phrase(report, why[0])})" if why else c.label)
    return f"the choice depends on the phase: {who} pays at {where}; keep plain at {'; '.join(plain)}"


def _tolerated_suffix(rec: Any, loads: Mapping[str, str]) -> str:
    """The guardrail breaches not held against what ships, said in the headline beside it (a breach is always shown):
    '; not held against it: TTFT 0.93× slower [0.93–0.94], +4.1 ms a request (within the 20.0 ms floor) at
    concurrency 1'."""
    chosen = {c.level: c.choice for c in rec.loads}
    shown = [
        f"{guardrail_breach_text(g.breach.fields)} at {loads.get(a.level, a.level)}"
        for a in getattr(rec, "answers", ())
        if a.answer == "ship" and chosen.get(a.level) == a.candidate
        for g in a.guardrails
        if g.answer == TOLERATED and getattr(g, "breach", None) is not None
    ]
    return f"; not held against it: {'; '.join(shown)}" if shown else ""


def _ship_headline(report: Any, labels: Mapping[str, str], search: Any) -> str:
    """The headline of a recommendation that ships (single, off-above, per-load) or keeps plain for want of speed."""
    rec = report.recommendation
    first = next((b for b in rec.bands if b.choice == rec.winner), None)
    edge = "?"
    if rec.form == "off-above" and search is not None and first is not None and first.upper_edge is not None:
        return (
            f"ship {labels.get(rec.winner or '', rec.winner)}, turn it off above {rec.axis} "
            f"{_crossover_text(search)}, found by a search of {len(search.probes)} probes"
        )
    if first is not None and first.upper_edge is not None:
        edge = f"~{_load_text(rec.axis, first.upper_edge)}"
    elif first is not None and first.edge_between is not None:
        lo, hi = first.edge_between
        edge = f"somewhere between {_load_text(rec.axis, lo)} and {_load_text(rec.axis, hi)}"
    return _FORM[rec.form].format(w=labels.get(rec.winner or "", rec.winner), axis=rec.axis, edge=edge)


def _crossover_text(search: Any) -> str:
    """'24.5 [19–26]': the crossover's estimate and interval (an open end: 'below' the lowest probe, 'above' the
    highest)."""
    c = search.crossover

    def load(v: float | None, open_end: str) -> str:
        return open_end if v is None else f"{v:.3g}"

    est = "?" if c.estimate is None else f"{c.estimate:.3g}"
    return f"{est} [{load(c.low, 'below')}–{load(c.high, 'above')}]"


def _end_text(search: Any, point: Any) -> str:
    """One probe's evidence: '1: 2.00× [1.99–2.01]' (the deciding metric's speedup and interval), or no verdict."""
    if not math.isfinite(point.effect):
        return f"{point.load:g}: no verdict"
    lo, hi = math.exp(point.effect_low), math.exp(point.effect_high)
    return f"{point.load:g}: {speedup(math.exp(point.effect))} {speedup_range(lo, hi)}"


def _ends_text(search: Any, points: Sequence[Any], load: float) -> str:
    """The evidence at one end of the range: its one measurement with its interval, or, where the search measured
    that load more than once, every measurement's estimate in the order measured (each has its own verdict; pooling
    them is the fit's job, not a sentence's)."""
    here = [p for p in points if p.load == load]
    if len(here) == 1:
        return _end_text(search, here[0])
    return f"{load:g} ({len(here)} measurements): " + ", ".join(speedup(math.exp(p.effect)) for p in here)


_STOPS = {
    "tolerance": "its interval is within the tolerance",
    "budget": "its probes were spent",
    "faster throughout": "faster throughout, decided",
    "slower throughout": "slower throughout, decided",
    "no verdict": "no probe had a verdict",
    "rises": "slower at a lower load and faster at a higher one, decided",
}


def search_line(search: Any, labels: Mapping[str, str]) -> str:
    """The search's answer in one line (`loads: {search: ...}`): where the followed candidate stops paying, with its
    interval; or that it never crosses between the ends, with the evidence at each end; or that it is undetermined."""
    who = labels.get(search.candidate or "", search.candidate or "no candidate")
    metric = METRIC_LABELS.get(search.metric, search.metric)
    n = len(search.probes)
    ends = [p for p in search.points if math.isfinite(p.effect)]
    evidence = (
        f"{metric} at {_ends_text(search, ends, ends[0].load)} and at {_ends_text(search, ends, ends[-1].load)}"
        if ends
        else ""
    )
    stop = f"; stopped: {_STOPS.get(search.stop, search.stop)}" if search.stop else "; it did not finish"
    span = f"{search.range_low:g} and {search.range_high:g}"
    if search.status == "crosses":
        iv = f"{search.confidence:.0%}"
        return (
            f"search: {who} stops paying on {metric} at {search.kind} {_crossover_text(search)} ({iv} interval), "
            f"from {n} probes{stop}"
        )
    if search.status in ("faster throughout", "slower throughout"):
        side = "faster" if search.status == "faster throughout" else "slower"
        return f"search: {who} never crosses between {search.kind} {span}: {side} at both ends ({evidence}){stop}"
    if search.status == "rises":  # the effect grows with load: the search's shape (faster, then slower) does not hold
        return (
            f"search: {who} does not stop paying between {search.kind} {span}: it is slower at the lower load and "
            f"faster at the higher ({evidence}), so it pays only under load; no crossover to turn it off at{stop}"
        )
    return f"search: undetermined after {n} probes between {search.kind} {span}" + (
        f" ({evidence}){stop}" if evidence else stop
    )


def says_how_to_finish(report: Any) -> bool:
    """True when the recommendation block already ends with `speculab run --resume DIR` (a run that did not finish),
    so the caller does not print its own interrupted line beside it."""
    rec = getattr(report, "recommendation", None)
    return rec is not None and rec.form == "incomplete"


def recommendation_lines(report: Any, run_dir: str = "DIR") -> list[str]:
    """The first block of the report: one headline, one line per band with its loads and upper edge, and the rule;
    for a run that did not finish, what finished and how to finish it (`run_dir`: the run's directory)."""
    rec = getattr(report, "recommendation", None)
    if rec is None:
        return []
    if rec.form == "incomplete":
        return _incomplete_lines(report, run_dir)
    labels = {a.name: a.label for a in report.arms}
    out = [f"recommendation: {_headline(report, labels)}"]
    search = getattr(report, "search", None)
    out.extend(f"  {line}" for line in ([search_line(search, labels)] if search is not None else []))
    out.extend(_band_lines(report, labels))
    out.extend(_cost_lines(rec, labels))
    guards = _names(GUARDRAIL_LABELS, getattr(rec, "guardrails", ())) or "none"
    out.append(
        f"  rule: ships where {METRIC_LABELS.get(rec.decide_on, rec.decide_on)} is faster beyond the "
        f"{margin_pct(rec.margin)} margin and no guardrail ({guards}) is worse beyond its own; else plain, or undecided"
    )
    out.extend(_floors_lines(rec))
    return out


def _floors_lines(rec: Any) -> list[str]:
    """Under the rule, what else a time guardrail's breach must be to count: '  floors: a time guardrail counts only
    where a request also loses more than TTFT 20.0 ms, E2E 20.0 ms; TTFT only where the candidate misses its SLO
    (500.0 ms)'; none when no guardrail has either (or in a summary written before floors)."""
    guards = getattr(rec, "guardrails", ())
    slo = {g: v for g, v in getattr(rec, "slo_limits", {}).items() if g in guards}
    floors = {g: v for g, v in getattr(rec, "floors", {}).items() if g in guards and v > 0 and g not in slo}
    parts = []
    if floors:
        said = ", ".join(f"{GUARDRAIL_LABELS.get(g, g)} {seconds(v)}" for g, v in floors.items())
        parts.append(f"a time guardrail counts only where a request also loses more than {said}")
    for g, v in slo.items():
        parts.append(f"{GUARDRAIL_LABELS.get(g, g)} only where the candidate misses its SLO ({seconds(v)})")
    return [f"  floors: {'; '.join(parts)}"] if parts else []


def _band_lines(report: Any, labels: Mapping[str, str]) -> list[str]:
    """One line per band: its loads, its choice with the speedup (or why plain, or what is undecided), its edge."""
    rec = report.recommendation
    # the bands cut the loads' choices in order (a phased load's windows repeat a value: never look one up by it)
    choices = iter(rec.loads)
    answers = getattr(rec, "answers", ())
    out = []
    for b in rec.bands:
        mine = [c for c in (next(choices, None) for _ in b.loads) if c is not None]
        if b.choice == UNDECIDED_CHOICE:  # one line per load: each says what would decide it there
            for c in mine:
                here = [a for a in answers if a.level == c.level and a.answer != "ship"]
                why = "; ".join(f"{labels.get(a.candidate, a.candidate)}: {answer_phrase(report, a)}" for a in here)
                if c.decision == DISAGREE:  # measured more than once (a search): the answers differ
                    n = sum(1 for lv in report.levels if lv.kind == rec.axis and lv.value == c.value)
                    why = f"{DISAGREE}: {n} measurements at this load gave different answers"
                out.append(f"  {c.label}: undecided ({why or c.decision})")
            continue
        loads = ", ".join(b.load_labels)
        picks = []
        for c in mine:
            if c.decision == "faster":
                tied = f", tied with {', '.join(labels.get(t, t) for t in c.tied)}" if c.tied else ""
                if c.kept_over:
                    tied += f"; kept over {labels.get(c.kept_over, c.kept_over)}, which is not faster beyond the margin"
                # a faster candidate a guardrail held back is said beside the choice, or the line would read as if the
                # choice were the load's fastest (the per-load best line names that one)
                held = [a for a in answers if a.level == c.level and a.why == "guardrail" and a.speedup > c.speedup]
                tied += "".join(f"; {labels.get(a.candidate, a.candidate)}: {answer_phrase(report, a)}" for a in held)
                picks.append(f"{speedup(c.speedup)} {speedup_range(c.speedup_low, c.speedup_high)}{tied}")
            elif c.decision == "guardrail":
                here = [a for a in answers if a.level == c.level and a.why == "guardrail"]
                why = [f"{labels.get(a.candidate, a.candidate)}: {answer_phrase(report, a)}" for a in here]
                picks.append(f"{c.label}: " + "; ".join(why) if len(b.loads) > 1 else "; ".join(why))
            else:
                picks.append(c.decision)
        text = f"  {loads}: {b.label} ({'; '.join(picks)})"
        if b.upper_edge is not None:
            iv = ""
            if b.upper_edge_low is not None and b.upper_edge_high is not None:
                iv = f" [{_load_text(rec.axis, b.upper_edge_low)}–{_load_text(rec.axis, b.upper_edge_high)}]"
            near = _load_text(rec.axis, b.upper_edge)
            if b.edge_source.startswith("search"):  # an estimate between probes: its digits beyond 3 say nothing
                near = _load_text(rec.axis, float(f"{b.upper_edge:.3g}"))
            text += f"; band ends near {rec.axis} {near}{iv} ({b.edge_source})"
        elif b.edge_between is not None:
            lo, hi = b.edge_between
            text += f"; band ends between {rec.axis} {_load_text(rec.axis, lo)} and {_load_text(rec.axis, hi)}"
        out.append(text)
    return out


def _money(v: float | None) -> str:
    return "?" if v is None else f"${v:,.0f}"


def _cost_lines(rec: Any, labels: dict[str, str]) -> list[str]:
    """Plain vs the recommendation at the target rate, with the range from the throughput intervals."""
    c = rec.cost
    if c is None:
        return []
    p = c.plan
    name = labels.get(c.candidate, c.candidate)
    if getattr(c, "by_load", False):
        name += " as recommended per load (plain where plain was chosen)"

    def side(s: Any) -> str:
        if s.gpus is None:
            return "no measured load meets the SLOs"
        return f"{s.replicas} replica(s), {s.gpus} GPU(s), {_money(s.usd_per_month)}/month"

    line = (
        f"  cost at {p.target_rate_rps:g} req/s within the SLOs: without speculation {side(p.baseline)}; "
        f"{name} {side(p.candidate)}"
    )
    d = p.monthly_difference_usd
    if d is not None:
        word = "saves" if d < 0 else "costs"
        line += f"; {word} {_money(abs(d))}/month"
        ends = [x.monthly_difference_usd for x in (c.most_favourable, c.least_favourable) if x is not None]
        if len(ends) == 2 and None not in ends:
            lo, hi = sorted(ends)  # candidate - plain, $/month

            def signed(v: float) -> str:
                return ("-" if v < 0 else "+") + _money(abs(v))

            line += f" (from {signed(lo)} to {signed(hi)}/month across the throughput intervals)"
        elif c.repeats < 2:
            # how to get more repeats: the few-repeats warning says it, in the words of the run's command
            line += " (one repeat: no interval)"
        else:
            # an end of the requests/s interval over repeats where no measured load meets the SLOs (a t-interval
            # from 2-3 repeats can reach 0): the plan has no price there, so the range is unbounded
            line += (
                " (no range: at an end of the throughput intervals over repeats no measured load meets the SLOs; "
                "more repeats narrow them)"
            )
    return [line]
