"""The load search simulated: how often its interval holds the true crossover, and what the search costs (issue 39).

Each search is the real policy and fit (`harness.search.run_search`) against a scripted truth: a probe at
concurrency c returns the units the policy sizes it at (`probe_groups`: `--groups`, default MIN_PAIRS, the verdict's
groups; a load measured again up to `--max-groups`, default the same: every probe one size), each the true log effect
mu(c) plus noise of sd sigma(c). Truths, as log(baseline TPOT / candidate TPOT) at c streams:

* done-means: the mock pair of docs/mock-server.md "A known crossover" (one token a chunk against two, the
  candidate's gaps stretched by s per extra stream), read from `speculab.mock.truth` (2x faster at one stream, the
  TPOT ratio growing linearly with streams), s = 1/15.5: crosses at 16.5 streams;
* late: the same pair with s = 1/39.5 (crosses at 40.5); steep: s = 1/1.5 (crosses at 2.5);
* flat: 1.2x faster at every load (never crosses: the truth lies beyond the highest load);
* slower: 0.85x at every load (the truth lies below the lowest).

Noise, per unit (log scale), two measured sizes:

* mock: the two mock servers, docs/statistics.md "Concurrency > 1" (per request ~0.1 %, a wave of 4 sharing ~0.7 %):
  sd 0.007 at every load;
* demo: the demo engine on this 2-core VM (bench/results/recommend_demo_2026-12-03.json, n-gram k=8 vs plain): the
  per-unit sd backed out of the recorded 95 % intervals, 0.625 at 1 stream (96 prompts), 0.254 at 4 (24 groups),
  0.241 at 16 (6 groups; their range), interpolated in log streams and flat beyond 16. Prompts differ in how much
  n-gram speculation helps them, which is most of it; a GPU engine's spread is likely smaller;
* demo-t3: the demo's sd with heavy tails (Student-t with 3 degrees of freedom, scaled to the same sd): a stall or
  an odd prompt now and then.

Usage: `PYTHONPATH=src python3 bench/search_coverage.py --out bench/results/search_coverage_<date>.json`
(`--runs 1000`, `--quick` for a smoke run; `--interval interpolated`: the same searches with the replicates'
interpolated crossings as the interval, the comparison in docs/statistics.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from speculab.harness.analysis.crossover import crossing_interval, first_crossings
from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.search import Probe, SearchSpec, probe_prompts, run_search
from speculab.harness.search import fit as search_fit
from speculab.harness.search.fit import bootstrap_fits, pooled_probes
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_crossover, true_tpot_speedup

DEMO_SD = ((1.0, 0.625), (4.0, 0.254), (16.0, 0.241))  # (streams, per-unit sd): see the docstring
MOCK_SD = 0.007


@dataclass(frozen=True, slots=True)
class Truth:
    name: str
    log_effect: Callable[[float], float]
    crossover: float  # -inf: below the lowest load; inf: beyond the highest


def mock_truth(name: str, slowdown: float) -> Truth:
    """The mock pair's truth: one token a chunk (baseline) against two with `slowdown` per extra stream; 129-token
    answers, so that the speedup at one stream is 2 exactly (128 gaps against 64)."""
    base = MockConfig(tokens_per_chunk=1, output_tokens=129)
    cand = MockConfig(tokens_per_chunk=2, decode_slowdown_per_request=slowdown, output_tokens=129)
    cross = true_crossover(base, cand)
    assert cross is not None
    return Truth(name, lambda c: math.log(true_tpot_speedup(base, cand, round(c))), cross)  # type: ignore[arg-type]


def truths() -> tuple[Truth, ...]:
    return (
        mock_truth("done-means", 1 / 15.5),
        mock_truth("late", 1 / 39.5),
        mock_truth("steep", 1 / 1.5),
        Truth("flat", lambda c: math.log(1.2), math.inf),
        Truth("slower", lambda c: math.log(0.85), -math.inf),
    )


def noise_sd(noise: str, c: float) -> float:
    if noise == "mock":
        return MOCK_SD
    xs, sds = zip(*DEMO_SD, strict=True)
    return float(np.interp(math.log(c), np.log(xs), sds))


def one_search(truth: Truth, noise: str, spec: SearchSpec, seed: int, replicates: int, log_load: bool = False) -> dict:
    rng = np.random.default_rng(seed)

    def measure(c: float, groups: int) -> Probe:
        z = rng.standard_t(3, groups) / math.sqrt(3) if noise == "demo-t3" else rng.standard_normal(groups)
        return Probe(c, tuple(truth.log_effect(c) + noise_sd(noise, c) * z))

    out = run_search(spec, measure, rng, replicates=replicates, log_load=log_load)
    f = out.fit
    lo = -math.inf if f.low is None else f.low
    hi = math.inf if f.high is None else f.high
    # the other interval, for comparison: the replicates' interpolated crossings (crossover.py's, for fixed sweeps)
    loads, units = pooled_probes(out.probes)
    i_lo, i_hi = crossing_interval(first_crossings(loads, bootstrap_fits(units, rng, replicates), log_load), 0.95)
    return {
        "covered": bool(lo <= truth.crossover <= hi),
        "interpolated_covered": bool(i_lo <= truth.crossover <= i_hi),
        "width": hi - lo,
        "probes": len(out.probes),
        "prompts": sum(probe_prompts(spec.kind, p.load, len(p.effects)) for p in out.probes),
        "reason": out.reason,
        "status": f.status,
    }


def summarise(rows: list[dict], tolerance: float, max_probes: int) -> dict:
    widths = np.array([r["width"] for r in rows])
    finite = widths[np.isfinite(widths)]
    reasons: dict[str, int] = {}
    for r in rows:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    return {
        "runs": len(rows),
        "coverage": float(np.mean([r["covered"] for r in rows])),
        "interpolated_coverage": float(np.mean([r["interpolated_covered"] for r in rows])),
        "mean_probes": float(np.mean([r["probes"] for r in rows])),
        "max_probes": int(max(r["probes"] for r in rows)),
        "mean_width": float(finite.mean()) if finite.size else None,
        "finite_width_share": float(finite.size / len(rows)),
        "within_tolerance_and_budget": float(
            np.mean([r["covered"] and r["width"] <= tolerance and r["probes"] <= max_probes for r in rows])
        ),
        "mean_prompts_per_arm": float(np.mean([r["prompts"] for r in rows])),
        "stop_reasons": reasons,
    }


LOG_LOAD = [False]  # --log-load, for interpolated_interval, which the fit calls with its own arguments


def interpolated_interval(loads: np.ndarray, point_fit: np.ndarray, rep_fit: np.ndarray, confidence: float):
    """`--interval interpolated`: the percentile interval of the replicates' interpolated crossings (crossover.py's
    for fixed sweeps) in place of the brackets', to show what the brackets buy (docs/statistics.md)."""
    return crossing_interval(first_crossings(loads, rep_fit, LOG_LOAD[0]), confidence)


