"""False-positive rate and power of paired A/B decision rules at small n under heavy-tailed noise.

Simulates per-prompt TPOTs for two arms: a shared per-prompt effect (prompts differ in length; pairing cancels it)
times independent per-request noise in each arm, for n = 8, 16, 32, 64 pairs and three noise models:

* lognormal: log noise ~ N(0, 0.10) per request (about 10 %);
* t3:        log noise ~ 0.10 * Student-t(3) (heavy tails, infinite kurtosis);
* stall:     log noise ~ N(0, 0.05), and 10 % of requests stall: value * (1 + U(0.3, 2.0)).

and scores three rules on the log ratios (all at 95 %):

* bca:      the BCa bootstrap interval of the geometric-mean ratio excludes 1 (speculab's verdict before this change;
            `bootstrap_geomean_ratio`, 1000 resamples);
* t:        the Student-t interval of the mean log ratio excludes 1;
* hl:       the Hodges-Lehmann signed-rank interval excludes 1 (`hodges_lehmann_batch`; speculab's verdict now).

A-vs-A (effect 1.0) gives the false-positive rate; effects 1.1x, 1.3x, 2x give the power. Then it checks the
minimum detectable change the verdict reports: the power actually achieved against an effect of that size.
Prints Markdown tables. Usage: `python bench/stats_coverage.py [--runs 2000] [--power-runs 1000] [--seed 0]`
(about a minute on two cores; `--quick` for a 5 s smoke run).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime

import numpy as np
from scipy import special
from scipy import stats as scipy_stats

from speculab.harness import stats
from speculab.harness.analysis.comparison.paired import PairedRatios, bootstrap_geomean_ratio
from speculab.harness.stats.ranks import hodges_lehmann_batch

NS = (8, 16, 32, 64)
NOISES = ("lognormal", "t3", "stall")
EFFECTS = (1.0, 1.1, 1.3, 2.0)


def log_noise(rng: np.random.Generator, model: str, shape: tuple[int, ...]) -> np.ndarray:
    """Per-request log-scale noise of one arm; shape as given."""
    if model == "lognormal":
        return rng.normal(0.0, 0.10, shape)
    if model == "t3":
        return 0.10 * rng.standard_t(3, shape)
    if model == "stall":
        stall = rng.random(shape) < 0.10
        return rng.normal(0.0, 0.05, shape) + np.where(stall, np.log1p(rng.uniform(0.3, 2.0, shape)), 0.0)
    raise ValueError(model)


def log_ratios(rng: np.random.Generator, model: str, runs: int, n: int, effect: float) -> np.ndarray:
    """log(candidate / baseline) per prompt for `runs` experiments; shape [runs, n]. Candidate is `effect`x faster."""
    prompt = rng.normal(math.log(0.02), 0.5, (runs, n))  # shared: long prompts are slow in both arms
    base = np.exp(prompt + log_noise(rng, model, (runs, n)))
    cand = np.exp(prompt + log_noise(rng, model, (runs, n))) / effect
    return np.log(cand) - np.log(base)


def reject_hl(x: np.ndarray) -> np.ndarray:
    _, lo, hi = hodges_lehmann_batch(x)
    return (lo > 0) | (hi < 0)


def reject_t(x: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    half = scipy_stats.t.ppf(0.975, n - 1) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    m = x.mean(axis=-1)
    return (m - half > 0) | (m + half < 0)


def reject_bca(x: np.ndarray, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    out = np.empty(x.shape[0], dtype=bool)
    n = x.shape[1]
    for r, row in enumerate(x):
        pr = PairedRatios(tuple(range(n)), tuple(np.exp(row).tolist()), 0)
        out[r] = bootstrap_geomean_ratio(pr, rng, n_resamples).interval.excludes(1.0)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000, help="A-vs-A experiments per condition")
    ap.add_argument("--power-runs", type=int, default=1000, help="experiments per condition with an effect")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for the BCa rule")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="200 runs each: a smoke run")
    a = ap.parse_args(argv)
    runs, power_runs = (200, 200) if a.quick else (a.runs, a.power_runs)
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    machine = f"{platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs"
    print(
        f"# stats_coverage: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine}, "
        f"python {sys.version.split()[0]}, seed {a.seed}, {runs} A-vs-A / {power_runs} effect runs per cell\n"
    )
    print("Rejection rate (%) of 'no difference' at 95 %: effect 1.0 = false-positive rate, others = power.\n")
    print("| noise | n | effect | bca | t | hl (verdict) |")
    print("|---|---:|---:|---:|---:|---:|")
    for model in NOISES:
        for n in NS:
            for effect in EFFECTS:
                r = runs if effect == 1.0 else power_runs
                x = log_ratios(rng, model, r, n, effect)
                rates = [reject_bca(x, rng, a.resamples).mean(), reject_t(x).mean(), reject_hl(x).mean()]
                cells = " | ".join(f"{100 * v:.1f}" for v in rates)
                print(f"| {model} | {n} | {effect:g}x | {cells} |", flush=True)
    # Is the minimum detectable change honest? Median MDC the verdict's interval reports under A-vs-A, then the
    # power actually achieved against an effect of exactly that size (80 % is what it promises).
    print("\nMinimum detectable change (median over A-vs-A runs) and the power actually achieved at that effect:\n")
    print("| noise | n | median MDC | power at it |")
    print("|---|---:|---:|---:|")
    z = (special.ndtri(0.975) + special.ndtri(stats.POWER)) / (2 * special.ndtri(0.975))
    for model in NOISES:
        for n in NS:
            _, lo, hi = hodges_lehmann_batch(log_ratios(rng, model, runs, n, 1.0))
            mdc = float(np.median(np.expm1(z * (hi - lo))))
            power = reject_hl(log_ratios(rng, model, power_runs, n, 1.0 + mdc)).mean()
            print(f"| {model} | {n} | {100 * mdc:.1f} % | {100 * power:.0f} % |", flush=True)
    se = 100 * math.sqrt(0.05 * 0.95 / runs)
    print(f"\nBinomial sd of a 5 % rate over {runs} runs: {se:.2f} points. Took {time.perf_counter() - t0:.0f} s.")


if __name__ == "__main__":
    main()
