"""The A/B report in the terminal (speculab run / demo / report): the verdict first, hyperfine style, then two
tables per load (each arm's latency p50 and p99; each candidate's speedup and verdict), then warnings. Reads a
`speculab.harness.verdict.model.Report`; formats only. The tables fit the terminal by shortening arm names, never by
dropping numbers (console/fit.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from speculab.harness.results.summary_file import SUMMARY_FILE
from speculab.harness.verdict.model import E2E, FORCED, HEADLINE, METRIC_LABELS, TPOT, TTFT
from speculab.report.console.bench import ms_cell
from speculab.report.console.fit import FittedTable
from speculab.report.energy import energy_lines, energy_measured
from speculab.report.formatting import MISSING, interval, margin_pct, num, speedup, speedup_range
from speculab.report.phrases import (
    best_lines,
    cache_reset_phrase,
    change_note_text,
    decision_of,
    guardrail_lines,
    launch_phrase,
    note_text,
    pairs_phrase,
    positions_phrase,
    recommendation_lines,
    samples_phrase,
    verdict_line,
    warning_lines,
    warning_text,
)
from speculab.report.recommendation import predicted_lines
from speculab.report.slo_capacity import slo_capacity_lines
from speculab.report.words import NOT_USERS_K

# The four answers (and the older verdicts of summaries before margins) in a table cell
STYLES = {"faster": "green", "slower": "red", "inconclusive": "yellow"}
SHORT = {"no detectable difference": "no diff.", "not enough paired data": "too few pairs"}


def _table() -> Table:
    """A table in the A/B report's one style: units in the title, headers one word, no edge, cells never wrap."""
    from rich import box

    return Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )


# the latency figures a load's first table shows, p50 and p99 each, with their cell format (header: the label)
LATENCY = ((TPOT, ms_cell), (TTFT, ms_cell), (E2E, num))


def latency_table(report: Any, level: Any) -> FittedTable:
    """One load: a row per arm with p50 and p99 of TPOT, TTFT (ms) and E2E (s), and output tokens/s."""

    def build(short: Any) -> Table:
        t = _table()
        t.add_column("\narm", no_wrap=True)
        for fig, _ in LATENCY:  # the metric over its p50, the p99 beside it: two header lines, narrow columns
            t.add_column(f"{fig.label}\np50", justify="right", no_wrap=True)
            t.add_column("\np99", justify="right", no_wrap=True)
        t.add_column("\ntok/s", justify="right", no_wrap=True)
        for arm in report.arms:
            a = level.arm(arm.name)
            if a is None:
                t.add_row(escape(short(arm.label)), *([MISSING] * (2 * len(LATENCY) + 1)))
                continue
            d = a.distributions
            cells = [cell(getattr(d[fig.name], p)) for fig, cell in LATENCY for p in ("p50", "p99")]
            t.add_row(escape(short(arm.label)), *cells, num(a.output_tok_s.estimate, ",.1f"))
        return t

    title = f"{level.label} · p50 and p99 · TPOT, TTFT in ms, E2E in s"
    return FittedTable(build, (arm.label for arm in report.arms), title)


def ab_level_table(report: Any, level: Any) -> FittedTable:
    """One load: a row per candidate with the TPOT speedup over the baseline, its verdict, and acceptance."""
    margin = (report.margin or {}).get(HEADLINE.name)
    against = f" · margin {margin_pct(margin)}" if margin is not None else ""
    names = {c.name for c in report.candidates}
    candidates = [arm for arm in report.arms if arm.name in names]

    def build(short: Any) -> Table:
        t = _table()
        for col, justify in (("candidate", "left"), ("speedup", "right"), ("verdict", "left"), ("acc.len", "right")):
            t.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for arm in candidates:
            a = level.arm(arm.name)
            if a is None:
                t.add_row(escape(short(arm.label)), MISSING, "[yellow]not run[/]", MISSING)
                continue
            t.add_row(escape(short(arm.label)), *_verdict_cells(level.comparison(arm.name)), _acceptance_cell(a))
        return t

    return FittedTable(build, (arm.label for arm in candidates), f"{level.label} · TPOT speedup, 95% interval{against}")


