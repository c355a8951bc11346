"""The sentences made from the verdict: the hyperfine-style line per candidate, the best per load, the phrases the
views share. Made here, when rendering, from the model's numbers and decisions (formatted by `formatting`)."""

from __future__ import annotations

import math
from typing import Any

from speculab.harness.verdict.build import prefix_cache_phrase
from speculab.harness.verdict.model import (
    CandidateReport,
    CrossoverStatus,
    Interval,
    LevelComparison,
    Report,
    Verdict,
)
from speculab.report.formatting import relative_change, signed_bytes, speedup, speedup_range

# ---------------------------------------------------------------------------------------------------------------
# The verdict line.
# ---------------------------------------------------------------------------------------------------------------


def level_phrase(comp: LevelComparison, label: str) -> str:
    """'TPOT 1.84× faster [1.71–1.97] at concurrency 1' or the gate's reason."""
    if comp.gate == "not active":
        return f"speculation not active at {label}"
    if comp.gate != "ok":
        return f"no verdict at {label} ({comp.gate})"
    tp = comp.metric("tpot_s")
    if tp is None:
        return f"no TPOT at {label}"
    rng = speedup_range(tp.speedup_low, tp.speedup_high)
    if tp.verdict == Verdict.FASTER.value:
        return f"{speedup(tp.speedup)} faster {rng} at {label}"
    if tp.verdict == Verdict.SLOWER.value:
        return f"{speedup(tp.speedup)} (slower) {rng} at {label}"
    if tp.verdict == Verdict.INSUFFICIENT.value:
        return f"not enough paired data at {label}"
    mdc = tp.min_detectable_change
    could = f", could have detected ±{mdc:.0%}" if math.isfinite(mdc) else ""
    return f"no detectable difference at {label} ({speedup(tp.speedup)} {rng}{could})"


def verdict_line(report: Report, cand: CandidateReport) -> str:
    """The hyperfine-style one-liner of one candidate; every part names its load, interval or source."""
    levels, crossover, acc, correctness = report.levels, cand.crossover, cand.acceptance, cand.correctness
    shown = [lv for lv in levels if {"low", "operating"} & set(lv.roles)] or list(levels[:2])
    phrases = []
    for lv in shown:
        comp = lv.comparison(cand.name)
        if comp is not None:
            phrases.append(level_phrase(comp, lv.label))
    head = "; ".join(phrases) if phrases else "no load level ran"
    numeric = bool(phrases) and (phrases[0][:1].isdigit() or phrases[0].startswith("no detectable"))
    parts = [("TPOT " if numeric else "") + head]
    any_faster = any(
        (c := lv.comparison(cand.name)) is not None and c.gate == "ok" and c.verdict == Verdict.FASTER.value
        for lv in levels
    )
    if crossover is not None and any_faster:
        unit = "" if crossover.axis == "concurrency" else " req/s"
        if crossover.status == CrossoverStatus.CROSSES.value and crossover.load is not None:
            lo = ("≤" if crossover.low_censored else "") + f"{crossover.low:.3g}"
            hi = ("≥" if crossover.high_censored else "") + f"{crossover.high:.3g}"
            parts.append(f"crossover ≈ {crossover.load:.3g}{unit} [{lo}–{hi}]")
        else:
            parts.append(f"crossover: {crossover.status}")
    if acc is not None:
        if acc.active and acc.acceptance_length is not None:
            parts.append(f"acceptance length {acc.acceptance_length:.2f} ({acc.source})")
        elif not acc.active:
            parts.append(f"no drafts ({acc.source})")
    else:
        parts.append("acceptance unknown (engine reports none)")
    op = next((lv for lv in levels if "operating" in lv.roles), None)
    comp = op.comparison(cand.name) if op is not None else None
    if comp is not None and comp.memory_delta_bytes is not None:
        parts.append(f"memory {signed_bytes(comp.memory_delta_bytes)} ({comp.memory_kind})")
    if comp is not None and comp.cost_ratio is not None and math.isfinite(comp.cost_ratio.estimate):
        parts.append(f"$/1M tokens {ratio_phrase(comp.cost_ratio)} at the operating point")
    elif comp is not None and comp.throughput_ratio is not None and math.isfinite(comp.throughput_ratio.estimate):
        parts.append(f"output tok/s {ratio_phrase(comp.throughput_ratio)} at the operating point")
    if correctness is not None:
        parts.append(f"correctness: {correctness.verdict}")
    moved = next(
        ((lv, c.prefix_cache) for lv in levels if (c := lv.comparison(cand.name)) and c.prefix_cache
         and c.prefix_cache.beyond_noise),
        None,
    )  # fmt: skip
    if moved is not None:
        parts.append(f"at {moved[0].label}, {prefix_cache_phrase(moved[1])}")
    return f"{cand.label}: " + "; ".join(parts)


def ratio_phrase(iv: Interval) -> str:
    """A repeat-based ratio as a change with its interval: '−38% [−45%…−30%]', or why there is no verdict."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{relative_change(iv.estimate)} ({iv.n} paired repeat{'s' if iv.n != 1 else ''}, no interval)"
    rng = f"[{relative_change(iv.low)}…{relative_change(iv.high)}]"
    if iv.low <= 1.0 <= iv.high:
        return f"no detectable change ({relative_change(iv.estimate)} {rng})"
    return f"{relative_change(iv.estimate)} {rng}"


def best_lines(report: Any) -> list[str]:
    """One line per load: which candidate pays there ("at concurrency 1: ngram k=4, 2.10× [1.80–2.40]"), or that
    none does; with ties the paired test cannot break, the tied candidates are named."""
    out = []
    for lv in report.levels:
        roles = f" (the {' and '.join(lv.roles)} load)" if lv.roles else ""
        if lv.best is None:
            gated = [r for r in lv.ranking if r.gate != "ok"]
            why = "no candidate is detectably faster than the baseline"
            if gated and len(gated) == len(lv.ranking):
                why = "no verdict for any candidate (see the table)"
            out.append(f"at {lv.label}{roles}: none pays ({why})")
            continue
        r = next(x for x in lv.ranking if x.candidate == lv.best)
        text = f"at {lv.label}{roles}: {r.label}, {r.speedup:.2f}× [{r.speedup_low:.2f}–{r.speedup_high:.2f}]"
        if lv.tied_with_best:
            labels = {x.candidate: x.label for x in lv.ranking}
            text += f"; cannot be told apart from {', '.join(labels[t] for t in lv.tied_with_best)}"
        out.append(text)
    return out
