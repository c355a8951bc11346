"""The energy section's words and rows (HTML and terminal): each arm's joules per output token and output tokens
per joule at each load, its energy cost where a price per kWh was given, and each candidate's paired J/token change;
one line when no power was sampled. Nothing here computes: every number is a field of the model
(`ArmLevel.energy`, `LevelComparison.energy_ratio`)."""

from __future__ import annotations

from speculab.harness.verdict.model import Report
from speculab.report.formatting import MISSING, interval, money_interval, num, relative_change

NOT_MEASURED = "not measured (no NVML device)"


def energy_measured(report: Report) -> bool:
    """True when any arm at any load has power samples."""
    return any(a.energy is not None for lv in report.levels for a in lv.arms)


def energy_rows(report: Report) -> list[dict[str, str]]:
    """One row per load and arm: power, J per output token, tokens per J, energy $ per 1M tokens, vs the baseline."""
    labels = {a.name: a.label for a in report.arms}
    rows = []
    for lv in report.levels:
        for a in lv.arms:
            e, comp = a.energy, lv.comparison(a.arm)
            ratio = comp.energy_ratio if comp is not None else None
            rows.append(
                {
                    "load": lv.label,
                    "arm": labels.get(a.arm, a.arm),
                    "power": num(e.mean_power_w, ",.0f", "W") if e else NOT_MEASURED,
                    "j_per_token": interval(e.j_per_output_token, ",.3f", "J", floor=0.0) if e else MISSING,
                    "tokens_per_j": interval(e.output_tokens_per_j, ".3g", "tok/J", floor=0.0) if e else MISSING,
                    "cost": money_interval(e.usd_per_mtok) if e and e.usd_per_mtok else MISSING,
                    "vs_baseline": _change(ratio),
                }
            )
    return rows


def _change(ratio: object) -> str:
    """'−31% J/token [−35%…−27%]' against the baseline, paired by repeat; '–' for the baseline or without samples."""
    est = getattr(ratio, "estimate", None)
    if est is None or est != est:
        return MISSING
    low, high = ratio.low, ratio.high  # type: ignore[attr-defined]
    bounds = f" [{relative_change(low)}…{relative_change(high)}]" if low == low and high == high else " (no interval)"
    return f"{relative_change(est)} J/token{bounds}"


def energy_lines(report: Report) -> list[str]:
    """The terminal's energy lines: one per load and candidate with samples, or the one line saying none were."""
    if not energy_measured(report):
        return [f"energy: {NOT_MEASURED}"]
    return [
        f"energy at {r['load']}: {r['arm']} {r['j_per_token']} per output token, {r['tokens_per_j']}"
        + (f", {r['vs_baseline']} vs baseline" if r["vs_baseline"] != MISSING else "")
        for r in energy_rows(report)
        if r["j_per_token"] != MISSING
    ]