def _verdict_cells(comp: Any) -> tuple[str, str]:
    """A candidate's TPOT speedup with its interval, and its answer (short, coloured), from its comparison."""
    if comp is None:
        return MISSING, MISSING
    tp = comp.metric(HEADLINE.name)
    # escaped: rich read "[no interval]" as a markup tag and printed nothing in its place
    speed = MISSING if tp is None else escape(f"{speedup(tp.speedup)} {speedup_range(tp.speedup_low, tp.speedup_high)}")
    answer = decision_of(tp) if tp is not None and comp.gate == "ok" else comp.verdict
    style = STYLES.get(answer, "yellow" if comp.gate != "ok" else "")
    text = escape(SHORT.get(answer, answer) if comp.gate == "ok" else comp.gate)
    return speed, f"[{style}]{text}[/]" if style else text


def _acceptance_cell(a: Any) -> str:
    acc = a.acceptance
    if acc is None:
        return MISSING
    if not acc.active:
        return "[yellow]no drafts[/]"
    # a draw's acceptance, never shown as a measured one
    return f"[yellow]{num(acc.acceptance_length)} forced[/]" if acc.provenance == FORCED else num(acc.acceptance_length)


def ab_renderable(report: Any, out_dir: Path | None = None) -> Group:
    """Verdict lines first (bold), then a table per load, memory/cost notes, then warnings and what is missing."""
    s = report.setup
    temp = "not recorded" if s.temperature is None else f"{s.temperature:g}"
    parts: list[Any] = [
        Text.from_markup(
            f"[bold]speculab A/B[/] {escape(report.title)} · workload {escape(s.workload_name)} · {s.prompts} prompts"
            + ("" if s.paired else f" (A) vs {s.prompts_candidate} (B) · unpaired")
            + f" · temperature {temp} · {s.repeats} repeat{'s' if s.repeats != 1 else ''}"
        )
    ]
    # why acceptance is not the user's traffic's, before anything that rests on it
    said_first = report.acceptance_validity
    parts.extend(Text(line, style="bold yellow") for line in warning_lines(said_first))
    rec = recommendation_lines(report, str(out_dir) if out_dir is not None else "DIR")  # what to ship, first
    parts.extend(Text(line, style="bold" if i == 0 else "") for i, line in enumerate(rec))
    parts.extend(Text(line) for line in slo_capacity_lines(report))  # each arm's SLO edge
    if len(report.candidates) > 1:  # which one pays, per load (one candidate: its verdict line says it)
        parts.extend(Text(line, style="bold") for line in best_lines(report))
        parts.append(candidates_table(report))
    for c in report.candidates:
        parts.append(Text(verdict_line(report, c), style="bold"))
    for lv in report.levels:
        parts.append(Text(""))
        parts.append(latency_table(report, lv))
        if report.candidates:
            parts.append(ab_level_table(report, lv))
        failed = [(x.label, lv.arm(x.name)) for x in report.arms if lv.arm(x.name) is not None]
        failed = [f"{escape(label)} {a.error} of {a.sent}" for label, a in failed if a.error]
        if failed:
            parts.append(Text.from_markup(f"  [yellow]failed requests:[/] {'; '.join(failed)}"))
        parts.extend(Text.from_markup(line) for line in unit_lines(report, lv))
        parts.extend(Text(line) for line in guardrail_lines(report, lv))
        parts.extend(Text(line) for line in predicted_lines(report, lv))
        parts.extend(Text(line) for line in per_request_lines(report, lv))
    if report.k_choices:
        parts.append(Text(""))
        parts.extend(Text(line) for line in k_choice_lines(report))
    if energy_measured(report):  # the terminal stays quiet without power samples; report.html says "not measured"
        parts.extend(Text(line) for line in energy_lines(report))
    if report.warnings or report.missing:
        parts.append(Text(""))
    for w in warning_lines([w for w in report.warnings if w not in said_first]):
        parts.append(Text.from_markup(f"[yellow]warning:[/] {escape(w)}"))
    for m in report.missing:
        parts.append(Text.from_markup(f"[yellow]missing:[/] {escape(warning_text(m))}"))
    if out_dir is not None:
        parts.append(Text(f"report: {out_dir / 'report.html'}  ·  every number: {out_dir / SUMMARY_FILE}"))
    return Group(*parts)


