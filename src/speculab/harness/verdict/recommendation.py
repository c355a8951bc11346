"""The recommendation: which configuration to ship at each load band, from the per-load verdicts.

The rule is the verdict's own, applied per measured load: a candidate is chosen there only when it is faster (TPOT)
than the baseline beyond the margin (`LevelReport.best`, decision "faster"); equivalent, inconclusive, slower or
gated -> keep plain (it is simpler, and nothing shows that speculation pays). Neighbouring loads with the same
choice form a band; where a load's best is tied with the candidate chosen at the load below, that one is kept (one
configuration over both is simpler, and the data does not prefer the other). Where a band with a candidate meets a
plain band above it, the edge is that candidate's crossover (`CandidateReport.crossover`, with its interval) when it
crosses between those two loads; otherwise the edge is only known to lie between the two measured loads
(`edge_between`, no estimate).

The form says what to ship: "plain" (no candidate pays anywhere), "single" (one candidate pays at every measured
load), "off-above" (one candidate pays at the low loads, plain above: the engine's disable-by-batch-size form) or
"per-load" (different candidates, e.g. different k, at different loads: a per-batch-size schedule where the engine
has one). Pure: reads the report's parts, computes nothing statistical of its own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from speculab.harness.verdict.model import (
    BASELINE_CHOICE,
    ArmView,
    CandidateReport,
    LevelReport,
    LoadChoice,
    ParetoPoint,
    RecommendationBand,
    RecommendationView,
)


def _axis(levels: Sequence[LevelReport]) -> str:
    """The load axis the bands run along: the sweep's kind if there is one, else the most common kind."""
    sweep = [lv.kind for lv in levels if "sweep" in lv.roles]
    if sweep:
        return sweep[0]
    return Counter(lv.kind for lv in levels).most_common(1)[0][0]


def _load_choice(lv: LevelReport) -> LoadChoice:
    """The choice at one load: the best candidate faster beyond the margin, else plain with the reason why."""
    if lv.best is not None:
        r = next(x for x in lv.ranking if x.candidate == lv.best)
        return LoadChoice(lv.key, lv.label, lv.value, lv.best, "faster", r.speedup, r.speedup_low, r.speedup_high,
                          lv.tied_with_best)  # fmt: skip
    open_ = [r for r in lv.ranking if r.gate == "ok"]
    # why plain: the strongest answer any candidate got here (equivalent says "it makes no difference that
    # matters", inconclusive "the data cannot tell", slower "it costs"); "no verdict" when every gate closed
    order = ("equivalent", "inconclusive", "slower", "not enough paired data")
    answers = {r.decision or r.verdict for r in open_}
    why = next((a for a in order if a in answers), "no verdict" if not open_ else "not faster")
    return LoadChoice(lv.key, lv.label, lv.value, BASELINE_CHOICE, why, math.nan, math.nan, math.nan, ())


def _fewer_bands(choices: list[LoadChoice], levels: Sequence[LevelReport]) -> list[LoadChoice]:
    """Where the best at a load is tied with (not faster beyond the margin than) the candidate chosen at the load
    below, keep that one: the data does not prefer the best, and one configuration over both loads is simpler to
    ship than a switch. Walks upwards, so a run of ties follows the lowest load's choice."""
    out: list[LoadChoice] = []
    for ch, lv in zip(choices, levels, strict=True):
        prev = out[-1].choice if out else None
        if prev is not None and prev != ch.choice and prev in ch.tied:
            r = next(x for x in lv.ranking if x.candidate == prev)
            tied = tuple(t for t in ch.tied if t != prev)
            ch = replace(ch, choice=prev, speedup=r.speedup, speedup_low=r.speedup_low, speedup_high=r.speedup_high,
                         tied=tied, kept_over=ch.choice)  # fmt: skip
        out.append(ch)
    return out


