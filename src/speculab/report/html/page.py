"""report.html: one self-contained file (inline CSS, inline SVG plots, no external URLs) from a `Report`.

`view(report)` turns the report into plain strings (every number formatted here, with its unit); the Jinja2
template only lays them out (no arithmetic) with autoescape on: model output is untrusted text and is escaped
everywhere. Only the SVG plots we draw ourselves are marked safe.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.verdict.model import (
    E2E,
    FORCED,
    METRIC_LABELS,
    TPOT,
    TTFT,
    CandidateReport,
    LevelReport,
    Report,
    SearchView,
)
from speculab.report.energy import NOT_MEASURED, energy_measured, energy_rows
from speculab.report.formatting import (
    num,
)
from speculab.report.html import plots
from speculab.report.html.diagnosis import finding_card
from speculab.report.html.phases import phases_view
from speculab.report.html.sections import (
    CLASSES,
    arm_labels,
    arm_rows,
    comparison_rows,
    correctness_rows,
    plan_rows,
    request_acceptance_rows,
    setup_rows,
    what_if_rows,
)
from speculab.report.phrases import (
    best_lines,
    guardrail_lines,
    left_out_text,
    positions_phrase,
    recommendation_lines,
    verdict_line,
    warning_lines,
    warning_text,
)
from speculab.report.recommendation import predicted_lines, search_line
from speculab.report.shipped import RECOMMENDED_FLAGS
from speculab.report.slo_capacity import slo_capacity_rows, slo_text
from speculab.report.words import NOT_USERS_K

REPORT_FILE = "report.html"
# the plots across loads, as the template names them
CURVES = ("tpot_vs_load", "tput_vs_load", "speedup", "acceptance", "cost", "pareto", "search")


# --- the view -----------------------------------------------------------------------------------------------


def _ranking_view(report: Report) -> dict[str, Any] | None:
    """Load x candidate: TPOT speedups over the baseline, the best marked; None with a single candidate."""
    if len(report.candidates) < 2:
        return None
    rows = []
    for lv in report.levels:
        cells = []
        for c in report.candidates:
            r = next((x for x in lv.ranking if x.candidate == c.name), None)
            if r is None or r.gate != "ok":
                cells.append({"text": "–" if r is None else r.gate, "cls": "gated"})
                continue
            mark = " (best)" if c.name == lv.best else (" (tied with best)" if c.name in lv.tied_with_best else "")
            cls = CLASSES.get(r.decision or r.verdict, "")
            cells.append({"text": f"{r.speedup:.2f}× [{r.speedup_low:.2f}–{r.speedup_high:.2f}]{mark}", "cls": cls})
        rows.append({"load": lv.label, "cells": cells})
    return {"candidates": [c.label for c in report.candidates], "rows": rows}


# the figures a load's CDF panels show, in order (each a per-request series of `ArmLevel.series`)
_CDF_FIGURES = (TPOT, TTFT, E2E)


def _level_plots(report: Report, lv: LevelReport) -> dict[str, str]:
    labels = arm_labels(report)
    series = {labels[a.arm]: {f.name: getattr(a.series, f.name) for f in _CDF_FIGURES} for a in lv.arms}
    out = {}
    if any(s[TPOT.name] or s[TTFT.name] for s in series.values()):
        out["cdf"] = plots.cdf_panels(series, tuple((f.name, f.label) for f in _CDF_FIGURES))
    gaps = {labels[a.arm]: [g * 1e3 for g in a.series.chunk_gap_s] for a in lv.arms}
    tpc = {labels[a.arm]: a.series.tokens_per_chunk for a in lv.arms}
    if any(gaps.values()):
        out["hist"] = plots.histograms(gaps, tpc)
    mem_kind = "GPU memory" if any(x is not None for a in lv.arms for x in a.series.memory_gpu_bytes) else "RSS"
    mem = {
        labels[a.arm]: (
            a.series.memory_t_s,
            a.series.memory_gpu_bytes if mem_kind == "GPU memory" else a.series.memory_rss_bytes,
            a.series.memory_kv_usage,
        )
        for a in lv.arms
        if a.series.memory_t_s
    }
    # drawn only where something was read: samples whose every reading is missing (a URL whose process the tool
    # cannot see, an engine without a KV gauge: the mock, two-URL runs) drew two empty panels, 0.1-0.2 s of CPU each
    if any(x is not None for _, m, kv in mem.values() for x in (*m, *kv)):
        out["memory"] = plots.memory_over_time(mem, mem_kind)
    panels, kinds = {}, set()
    for comp in lv.comparisons:
        rel = comp.acceptance_speedup
        if rel is not None and rel.points:
            panels[labels.get(comp.candidate, comp.candidate)] = (
                [(x, y, cat) for _, cat, x, y in rel.points],
                rel.slope,
                rel.intercept,
            )
            kinds.add(rel.length_kind.split(":")[0])
    if panels:
        out["acceptance_speedup"] = plots.acceptance_vs_speedup(panels, " / ".join(sorted(kinds)) + " (per prompt)")
    return out


def _curve_plots(report: Report) -> dict[str, str]:
    """TPOT and throughput vs load (bands), speedup vs load with crossover, cost bars: over one axis."""
    labels = arm_labels(report)
    out: dict[str, str] = {}
    kinds = [lv.kind for lv in report.levels]
    if not kinds:
        return out
    axis = next((c.crossover.axis for c in report.candidates if c.crossover), max(set(kinds), key=kinds.count))
    lvs = sorted((lv for lv in report.levels if lv.kind == axis), key=lambda lv: lv.value)
    xlabel = {"concurrency": "concurrency", "trace": "trace speed (× the recorded arrival rate)"}.get(
        axis, "offered load (req/s)"
    )
    log_x = axis in ("concurrency", "trace") and len(lvs) > 2
    if len(lvs) >= 2:
        tpot, tput = {}, {}
        for arm in report.arms:
            est, lo, hi, te, tl, th = [], [], [], [], [], []
            for lv in lvs:
                a = lv.arm(arm.name)
                d = a.distributions[TPOT.name] if a else None
                if d is None or d.n == 0:
                    est.append(math.nan), lo.append(math.nan), hi.append(math.nan)
                else:
                    half = 1.96 * d.std / math.sqrt(d.n) if d.n > 1 else math.nan
                    est.append(d.mean * 1e3), lo.append((d.mean - half) * 1e3), hi.append((d.mean + half) * 1e3)
                iv = a.output_tok_s if a else None
                te.append(iv.estimate if iv else math.nan)
                tl.append(max(0.0, iv.low) if iv else math.nan)  # a rate's band stops at 0
                th.append(iv.high if iv else math.nan)
            tpot[arm.label] = (est, lo, hi)
            tput[arm.label] = (te, tl, th)
        loads = [lv.value for lv in lvs]
        out["tpot_vs_load"] = plots.band_vs_load(loads, tpot, xlabel=xlabel, ylabel="mean TPOT (ms)", log_x=log_x)
        out["tput_vs_load"] = plots.band_vs_load(loads, tput, xlabel=xlabel, ylabel="output tok/s", log_x=log_x)
    if report.search is not None:
        out["search"] = _search_plot(report.search, xlabel)
    curves, crosses = {}, {}
    for c in report.candidates:
        x = c.crossover
        if x is None:
            continue
        curves[c.label] = (x.loads, x.speedups, x.lows, x.highs)
        crosses[c.label] = (x.load, x.low, x.high)
    if curves:
        out["speedup"] = plots.speedup_vs_load(curves, crosses, xlabel=xlabel, log_x=log_x)
    acc = {c.label: c.acceptance.per_position for c in report.candidates if c.acceptance and c.acceptance.per_position}
    if acc:
        out["acceptance"] = plots.acceptance_bars(acc)
    priced = [a for a in report.arms if a.usd_per_hour is not None]
    if priced and report.levels:
        cost = {}
        for arm in priced:
            e, lo, hi = [], [], []
            for lv in report.levels:
                a = lv.arm(arm.name)
                iv = a.usd_per_mtok if a else None
                e.append(iv.estimate if iv else math.nan)
                lo.append(iv.low if iv else math.nan)
                hi.append(iv.high if iv else math.nan)
            cost[labels[arm.name]] = (e, lo, hi)
        out["cost"] = plots.cost_bars([lv.label for lv in report.levels], cost)
    return out


def _search_plot(search: SearchView, xlabel: str) -> str:
    """The search's probes (speedup and interval), the monotone fit and the crossover band."""

    def x(v: float | None) -> float | None:
        return math.exp(v) if v is not None and math.isfinite(v) else None

    points = [
        (p.load, math.exp(p.effect), math.exp(p.effect_low), math.exp(p.effect_high), x(p.fitted))
        for p in search.points
    ]
    c = search.crossover
    label = f"{METRIC_LABELS.get(search.metric, search.metric)} speedup (×, > 1 = faster)"
    return plots.search_effect(
        points, (c.estimate, c.low, c.high), xlabel=xlabel, ylabel=label, log_x=search.kind == "concurrency"
    )


