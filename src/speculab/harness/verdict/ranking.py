"""Which candidate pays at each load: rank the candidates by their TPOT speedup over the baseline, and compare the
best with each other candidate paired per prompt, as baseline comparisons are (same units, same verdict rule).

`best` is the candidate with the largest Hodges-Lehmann TPOT speedup among those faster than the baseline beyond the
margin (decision "faster" with the gate open); None when none is. A candidate the best is not faster than beyond the
margin (paired per prompt: equivalent or inconclusive) is tied with it: the report says so instead of crowning a
winner by a difference the data does not hold or that does not matter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN
from speculab.harness.analysis.comparison.paired import compare_paired
from speculab.harness.analysis.figures import HEADLINE
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_run import ABRun
from speculab.harness.stats import CONFIDENCE
from speculab.harness.verdict.comparison import level_group_size, paired_per_prompt, prompt_groups, ratio_of
from speculab.harness.verdict.model import ArmLevel, LevelComparison, Ranked


def rank_level(
    level: LevelSpec,
    comps: Sequence[LevelComparison],
    arms: dict[str, ArmLevel],
    inputs: ABRun,
    rng: np.random.Generator,
    n_resamples: int,
    confidence: float = CONFIDENCE,
    margin: float = DEFAULT_MARGIN,
    metric: str = HEADLINE.name,
) -> tuple[str | None, tuple[Ranked, ...], tuple[str, ...]]:
    """(best, ranking best first, tied with the best) at one load, by `metric` (the deciding metric: TPOT unless
    `decide_on:` says otherwise)."""
    labels = {a.name: a.label for a in inputs.arms}
    entries = []
    for c in comps:
        tp = c.metric(metric)
        if tp is None:
            continue
        entries.append((c, tp))
    faster = {c.candidate: tp.speedup for c, tp in entries if c.gate == "ok" and tp.decision == "faster"}
    best = max(faster, key=faster.__getitem__) if faster else None

    def key(e: tuple[LevelComparison, Any]) -> tuple[int, float]:
        c, tp = e
        s = tp.speedup
        return (0 if c.candidate == best else 1 if c.candidate in faster else 2, -(s if math.isfinite(s) else -1e9))

    ranking, tied = [], []
    for c, tp in sorted(entries, key=key):
        vs = None
        if best is not None and c.candidate != best and c.candidate in faster:
            best_runs = inputs.runs_for(best, level.key)
            other_runs = inputs.runs_for(c.candidate, level.key)
            size = level_group_size(level, arms.get(best), arms.get(c.candidate))
            # candidate = the best, baseline = this one: a speedup > 1 says by how much the best is faster
            b, o, _ = paired_per_prompt(best_runs, other_runs, metric)
            cmp = compare_paired(f"vs {best}", b, o, rng, n_resamples=n_resamples, groups=prompt_groups(inputs, size),
                                 group_size=size, confidence=confidence, margin=margin)  # fmt: skip
            vs = ratio_of(cmp)
            if vs.decision != "faster":
                tied.append(c.candidate)
        ranking.append(
            Ranked(
                c.candidate,
                labels.get(c.candidate, c.candidate),
                c.gate,
                tp.verdict,
                tp.speedup,
                tp.speedup_low,
                tp.speedup_high,
                vs,
                tp.decision,
            )
        )
    return best, tuple(ranking), tuple(tied)
