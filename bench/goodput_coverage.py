"""Each arm's highest load within its SLO, simulated: how often its interval holds the true edge (issue 39 item 3).

The estimator is the report's (`harness.search.goodput.fit_slo_capacity`: the crossover's isotonic fit and bracket
bootstrap on each unit's fraction of requests within the SLO minus the target). A scripted arm's TPOT at c streams
is t1 (1 + s (c - 1)) (the mock's `--decode-slowdown`: gaps stretched by s per extra stream, s = 1/15.5), each
request's log TPOT that plus a shift shared by its group (the prompts sent together: one batch, one slow step for
all) plus its own; a request meets the SLO when its TPOT is at most the limit. The true attainment at c is then
Phi((log limit - log TPOT(c)) / sd), sd the two spreads together, and the true edge c* is where it equals the
target (0.9): the limit is set so that c* is where each truth wants it.

* truths: c* = 3, 10, 24 (inside 1-48), 80 (met at every load measured), 0.5 (missed already at the lowest);
* loads: `sweep` (1, 2, 4, 8, 16, 32, 48: a fixed sweep's levels) and `search` (1, 7, 48, 12, 16, 20, 24: the
  done-means search's probes, placed for the speculation crossover, not for this edge), each load sending
  max(96, 6 c) prompts in groups of c (the verdict's MIN_PAIRS groups at least);
* noise (log TPOT sd: shared by a group, each request's own): `quiet` (0.02, 0.05), `prompts` (0.05, 0.3: prompts
  differ, as on the demo engine), `batch` (0.3, 0.05: mostly shared by the requests of one batch).

`--units request` counts each request as its own unit, as if requests sent together were independent: the
comparison in docs/statistics.md that says why the units are groups.

Usage: `PYTHONPATH=src python3 bench/goodput_coverage.py --out bench/results/goodput_coverage_<date>.json`
(`--runs 1000`; `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from scipy import special

from speculab.harness.analysis.groups import MIN_PAIRS
from speculab.harness.search.fit import Probe
from speculab.harness.search.goodput import CROSSES, MEETS_THROUGHOUT, MISSES_THROUGHOUT, fit_slo_capacity

SLOWDOWN = 1 / 15.5  # the mock pair's `--decode-slowdown` of docs/mock-server.md "A known crossover"
T1 = 0.01  # TPOT at one stream, seconds (the mock's default gap)
TARGET = 0.9
EDGES = (3.0, 10.0, 24.0, 80.0, 0.5)
LOADS = {"sweep": (1, 2, 4, 8, 16, 32, 48), "search": (1, 7, 48, 12, 16, 20, 24)}
NOISE = {"quiet": (0.02, 0.05), "prompts": (0.05, 0.3), "batch": (0.3, 0.05)}


def tpot(c: float) -> float:
    return T1 * (1 + SLOWDOWN * (c - 1))


def limit_for(edge: float, sd: float) -> float:
    """The TPOT limit at which the true attainment is exactly TARGET at `edge` streams."""
    return tpot(edge) * math.exp(float(special.ndtri(TARGET)) * sd)


def true_attainment(c: float, limit: float, sd: float) -> float:
    return float(special.ndtr((math.log(limit) - math.log(tpot(c))) / sd))


def probe(c: int, limit: float, noise: tuple[float, float], rng: np.random.Generator, units: str) -> Probe:
    """One load: max(96, MIN_PAIRS c) requests in groups of c; each unit's fraction within the limit."""
    groups = max(96 // c, MIN_PAIRS)
    shared = rng.normal(0.0, noise[0], size=(groups, 1))
    own = rng.normal(0.0, noise[1], size=(groups, c))
    met = math.log(tpot(c)) + shared + own <= math.log(limit)  # [groups, c]
    per_unit = met.mean(axis=1) if units == "group" else met.ravel().astype(float)
    return Probe(float(c), tuple(float(x) for x in per_unit))


def covered(fit, edge: float, loads: tuple[int, ...]) -> bool:
    """The interval holds the truth; an open end (None) reaches past the loads measured."""
    lo = -math.inf if fit.low is None else fit.low
    hi = math.inf if fit.high is None else fit.high
    return lo <= edge <= hi


def right_status(fit, edge: float, loads: tuple[int, ...]) -> bool:
    """A decided status agrees with the truth (undetermined is never wrong, only unhelpful)."""
    if fit.status == MEETS_THROUGHOUT:
        return edge > max(loads)
    if fit.status == MISSES_THROUGHOUT:
        return edge < min(loads)
    return True


def cell(edge: float, design: str, noise: str, args: argparse.Namespace) -> dict:
    loads = LOADS[design]
    sd = math.hypot(*NOISE[noise])
    limit = limit_for(edge, sd)
    hits = statuses = 0
    widths, counts = [], {CROSSES: 0, MEETS_THROUGHOUT: 0, MISSES_THROUGHOUT: 0, "undetermined": 0}
    for i in range(args.runs):
        rng = np.random.default_rng([args.seed, int(edge * 10), len(design), len(noise), i])
        probes = [probe(c, limit, NOISE[noise], rng, args.units) for c in loads]
        fit = fit_slo_capacity(probes, TARGET, rng, replicates=args.replicates, log_load=True)
        hits += covered(fit, edge, loads)
        statuses += right_status(fit, edge, loads)
        counts[fit.status] += 1
        if fit.low is not None and fit.high is not None:
            widths.append(fit.high - fit.low)
    return {
        "edge": edge,
        "loads": design,
        "noise": noise,
        "units": args.units,
        "runs": args.runs,
        "coverage": hits / args.runs,
        "status_right": statuses / args.runs,
        "statuses": counts,
        "median_width": float(np.median(widths)) if widths else None,
        "attainment_at_loads": [round(true_attainment(c, limit, sd), 3) for c in sorted(loads)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--units", choices=("group", "request"), default="group")
    ap.add_argument("--quick", action="store_true", help="100 runs, 300 replicates: a smoke run")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.quick:
        args.runs, args.replicates = 100, 300
    t0 = time.perf_counter()
    rows = [cell(e, d, n, args) for e in EDGES for d in LOADS for n in NOISE]
    print(f"{'edge':>5} {'loads':>7} {'noise':>8} {'coverage':>8} {'status ok':>9} {'median width':>12}  statuses")
    for r in rows:
        w = "-" if r["median_width"] is None else f"{r['median_width']:.1f}"
        print(
            f"{r['edge']:>5g} {r['loads']:>7} {r['noise']:>8} {r['coverage']:>8.1%} {r['status_right']:>9.1%} "
            f"{w:>12}  {r['statuses']}"
        )
    worst = min(r["coverage"] for r in rows)
    print(f"worst coverage {worst:.1%} (nominal 95%), {time.perf_counter() - t0:.0f} s")
    if args.out:
        meta = {
            "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "runs": args.runs,
            "replicates": args.replicates,
            "seed": args.seed,
            "units": args.units,
            "target": TARGET,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