def _slo_capacity_view(report: Report) -> dict[str, Any] | None:
    """The short table of each arm's highest load within its SLO; None without SLOs."""
    rows = slo_capacity_rows(report)
    if not rows or report.slo_capacity is None:
        return None
    return {"slo": slo_text(next(iter(report.slo_capacity.values()))), "rows": rows}


def _recommendation_view(report: Report, shipped: str | None, run_dir: Path | None) -> dict[str, Any] | None:
    """The first block: the same sentences as the terminal's (an unfinished run's `--resume` names `run_dir`), and
    the flags to ship when they were written (the Pareto picture is with the other curves across loads: the verdict
    stays on the first screen)."""
    if report.recommendation is None:
        return None
    lines = recommendation_lines(report, "DIR" if run_dir is None else str(run_dir))
    return {
        "headline": lines[0].removeprefix("recommendation: ") if lines else "",
        "lines": [ln.strip() for ln in lines[1:]],
        "shipped": shipped,
    }


def _pareto_plot(report: Report) -> str:
    """Throughput per GPU against per-user speed per arm and load, the shipped point at each load ringed; "" when
    there is no recommendation or nothing finite to draw."""
    rec = report.recommendation
    if rec is None:
        return ""
    arms: dict[str, list[tuple[float, float, float, float, str, bool, bool]]] = {}
    for arm in report.arms:  # the baseline first: its loads are labelled
        for p in sorted((p for p in rec.pareto if p.arm == arm.name), key=lambda p: p.load):
            arms.setdefault(p.label, []).append(
                (
                    p.per_user_tok_s,
                    p.tok_s_per_gpu,
                    p.tok_s_per_gpu_low,
                    p.tok_s_per_gpu_high,
                    f"{p.load:g}" if rec.axis == "concurrency" else f"{p.load:g}/s",
                    p.recommended,
                    p.on_frontier,
                )
            )
    if not any(math.isfinite(x[0]) and math.isfinite(x[1]) for pts in arms.values() for x in pts):
        return ""
    name = "concurrency" if rec.axis == "concurrency" else "offered load (req/s)"
    return plots.pareto(arms, load_name=name)


