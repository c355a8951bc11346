"""The hyperfine-style verdict line and the phrases the views share (numbers formatted by `formatting`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from speculab.harness.analysis.crossover import CrossoverStatus
from speculab.harness.analysis.metrics import error_gate
from speculab.harness.analysis.paired import Verdict
from speculab.harness.analysis.prefix_cache import HitRateChange
from speculab.harness.analysis.stats import Interval
from speculab.harness.results.ab_inputs import ArmInfo
from speculab.report.correctness import CorrectnessComparison
from speculab.report.formatting import relative_change, signed_bytes, speedup, speedup_range
from speculab.report.schema import AcceptanceView, CrossoverView, LevelComparison, LevelReport, Report

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


def verdict_line(cand: ArmInfo, levels: Sequence[LevelReport], crossover: CrossoverView | None,
                 acc: AcceptanceView | None, correctness: CorrectnessComparison | None) -> str:  # fmt: skip
    """The hyperfine-style one-liner; every part names its load, interval or source."""
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


def prefix_cache_phrase(change: HitRateChange) -> str:
    """The warning a reader must see when the arms' prefix-cache hit rates differ beyond noise."""
    return (
        f"speculation changed the prefix-cache hit rate from {change.baseline_hit_rate:.0%} to "
        f"{change.candidate_hit_rate:.0%}: TTFT differences may come from that"
    )


def ratio_phrase(iv: Interval) -> str:
    """A repeat-based ratio as a change with its interval: '−38% [−45%…−30%]', or why there is no verdict."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{relative_change(iv.estimate)} ({iv.n} paired repeat{'s' if iv.n != 1 else ''}, no interval)"
    rng = f"[{relative_change(iv.low)}…{relative_change(iv.high)}]"
    if iv.low <= 1.0 <= iv.high:
        return f"no detectable change ({relative_change(iv.estimate)} {rng})"
    return f"{relative_change(iv.estimate)} {rng}"


def report_error_gate(report: Report, max_error_rate: float) -> str | None:
    """The first arm and load that fail the error gate, as one line for the command's exit; None when all pass."""
    for lv in report.levels:
        for a in lv.arms:
            why = error_gate(a.error, a.sent, a.errors_by_category, max_error_rate)
            if why is not None:
                label = next((x.label for x in report.arms if x.name == a.arm), a.arm)
                return f"{label} at {lv.label}: {why}"
    return None
