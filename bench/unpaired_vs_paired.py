"""What pairing buys: the same A/B run judged paired per prompt, as two samples of all its prompts, and as two
samples of disjoint halves (the baseline's even prompts against the candidate's odd ones, as two runs of one
workload that drew different prompts would be).

Reads a finished `speculab run`/`demo` directory (any engine) and, for each candidate and load, prints the TPOT
speedup with its 95 % interval three ways, from `harness.verdict.comparison.judge` (the code the report uses):

- paired: the report's own comparison (Hodges-Lehmann of per-prompt ratios, signed-rank interval; groups at c > 1);
- unpaired, all: `Setup.paired = False` on the same records (two-sample Hodges-Lehmann, rank-sum interval);
- unpaired, disjoint: the same, the baseline keeping its even prompt indices and the candidate its odd ones, so no
  prompt is in both samples.

The interval widths (high / low, a ratio) say how much wider the unpaired intervals are on that workload; whether the
disjoint estimate's interval holds the paired estimate says whether the unpaired comparison of different prompts
lands where pairing does. No timing: it only recomputes statistics from the run's records.

Usage: `PYTHONPATH=src python bench/unpaired_vs_paired.py RUN_DIR [--json out.json]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.comparison import arm_values, judge, level_group_size
from speculab.harness.verdict.model import ReportOptions


def _row(inputs, cand: str, level, size: int, opts: ReportOptions, keep=None) -> dict:
    c_runs, b_runs = inputs.runs_for(cand, level.key), inputs.runs_for("baseline", level.key)
    c, b, _ = arm_values(inputs.setup, c_runs, b_runs, "tpot_s")
    if keep is not None:
        c = {i: v for i, v in c.items() if keep(i, "candidate")}
        b = {i: v for i, v in b.items() if keep(i, "baseline")}
    m = judge(inputs, "tpot_s", c, b, np.random.default_rng(0), opts, size, 0.03)
    lo, hi = m.speedup_interval
    return {"speedup": m.speedup, "low": lo, "high": hi, "width": hi / lo, "decision": m.decision.value,
            "units": m.n_units, "samples": list(m.samples) or [len(c), len(b)]}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    paired = load_inputs(args.run_dir)
    unpaired = dataclasses.replace(paired, setup=dataclasses.replace(paired.setup, paired=False))
    opts = ReportOptions(n_resamples=2000, confidence=0.95)
    rows = []
    for cand in (a.name for a in paired.arms if a.name != "baseline"):
        for level in paired.setup.levels:
            if not paired.runs_for(cand, level.key):
                continue
            size = level_group_size(level)
            row = {
                "candidate": cand,
                "level": level.label,
                "group_size": size,
                "paired": _row(paired, cand, level, size, opts),
                "unpaired_all": _row(unpaired, cand, level, size, opts),
                "unpaired_disjoint": _row(
                    unpaired, cand, level, size, opts, lambda i, arm: (i % 2 == 0) == (arm == "baseline")
                ),
            }
            p, d = row["paired"], row["unpaired_disjoint"]
            row["disjoint_holds_paired_estimate"] = d["low"] <= p["speedup"] <= d["high"]
            rows.append(row)
            print(
                f"{cand:>16} {level.label:>15}  paired {p['speedup']:.2f}x [{p['low']:.2f}-{p['high']:.2f}]  "
                f"unpaired {row['unpaired_all']['speedup']:.2f}x [{row['unpaired_all']['low']:.2f}-"
                f"{row['unpaired_all']['high']:.2f}]  disjoint {d['speedup']:.2f}x [{d['low']:.2f}-{d['high']:.2f}]"
                f"  width x{(row['unpaired_all']['width'] - 1) / max(p['width'] - 1, 1e-9):.1f}"
            )
    if args.json:
        args.json.write_text(json.dumps({"run_dir": str(args.run_dir), "setup": paired.setup.name, "rows": rows},
                                        indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