def view(report: Report, shipped: str | None = None, run_dir: Path | None = None) -> dict[str, Any]:
    """Everything the template shows, as strings (and the SVG plots as trusted markup); `shipped`: the text of
    recommended-flags.txt of a run saved without `Report.shipped` (the model's wins); `run_dir`: the run's
    directory, named in `speculab run --resume` (None: the placeholder DIR)."""
    shipped = report.shipped.flags_file if report.shipped is not None else shipped
    levels = [_level_view(report, lv) for lv in report.levels]  # drawn first: the plots' order is the old one
    cp = {**_curve_plots(report), "pareto": _pareto_plot(report)}
    return {
        "title": report.title,
        "recommendation": _recommendation_view(report, shipped, run_dir),
        "verdicts": [verdict_line(report, c) for c in report.candidates],
        "best_lines": best_lines(report) if len(report.candidates) > 1 else [],
        "ranking": _ranking_view(report),
        "k_choices": _k_choice_views(report),
        # why acceptance is not the user's traffic's: said first, above the recommendation, and not again below
        "validity": warning_lines(report.acceptance_validity),
        "warnings": warning_lines([w for w in report.warnings if w not in report.acceptance_validity]),
        "missing": [warning_text(m) for m in report.missing],
        "interrupted": report.interrupted,
        "setup": setup_rows(report),
        "levels": levels,
        "curves": {k: Markup(cp.get(k, "")) for k in CURVES},
        "acceptance": [_acceptance_view(c) for c in report.candidates],
        "request_acceptance": request_acceptance_rows(report),
        "crossovers": [_crossover_view(c) for c in report.candidates if c.crossover is not None],
        "search_line": search_line(report.search, arm_labels(report)) if report.search is not None else "",
        "phases": _phases(report),
        "slo_capacity": _slo_capacity_view(report),
        "correctness": correctness_rows(report),
        "what_if": what_if_rows(report),
        "plans": plan_rows(report),
        "energy": {"measured": energy_measured(report), "rows": energy_rows(report), "line": NOT_MEASURED},
        "diagnosis": _diagnosis_view(report.diagnosis) if report.diagnosis else None,
        "options": {
            "max_error_rate": f"{report.options.get('max_error_rate', math.nan):.0%}",
            "min_load": f"{report.options.get('min_load_fraction', math.nan):.0%}",
            "near_tie": f"{report.options.get('near_tie_logprob_gap', math.nan):g} nats",
            "resamples": f"{report.options.get('n_resamples', '')}",
            "seed": f"{report.options.get('seed', '')}",
        },
    }


def _phases(report: Report) -> dict[str, Any] | None:
    """The phased load's section (html.phases), its plot as trusted markup."""
    v = phases_view(report)
    return {**v, "plot": Markup(v["plot"])} if v is not None else None


