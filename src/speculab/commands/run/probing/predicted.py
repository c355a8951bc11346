"""`speculab run --prediction PREDICTION.json`: a run that starts from `speculab predict`'s prediction (issue 49 item
4). A search places its first probes in the predicted crossover's interval; at fixed levels each candidate's
predicted band is recorded beside what is measured, and the verdict says where a measurement fell outside it
(`verdict.across_loads.prediction_checks`).

Only the candidates the prediction covers at the K the run gives them are matched (by name and k); the others run
as without a prediction. The prediction is held in inputs.json (`Setup.predicted`), so the report reads it again."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from speculab.commands.run.plan import RunPlan
from speculab.errors import UserError
from speculab.harness.search.predict import PREDICTION_SCHEMA


def read_prediction(path: Path) -> dict[str, Any]:
    """prediction.json, checked for what a run uses; a one-line error naming the fix otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"--prediction {path}: no such file; give the prediction.json `speculab predict` wrote"
        ) from None
    except (OSError, ValueError) as e:
        raise UserError(
            f"--prediction {path}: not readable JSON ({e}); give the prediction.json `speculab predict` wrote"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != PREDICTION_SCHEMA:
        raise UserError(
            f"--prediction {path}: not a {PREDICTION_SCHEMA} file; give the prediction.json `speculab predict` wrote"
        )
    return data


def matched(data: dict[str, Any], plan: RunPlan) -> dict[str, dict[str, Any]]:
    """The prediction's row for each of the plan's candidates at the K it runs (name and k equal), as inputs.json
    keeps it: {name: {k, tokens_per_step, crossover, curve: [[load, estimate, low, high], ...]}}."""
    ks = {a.info.name: a.info.num_speculative_tokens for a in plan.arms[1:]}
    out = {}
    for row in data.get("candidates") or ():
        name, k = row.get("name"), row.get("k")
        if name in ks and k == ks[name]:
            # a band not predicted at a load is null here as in the file; `band_at`, its one reader, reads it as NaN
            curve = [
                [p["load"], p["speedup"]["estimate"], p["speedup"]["low"], p["speedup"]["high"]] for p in row["curve"]
            ]
            out[name] = {
                "k": k,
                "tokens_per_step": row.get("tokens_per_step"),
                "crossover": row.get("crossover"),
                "curve": curve,
            }
    return out


def with_prediction(plan: RunPlan, path: Path) -> RunPlan:
    """The plan starting from the prediction in `path`: recorded in its setup, and a search's first round seeded with
    the predicted crossovers' interval (the lowest low and the highest high of the matched candidates')."""
    data = read_prediction(path)
    rows = matched(data, plan)
    if not rows:
        names = ", ".join(f"{a.info.name} (k={a.info.num_speculative_tokens})" for a in plan.arms[1:])
        raise UserError(
            f"--prediction {path}: it predicts none of this run's candidates ({names}); predict this experiment first"
        )
    setup = replace(plan.setup, predicted={"file": str(path), "candidates": rows})
    if setup.search is not None:
        ends = [
            x
            for r in rows.values()
            for x in ((r["crossover"] or {}).get("low"), (r["crossover"] or {}).get("high"))
            if x is not None
        ]
        if ends:
            setup = replace(setup, search={**setup.search, "seeded": [min(ends), max(ends)]})
    return replace(plan, setup=setup)
