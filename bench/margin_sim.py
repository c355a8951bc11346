"""The margin's four answers and the launch as the unit, simulated: how often each answer comes out when the truth
is known, with prompts nested in server launches.

Model (log scale, one load, concurrency 1): prompt i in launch pair j of an A/B has log ratio candidate/baseline

    theta + delta_j + eps_ij,    delta_j ~ N(0, sd_launch),    eps_ij ~ sd_prompt * noise

`theta` the true effect (log of the TPOT speedup), `delta_j` what launch pair j shares (two launches of one command
differ: clocks, memory placement, graph capture; on the mock here a few tenths of a percent), `eps` per request
(`noise` normal, or Student-t(3) for heavy tails). Each run has `n` prompts and L launch pairs (repeats; launch
mode relaunches both arms every repeat). Two rules are scored, both judged by `analysis.comparison.margin.decide` at the
default 3 % margin on the 95 % interval, as the report does:

* prompt: the Hodges-Lehmann signed-rank interval of the per-prompt median over launches (the report's interval
  with fewer than `MIN_LAUNCHES` launch pairs: the launch effect is not in it);
* launch: Student's t over the L launch pairs' Hodges-Lehmann effects (the report's interval from 3 launch pairs).

Prints one Markdown row per setting: how often the interval misses the truth (its promise: 5 %), and the share of
runs answered faster, slower, equivalent, inconclusive.
Usage: `PYTHONPATH=src python bench/margin_sim.py [--runs 2000] [--seed 0]` (about a minute on two cores).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from datetime import UTC, datetime

import numpy as np
from scipy import special

from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN, Decision, decide
from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES
from speculab.harness.stats.ranks import hodges_lehmann_batch

ANSWERS = (Decision.FASTER, Decision.SLOWER, Decision.EQUIVALENT, Decision.INCONCLUSIVE)


def simulate(rng: np.random.Generator, runs: int, n: int, launches: int, theta: float, sd_launch: float,
             sd_prompt: float, heavy: bool) -> np.ndarray:  # fmt: skip
    """Log ratios, shape [runs, launches, n]."""
    eps = (
        rng.standard_t(3, size=(runs, launches, n)) / math.sqrt(3)
        if heavy
        else rng.standard_normal((runs, launches, n))
    )
    delta = sd_launch * rng.standard_normal((runs, launches, 1))
    return theta + delta + sd_prompt * eps


def prompt_rule(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Speedup interval (> 1 = faster; x is log TPOT ratios, so speedup = exp(-x)) from the prompts' HL interval."""
    per_prompt = np.median(x, axis=1)  # [runs, n]: each prompt's median over launches, as the report pairs them
    _, lo, hi = hodges_lehmann_batch(per_prompt, 0.95)
    return np.exp(-hi), np.exp(-lo)


def launch_rule(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Speedup interval from Student's t over the launch pairs' HL effects."""
    runs, launches, n = x.shape
    est, _, _ = hodges_lehmann_batch(x.reshape(runs * launches, n), 0.95)
    e = est.reshape(runs, launches)
    half = float(special.stdtrit(launches - 1, 0.975)) * e.std(axis=1, ddof=1) / math.sqrt(launches)
    m = e.mean(axis=1)
    return np.exp(-(m + half)), np.exp(-(m - half))


def shares(lo: np.ndarray, hi: np.ndarray, margin: float) -> dict[Decision, float]:
    answers = [decide(float(a), float(b), margin) for a, b in zip(lo, hi, strict=True)]
    return {d: answers.count(d) / len(answers) for d in ANSWERS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--margin", type=float, default=DEFAULT_MARGIN)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    print(f"{a.runs} runs per row, margin ±{a.margin:.0%}, seed {a.seed}; {platform.node()}, {os.cpu_count()} CPUs, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n")  # fmt: skip
    print("| truth | sd launch | noise | n | L | rule | misses truth | faster | slower | equivalent | inconclusive |")
    print("|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|")
    settings = [
        # A-vs-A: what a launch effect does to each rule
        *[(1.0, sl, False, 24, L) for sl in (0.0, 0.003, 0.01, 0.02) for L in (1, 4)],
        (1.0, 0.003, True, 24, 1),
        (1.0, 0.01, False, 96, 1),
        (1.0, 0.01, False, 24, 8),
        # power and the small true effect, at the recommended size
        *[(eff, sl, False, 24, L) for eff in (1.01, 1.10) for sl in (0.003, 0.01) for L in (1, 4)],
        (1.10, 0.003, True, 24, 1),
    ]
    for speedup, sd_launch, heavy, n, launches in settings:
        x = simulate(rng, a.runs, n, launches, -math.log(speedup), sd_launch, 0.03, heavy)
        rules = [("prompt", prompt_rule(x))]
        if launches >= MIN_LAUNCHES:
            rules.append(("launch", launch_rule(x)))
        for name, (lo, hi) in rules:
            s = shares(lo, hi, a.margin)
            cells = " | ".join(f"{100 * s[d]:.1f} %" for d in ANSWERS)
            miss = float(np.mean((lo > speedup) | (hi < speedup)))  # the interval's promise: 5 %
            print(f"| {speedup:g}× | {100 * sd_launch:g} % | {'t3' if heavy else 'normal'} | {n} | {launches} | "
                  f"{name} | {100 * miss:.1f} % | {cells} |", flush=True)  # fmt: skip
    print(f"\n{time.perf_counter() - t0:.0f} s; per-prompt noise 3 % (log sd), as tests/fakes/ab_inputs.py")


if __name__ == "__main__":
    main()
