"""`speculab predict EXPERIMENT.yaml [--output DIR] [--dry-run]`: the probes run (OUT/probes, an A/B run directory
with its own report), then the prediction from them written to OUT/prediction.json and shown.

--dry-run prints the probes and what they cost (requests, and a duration timed on the baseline as `run --dry-run`
does) beside what a fixed K x load sweep of the same candidates would send, and writes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from speculab.commands.predict.from_report import predict_from_report
from speculab.commands.predict.probes import ProbePlan, plan_probes, probe_experiment
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.preflight import dry_run_interruptible, dry_run_lines
from speculab.commands.run.run import RunScreen, default_run_dir, run_and_report
from speculab.config import load_experiment
from speculab.harness.gates.asked import report_options
from speculab.harness.results.ab_dir import check_ab_output_dir, load_inputs
from speculab.harness.results.strict_json import dumps
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.search.predict import Prediction
from speculab.harness.verdict.build import build_report

PREDICTION_FILE = "prediction.json"
PROBES_DIR = "probes"


class PredictScreen(RunScreen, Protocol):
    """What predict shows: the run's screen for its probes, then the prediction (the CLI words it)."""

    def prediction(self, prediction: Prediction, path: Path) -> None:
        """The prediction, once written to `path`."""


@dataclass(frozen=True, slots=True)
class PredictFlags:
    experiment: Path
    output: Path | None = None
    dry_run: bool = False
    allow_extra_diff: bool = False
    max_model_len: int | None = None
    seed: int = 0  # the draws behind the bands


def _plan_lines(probes: ProbePlan) -> list[str | ReportWarning]:
    return [
        ReportWarning(
            WarningKind.PREDICT_PLAN,
            fields={
                "loads": list(probes.loads),
                "low": probes.low,
                "high": probes.high,
                "prompts": probes.prompts,
                "requests": probes.requests,
                "sweep_loads": list(probes.sweep_loads),
                "sweep_requests": probes.sweep_requests,
            },
        )
    ]


def predict_command(flags: PredictFlags, screen: PredictScreen) -> Prediction | None:
    """Plan the probes, run them, predict; None for --dry-run."""
    exp = load_experiment(flags.experiment)
    out = flags.output or default_run_dir(f"{flags.experiment.stem}-predict")
    probes_out = out / PROBES_DIR
    plan = plan_experiment(
        probe_experiment(exp),
        allow_extra_diff=flags.allow_extra_diff,
        on_change=screen.change,
        max_model_len=flags.max_model_len,
    )
    probes = plan_probes(exp, len(plan.setup.items))
    for line in _plan_lines(probes):
        screen.line(line)
    if flags.dry_run:
        for line in dry_run_lines(dry_run_interruptible(plan)):
            screen.line(line)
        return None
    check_ab_output_dir(probes_out)
    started = time.perf_counter()
    outcome = run_and_report(plan, probes_out, screen, report_options(allow_python_checks=False))
    wall = time.perf_counter() - started
    if outcome.interrupted:
        return None
    inputs = load_inputs(probes_out)
    prediction = predict_from_report(
        build_report(inputs),
        inputs,
        probes.low,
        probes.high,
        np.random.default_rng(flags.seed),
        requests_sent=probes.requests,
        sweep_requests=probes.sweep_requests,
        probe_wall_s=wall,
    )
    path = out / PREDICTION_FILE
    path.write_text(dumps(prediction.to_dict(), indent=1) + "\n", encoding="utf-8")
    screen.prediction(prediction, path)
    return prediction