COLUMNS = (
    "truth",
    "crossover",
    "noise",
    "coverage %",
    "interpolated %",
    "mean probes",
    "max probes",
    "mean width",
    "finite width %",
    "≤ tol & budget, covered %",
    "prompts/arm",
    "stops",
)


def table_row(s: dict) -> list[str]:
    """One Markdown row of the table in bench/README.md."""
    return [
        s["truth"],
        f"{s['crossover']:g}",
        s["noise"],
        f"{100 * s['coverage']:.1f}",
        f"{100 * s['interpolated_coverage']:.1f}",
        f"{s['mean_probes']:.1f}",
        str(s["max_probes"]),
        "-" if s["mean_width"] is None else f"{s['mean_width']:.1f}",
        f"{100 * s['finite_width_share']:.0f}",
        f"{100 * s['within_tolerance_and_budget']:.1f}",
        f"{s['mean_prompts_per_arm']:.0f}",
        ", ".join(f"{k} {v}" for k, v in sorted(s["stop_reasons"].items())),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--low", type=float, default=1)
    ap.add_argument("--high", type=float, default=48)
    ap.add_argument("--tolerance", type=float, default=12)
    ap.add_argument("--max-probes", type=int, default=10)
    ap.add_argument("--groups", type=int, default=MIN_PAIRS, help="groups a load's first probe sends")
    ap.add_argument("--max-groups", type=int, help="the most a load measured again sends (default: --groups)")
    ap.add_argument("--noise", default="mock,demo,demo-t3")
    ap.add_argument("--log-load", action="store_true", help="interpolate the estimate in log load (as the run does)")
    ap.add_argument("--interval", choices=("brackets", "interpolated"), default="brackets")
    ap.add_argument("--quick", action="store_true", help="50 runs, 200 replicates: a smoke run")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    runs, reps = (50, 200) if a.quick else (a.runs, a.replicates)
    LOG_LOAD[0] = a.log_load
    if a.interval == "interpolated":  # a comparison only: the search as it would run with the other interval
        search_fit._interval = interpolated_interval  # type: ignore[assignment]
    spec = SearchSpec("concurrency", a.low, a.high, a.tolerance, a.max_probes, (), a.groups, a.max_groups)
    t0, results = time.time(), []
    print(
        f"concurrency {a.low:g}-{a.high:g}, tolerance {a.tolerance:g}, max {a.max_probes} probes; {runs} searches "
        f"a row, {reps} bootstrap replicates, seed {a.seed}, {a.interval} interval, {spec.groups} groups a probe "
        f"(up to {spec.cap} measuring a load again)"
        f"{', estimate in log load' if a.log_load else ''}"
    )
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---|---:|---|" + "---:|" * (len(COLUMNS) - 4) + "---|")
    for ti, truth in enumerate(truths()):
        for ni, noise in enumerate(a.noise.split(",")):
            base = a.seed * 1_000_000 + (ti * 10 + ni) * 10_000
            rows = [one_search(truth, noise, spec, base + i, reps, a.log_load) for i in range(runs)]
            s = {"truth": truth.name, "crossover": truth.crossover, "noise": noise}
            s |= summarise(rows, a.tolerance, a.max_probes)
            results.append(s)
            print("| " + " | ".join(table_row(s)) + " |", flush=True)
    elapsed = time.time() - t0
    print(
        f"{elapsed:.0f} s; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps(
                {
                    "what": "bench/search_coverage.py: coverage of the load search's crossover interval (issue 39)",
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                    "settings": {
                        "runs": runs,
                        "replicates": reps,
                        "seed": a.seed,
                        "low": a.low,
                        "high": a.high,
                        "tolerance": a.tolerance,
                        "max_probes": a.max_probes,
                        "groups_per_probe": spec.groups,
                        "max_groups_per_probe": spec.cap,
                        "noise_mock_sd": MOCK_SD,
                        "noise_demo_sd": DEMO_SD,
                        "interval": a.interval,
                        "log_load": a.log_load,
                    },
                    "elapsed_s": round(elapsed, 1),
                    "rows": results,
                },
                indent=1,
                default=str,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