def candidates_table(report: Any) -> FittedTable:
    """Load × candidate: each candidate's speedup on the deciding metric (TPOT by default), and the best per load."""

    def build(short: Any) -> Table:
        t = _table()
        t.add_column("load", no_wrap=True)
        for c in report.candidates:
            t.add_column(escape(short(c.label)), justify="right", no_wrap=True)
        for lv in report.levels:
            t.add_row(escape(lv.label), *(_ranking_cell(lv, c.name) for c in report.candidates))
        return t

    title = f"{_deciding(report)} speedup by load and candidate (* best, = tied with it)"
    return FittedTable(build, (c.label for c in report.candidates), title)


def _ranking_cell(lv: Any, candidate: str) -> str:
    r = next((x for x in lv.ranking if x.candidate == candidate), None)
    if r is None or r.gate != "ok":
        return MISSING if r is None else f"[yellow]{escape(r.gate)}[/]"
    mark = "*" if candidate == lv.best else ("=" if candidate in lv.tied_with_best else " ")
    style = STYLES.get(r.decision or r.verdict, "")
    cell = f"{r.speedup:.2f}×{mark}"
    return f"[{style}]{cell}[/]" if style else cell


def _deciding(report: Any) -> str:
    """The metric the ranking is by: the recommendation's deciding metric (TPOT unless `decide_on:` says)."""
    rec = report.recommendation
    return METRIC_LABELS.get(rec.decide_on, rec.decide_on) if rec is not None else HEADLINE.label


def k_choice_lines(report: Any) -> list[str]:
    """k from data: per method and load, the what-if's best k next to the k values measured."""
    labels = {a.name: a.label for a in report.arms}
    out = []
    for kc in report.k_choices:
        measured = ", ".join(
            f"k={m.k} {m.speedup:.2f}×"
            + (f" [{m.speedup_low:.2f}–{m.speedup_high:.2f}]" if m.speedup_low == m.speedup_low else "")
            + (f" (predicted {m.predicted:.2f}×)" if m.predicted is not None else "")
            for m in kc.measured
        )
        best = f"; best measured k={kc.measured_best_k}" if kc.measured_best_k is not None else ""
        if kc.not_users:  # the speeds measured stand; no k is chosen from an acceptance not the user's
            out.append(f"k for {kc.method} at {kc.level_label}: measured {measured}; no k chosen: {NOT_USERS_K}")
            continue
        out.append(
            f"k for {kc.method} at {kc.level_label}: predicted best k={kc.predicted_best_k} "
            f"({kc.predicted_best_speedup:.2f}×, from {labels.get(kc.source, kc.source)}'s acceptance); "
            f"measured {measured}{best}"
        )
    return out


def unit_lines(report: Any, level: Any) -> list[str]:
    """Under a load's table (markup): what the verdicts counted when prompts ran together, once per load, and why a
    candidate got "too few pairs"."""
    lines = []
    judged = [(c, c.metric(HEADLINE.name)) for c in level.comparisons if c.gate == "ok"]
    judged = [(c, tp) for c, tp in judged if tp is not None]
    if unpaired := next((samples_phrase(tp) for _, tp in judged if tp.unit == "unpaired"), ""):
        lines.append(f"  {escape(unpaired)}: two samples, no prompt compared with itself (the notes say why)")
    grouped = [(c, tp) for c, tp in judged if tp.group_size > 1 and tp.unit != "unpaired"]
    if grouped:
        tp = grouped[0][1]
        lines.append(
            f"  verdict units: {tp.n_units} groups of {tp.group_size} prompts sent together ({tp.n_pairs} pairs); "
            "requests in flight at once share their conditions, so they are not independent"
        )
    labels = {a.name: a.label for a in report.arms}
    said = set()
    for c in level.comparisons:
        if c.gate == "ok" and c.decision and (line := launch_phrase(c)) not in said:
            said.add(line)
            lines.append(f"  {escape(line)}")
    lines.extend(_pairs_lines(level, labels))
    for c, tp in judged:
        if tp.verdict == "not enough paired data" and tp.note and (tp.group_size > 1 or tp.unit == "unpaired"):
            label = escape(labels.get(c.candidate, c.candidate))
            few = "too few requests" if tp.unit == "unpaired" else "too few pairs"
            lines.append(f"  [yellow]{few}:[/] {label}: {escape(note_text(tp))}")
    breakdowns = []
    for c in level.comparisons:
        label = escape(labels.get(c.candidate, c.candidate))
        if c.diverged:
            lines.append(
                f"  [yellow]diverged:[/] {label}: {c.diverged} conversation turns not paired (the arms' earlier "
                "answers differed, so these turns sent different contexts)"
            )
        for name, rows in (("by turn", c.by_turn), ("by prompt length", c.by_prompt_length)):
            if rows and c.gate == "ok":
                cells = " · ".join(f"{escape(r.metric)} {_speedup_cell(r)}" for r in rows)
                breakdowns.append(f"  {label} TPOT {name}: {cells}")
    return lines + ([EXPLORATORY, *breakdowns] if breakdowns else [])


