"""Each arm's highest load within its SLO (summary.json `slo_capacity`), as sentences and table rows: the terminal's
lines under the recommendation block and report.html's short table say the same words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from speculab.harness.verdict.model import METRIC_LABELS
from speculab.report.formatting import seconds


def _load(kind: str, v: float) -> str:
    return f"{kind} {v:.3g}" if kind == "concurrency" else f"{v:.3g} req/s"


def slo_text(cap: Any) -> str:
    """'TPOT ≤ 30.0 ms for 90 % of requests': the SLO the capacity was measured against."""
    limits = ", ".join(f"{METRIC_LABELS.get(k, k)} ≤ {seconds(v)}" for k, v in cap.metric_limits.items())
    return f"{limits} for {cap.target:.0%} of requests"


def capacity_text(cap: Any) -> str:
    """One arm's answer: the estimate with its interval (an open end: below the lowest load or beyond the highest),
    or that it meets the SLO everywhere measured, or misses it already at the lowest load, or undetermined."""
    if cap.status == "crosses" and cap.estimate is not None:
        lo = "below" if cap.low is None else f"{cap.low:.3g}"
        hi = "beyond" if cap.high is None else f"{cap.high:.3g}"
        return f"within it up to {_load(cap.kind, cap.estimate)} [{lo}–{hi}] ({cap.confidence:.0%} interval)"
    if cap.status == "meets throughout" and cap.highest is not None:
        return f"meets it at every load measured (up to {_load(cap.kind, cap.highest)})"
    if cap.status == "misses throughout" and cap.lowest is not None:
        return f"misses it already at the lowest load ({_load(cap.kind, cap.lowest)})"
    if cap.lowest is None or cap.highest is None:
        return "undetermined: no load measured"
    if cap.low is not None and cap.high is None:  # the lower end is known, the upper reaches past the loads measured
        past = f"the loads measured (up to {cap.highest:.3g}) do not place it"
        return f"undetermined: at least {_load(cap.kind, cap.low)}; beyond that {past}"
    span = f"{_load(cap.kind, cap.lowest)} and {cap.highest:.3g}"
    return f"undetermined between {span}: the loads measured do not place it"


def _labels(report: Any) -> Mapping[str, str]:
    return {a.name: a.label for a in report.arms}


def slo_capacity_lines(report: Any) -> list[str]:
    """The terminal's lines: the SLO, then one line per arm; none without SLOs (or in a summary written before)."""
    caps = getattr(report, "slo_capacity", None)
    if not caps:
        return []
    labels = _labels(report)
    first = next(iter(caps.values()))
    out = [f"highest load within the SLO ({slo_text(first)}):"]
    out.extend(f"  {labels.get(arm, arm)}: {capacity_text(cap)}" for arm, cap in caps.items())
    return out


def slo_capacity_rows(report: Any) -> list[dict[str, str]]:
    """report.html's table: one row per arm with its answer."""
    caps = getattr(report, "slo_capacity", None) or {}
    labels = _labels(report)
    return [{"arm": labels.get(arm, arm), "answer": capacity_text(cap)} for arm, cap in caps.items()]