def _level_view(report: Report, lv: LevelReport) -> dict[str, Any]:
    lp = _level_plots(report, lv)
    return {
        "label": lv.label,
        "roles": ", ".join(lv.roles),
        "arms": arm_rows(report, lv),
        "comparisons": comparison_rows(report, lv),
        "guardrails": [ln.strip() for ln in (*guardrail_lines(report, lv), *predicted_lines(report, lv))],
        "plots": {k: Markup(lp.get(k, "")) for k in ("cdf", "hist", "memory", "acceptance_speedup")},
    }


def _acceptance_view(c: CandidateReport) -> dict[str, str]:
    a = c.acceptance
    if a is None:
        return {
            "label": c.label,
            "text": "the engine reported no acceptance (speculation unconfirmed)",
            "source": "",
            "positions": "",
            "canon": "",
        }
    text = (
        f"{num(a.acceptance_length)} tokens per verification step (bonus token included), acceptance rate "
        f"{num(a.acceptance_rate, '.1%')}, {num(a.drafts, ',.0f')} drafts over {a.repeats} repeat(s)"
        if a.active
        else "no drafts: speculation was not active"
    )
    if a.provenance == FORCED:  # a draw's numbers, never reported as measured
        text = f"forced, not measured: {text}"
    return {
        "label": c.label,
        "text": text,
        "source": a.source
        + (" (approximate)" if a.approximate else "")
        + (" (forced)" if a.provenance == FORCED else ""),
        "positions": ", ".join(f"{p:.2f}" for p in a.per_position) or "–",
        "canon": positions_phrase(c.acceptance_positions) if c.acceptance_positions is not None else "",
    }


def _crossover_view(c: CandidateReport) -> dict[str, Any]:
    x = c.crossover
    assert x is not None
    unit = {"concurrency": "", "trace": "× trace speed"}.get(x.axis, " req/s")
    if x.load is not None:
        lo = ("≤ " if x.low_censored else "") + f"{x.low:.3g}"
        hi = ("≥ " if x.high_censored else "") + f"{x.high:.3g}"
        text = f"≈ {x.load:.3g}{unit} [{lo} – {hi}] ({x.method}, {x.scale} interpolation)"
    else:
        text = x.status
    return {"label": c.label, "text": text, "excluded": [left_out_text(e) for e in x.excluded]}


def _k_choice_views(report: Report) -> list[dict[str, Any]]:
    labels = arm_labels(report)
    return [
        {
            "method": kc.method,
            "level": kc.level_label,
            # no k chosen from an acceptance not the user's: the prediction rests on it too
            "predicted": f"none: {NOT_USERS_K}"
            if kc.not_users
            else f"{kc.predicted_best_k} ({kc.predicted_best_speedup:.2f}×)",
            "source": labels.get(kc.source, kc.source),
            "measured_best": kc.measured_best_k,
            "rows": [
                {
                    "k": m.k,
                    "measured": f"{m.speedup:.2f}× [{m.speedup_low:.2f}–{m.speedup_high:.2f}]",
                    "predicted": f"{m.predicted:.2f}×" if m.predicted is not None else "–",
                }
                for m in kc.measured
            ],
        }
        for kc in report.k_choices
    ]


def _diagnosis_view(d: Any) -> dict[str, Any]:
    """The diagnose section (filled by `speculab diagnose`): findings if it has them, else its keys as rows."""
    findings = []
    for f in d.get("findings", []) if isinstance(d, dict) else []:
        if isinstance(f, dict):  # a diagnosis.json /2 finding is a kind and numbers: worded like diagnosis.html's
            findings.append(finding_card(f) if "fields" in f else {k: str(v) for k, v in f.items()})
    rows = [(str(k), str(v)) for k, v in d.items() if k != "findings" and not isinstance(v, (dict, list))]
    return {"findings": findings, "rows": rows}


TEMPLATES = jinja2.Environment(
    loader=jinja2.FunctionLoader(
        lambda name: resources.files("speculab.report.html").joinpath("templates", name).read_text()
    ),
    autoescape=True,  # model output is untrusted text; only our own SVG is Markup
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_html(report: Report, shipped: str | None = None, run_dir: Path | None = None) -> str:
    return TEMPLATES.get_template("report.html.j2").render(v=view(report, shipped, run_dir))


def write_html(out_dir: Path, report: Report, run_dir: Path | None = None) -> Path:
    """Write out_dir/report.html atomically; return its path. The flags to ship are the model's (`Report.shipped`);
    a report without them shows recommended-flags.txt when it lies beside (a run re-rendered by `speculab report`,
    whose inputs carry no configuration to ship, and runs saved before the model carried it). `run_dir`: the saved
    run the page describes (the one to resume), when known."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / REPORT_FILE
    flags = out_dir / RECOMMENDED_FLAGS
    saved = report.shipped is None and flags.is_file()
    shipped = flags.read_text(encoding="utf-8", errors="replace") if saved else None
    write_atomic(path, render_html(report, shipped, run_dir))
    return path