# A breakdown's subsets are each judged at 95 %: with several subsets one can land outside by chance, so a subset's
# interval beside the overall answer is a lead to follow, not a second verdict (the HTML tables say the same). Said
# once per load, above its breakdowns.
EXPLORATORY = "  breakdowns (exploratory: each subset at 95%, not adjusted for multiplicity):"


def _pairs_lines(level: Any, labels: dict[str, str]) -> list[str]:
    """Why TPOT counted fewer pairs than E2E, once per load when every candidate has the same counts."""
    said: dict[str, list[str]] = {}
    for c in level.comparisons:
        if c.gate == "ok" and (line := pairs_phrase(c)):
            said.setdefault(line, []).append(labels.get(c.candidate, c.candidate))
    if len(said) == 1 and sum(map(len, said.values())) == len(level.comparisons):
        return [f"  {escape(line)}" for line in said]
    return [f"  {escape(', '.join(names))}: {escape(line)}" for line, names in said.items()]


def _speedup_cell(r: Any) -> str:
    if r.verdict == "not enough paired data":
        return f"– ({r.n_pairs} pairs)"
    return f"{r.speedup:.2f}× [{r.speedup_low:.2f}–{r.speedup_high:.2f}]"


def per_request_lines(report: Any, level: Any) -> list[str]:
    """Under a load's table: acceptance from the responses' own fields (token- vs request-weighted length) and the
    prefix-cache hit rates, where the engine reports them."""
    lines = []
    for arm in report.arms:
        a = level.arm(arm.name)
        ra = a.request_acceptance if a is not None else None
        if ra is None or ra.overall.drafting_requests == 0:
            continue
        w = ra.overall
        rw = w.length_request_weighted
        rw_txt = interval(rw, ".2f", floor=1.0) if rw is not None else MISSING  # a length is >= 1
        what = "acc.len" if w.length_kind.startswith("acceptance length") else "tokens/step"
        tw = w.length_token_weighted_interval
        tw_txt = interval(tw, ".2f", floor=1.0) if tw is not None else num(w.length_token_weighted)
        lines.append(
            f"  {arm.label} per request: {what} {tw_txt} token-weighted, {rw_txt} "
            f"request-weighted ({w.drafting_requests} requests)"
        )
    for arm in report.arms:  # the canon per draft position (docs/metrics.md), where the engine reports positions
        a = level.arm(arm.name)
        if a is not None and a.acceptance_positions is not None:
            lines.append(f"  {escape(arm.label)} {escape(positions_phrase(a.acceptance_positions))}")
    rates = [(arm.label, level.arm(arm.name).prefix_cache) for arm in report.arms if level.arm(arm.name)]
    rates = [(label, pc) for label, pc in rates if pc is not None and pc.hit_rate is not None]
    if rates:
        lines.append("  prefix-cache hit rate: " + ", ".join(f"{label} {pc.hit_rate:.0%}" for label, pc in rates))
    resets = [(arm.label, cache_reset_phrase(a.cache_resets)) for arm in report.arms if (a := level.arm(arm.name))]
    if any(said for _, said in resets):
        lines.append("  caches: " + ", ".join(f"{label} {said}" for label, said in resets if said))
    return lines


def print_ab_report(console: Console, report: Any, out_dir: Path | None = None) -> None:
    console.print(ab_renderable(report, out_dir))


def print_change(console: Console, change: Any) -> None:
    """One candidate's single-change check (a `ChangeCheck`): the verdict, the command difference, the note."""
    status = {True: "[green]only speculation differs[/]", False: "[red]more than speculation differs[/]"}.get(
        change.verified, "[yellow]single change not verified[/]"
    )
    console.print(f"[bold]{escape(change.candidate)}[/] vs baseline: {status}")
    for line in change.diff_lines:
        console.print(f"    {escape(line)}", highlight=False)
    if change.note is not None:
        console.print(f"    [dim]{escape(change_note_text(change.note))}[/]", highlight=False)