def recommend(levels: Sequence[LevelReport], candidates: Sequence[CandidateReport], arms: Sequence[ArmView],
              margin: float) -> RecommendationView | None:  # fmt: skip
    """Bands of one choice along the load axis, their edges, and the form to ship; None without loads."""
    if not levels or not candidates:
        return None
    axis = _axis(levels)
    on_axis = sorted((lv for lv in levels if lv.kind == axis), key=lambda lv: lv.value)
    choices = _fewer_bands([_load_choice(lv) for lv in on_axis], on_axis)
    views = {a.name: a for a in arms}
    reports = {c.name: c for c in candidates}

    groups: list[list[LoadChoice]] = []
    for ch in choices:
        if groups and groups[-1][-1].choice == ch.choice:
            groups[-1].append(ch)
        else:
            groups.append([ch])

    bands = []
    for i, g in enumerate(groups):
        above = groups[i + 1] if i + 1 < len(groups) else None
        edge = _edge(g[-1], above[0], reports) if above else (None, None, None, None, None, "")
        arm = views.get(g[0].choice)
        bands.append(
            RecommendationBand(
                choice=g[0].choice,
                label=arm.label if arm else "plain (no speculation)",
                method=arm.method if arm else None,
                k=arm.num_speculative_tokens if arm else None,
                loads=tuple(c.value for c in g),
                load_labels=tuple(c.label for c in g),
                upper_edge=edge[0],
                upper_edge_low=edge[1],
                upper_edge_high=edge[2],
                edge_between=(edge[3], edge[4]) if above else None,
                edge_source=edge[5],
            )
        )

    chosen = [b.choice for b in bands if b.choice != BASELINE_CHOICE]
    if not chosen:
        form, winner = "plain", None
    elif len(set(chosen)) > 1:
        form, winner = "per-load", None
    elif len(bands) == 1:
        form, winner = "single", chosen[0]
    elif bands[0].choice == chosen[0] and len(bands) == 2:
        form, winner = "off-above", chosen[0]
    else:
        # one candidate but plain at the low loads (it pays only under load) or in between: no engine form switches
        # speculation on above a load, so ship it where it pays and say where it does not
        form, winner = "per-load", chosen[0]
    off_above = bands[0].upper_edge if form == "off-above" else None
    pareto = pareto_points(on_axis, {c.level: c.choice for c in choices}, views)
    return RecommendationView(axis, margin, tuple(choices), tuple(bands), form, winner, off_above, pareto=pareto)


def pareto_points(levels: Sequence[LevelReport], chosen: Mapping[str, str], arms: Mapping[str, ArmView]
                  ) -> tuple[ParetoPoint, ...]:  # fmt: skip
    """Every arm at every load: per-user tokens/s (1 / median TPOT) against output tokens/s per GPU, the frontier
    marked, and the point the recommendation ships at each load. Reads the arms' own distributions and throughput
    intervals; nothing new is estimated."""
    raw = []
    for lv in levels:
        for a in lv.arms:
            view = arms.get(a.arm)
            gpus = max(1, view.gpus if view is not None else 1)
            tpot = a.distributions.get("tpot_s")
            per_user = 1.0 / tpot.p50 if tpot is not None and tpot.n and tpot.p50 > 0 else math.nan
            iv = a.output_tok_s
            raw.append((lv, a.arm, view.label if view else a.arm, per_user, iv, gpus))
    finite = [(u, iv.estimate / g) for _, _, _, u, iv, g in raw if math.isfinite(u) and math.isfinite(iv.estimate)]

    def dominated(u: float, y: float) -> bool:
        return any(u2 >= u and y2 >= y and (u2 > u or y2 > y) for u2, y2 in finite)

    out = []
    for lv, arm, label, u, iv, g in raw:
        y = iv.estimate / g
        ok = math.isfinite(u) and math.isfinite(y)
        out.append(ParetoPoint(arm, label, lv.key, lv.label, lv.value, u, y, iv.low / g, iv.high / g, g,
                               on_frontier=ok and not dominated(u, y),
                               recommended=chosen.get(lv.key) == arm))  # fmt: skip
    return tuple(out)


def _edge(below: LoadChoice, above: LoadChoice, reports: dict[str, CandidateReport]
          ) -> tuple[float | None, float | None, float | None, float, float, str]:  # fmt: skip
    """(estimate, low, high, measured load below, measured load above, source) of the edge between two bands."""
    lo, hi = below.value, above.value
    # a candidate band ending in plain: its own crossover, when it crosses between the two loads
    cand = below.choice if below.choice != BASELINE_CHOICE else above.choice
    rep = reports.get(cand)
    cross = rep.crossover if rep is not None else None
    if (cross is not None and cross.status == "crosses" and cross.load is not None
            and lo <= cross.load <= hi):  # fmt: skip
        return cross.load, cross.low, cross.high, lo, hi, f"crossover of {cand}"
    return None, None, None, lo, hi, "between measured loads"
