"""`speculab predict EXPERIMENT.yaml [--output DIR] [--dry-run]`: the probes run (OUT/probes, an A/B run directory
with its own report), then the prediction from them written to OUT/prediction.json and shown.

--dry-run prints the probes and what they cost (requests, and a duration timed on the baseline as `run --dry-run`
does) beside what a fixed K x load sweep of the same candidates would send, and writes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from speculab.commands.predict.from_report import predict_from_report
from speculab.commands.predict.probes import (
    ProbePlan,
    acceptance_experiment,
    candidate_name,
    cost_experiment,
    plan_probes,
)
from speculab.commands.predict.schedule import engine_schedule
from speculab.commands.run.plan import RunPlan, plan_experiment
from speculab.commands.run.preflight import dry_run_interruptible, dry_run_lines
from speculab.commands.run.recommended import engine_release
from speculab.commands.run.run import RunScreen, default_run_dir, run_and_report
from speculab.config import Experiment, load_experiment
from speculab.errors import EndpointError, ErrorRateExceeded
from speculab.harness.gates.asked import report_options
from speculab.harness.results.ab_dir import check_ab_output_dir, load_inputs
from speculab.harness.results.ab_run import ABRun
from speculab.harness.results.strict_json import dumps
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.search.predict import EngineForm, Prediction
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report

PREDICTION_FILE = "prediction.json"
PROBES_DIR = "probes"
ACCEPTANCE_DIR, COST_DIR = "acceptance", "cost"  # the two phases' A/B runs, under PROBES_DIR


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
    check_k: bool = False  # `--check-k`: each candidate's cost also at a second k, to check the cost's linearity in k


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
                "forced": list(probes.forced),
                "checked": [{"name": name, "k": k} for name, k in probes.checked],
            },
        )
    ]


def _measured_rates(report: Report) -> dict[str, tuple[float, ...]]:
    """Each candidate's unconditional acceptance per position at the acceptance phase's load, by name: the rates its
    cost probes are forced to."""
    lv = min(report.levels, key=lambda x: x.value) if report.levels else None
    out = {}
    for c in report.candidates:
        a = lv.arm(c.name) if lv is not None else None
        if a is not None and a.acceptance_positions is not None:
            out[c.name] = tuple(r.unconditional for r in a.acceptance_positions.positions)
    return out


def _spelt(prediction: Prediction, exp: Experiment, report: Report) -> Prediction:
    """Each candidate's k schedule in its engine's words (launch mode; a URL arm has no command to add flags to)."""
    if exp.baseline.launch is None:
        return prediction
    engine, version = engine_release(report)
    specs = {candidate_name(sp): sp for sp in exp.speculations}
    cands = []
    for c in prediction.candidates:
        said = engine_schedule(specs[c.name], c.schedule, engine, version) if c.name in specs else None
        form = EngineForm(said.form, said.flags) if said is not None else None
        cands.append(replace(c, engine_form=form))
    return replace(prediction, candidates=tuple(cands))


class ProbeRunner(Protocol):
    """Runs one phase's probes: the A/B run's inputs as saved, or None when it was interrupted."""

    def __call__(self, plan: RunPlan, out: Path, screen: RunScreen) -> ABRun | None: ...


def run_probe(plan: RunPlan, out: Path, screen: RunScreen) -> ABRun | None:
    """A phase's probes with `run`'s machinery (its own summary.json and report.html under `out`)."""
    if run_and_report(plan, out, screen, report_options(allow_python_checks=False)).interrupted:
        return None
    return load_inputs(out)


@dataclass(frozen=True, slots=True)
class PredictOutcome:
    """What predict made: its prediction, or None where a probe run was interrupted (Ctrl-C: what it measured is on
    disk under OUT/probes, and the CLI exits 130 as `run` does)."""

    prediction: Prediction | None
    interrupted: bool = False


def predict_command(
    flags: PredictFlags, screen: PredictScreen, runner: ProbeRunner = run_probe
) -> PredictOutcome | None:
    """Plan the probes, run them (acceptance, then cost at the rates measured), predict; None for --dry-run.
    `runner`: the probes' A/B runs (tests pass a fake engine's)."""
    exp = load_experiment(flags.experiment)
    out = flags.output or default_run_dir(f"{flags.experiment.stem}-predict")

    def planned(e: Experiment) -> RunPlan:
        on_change = screen.change if e is first else None
        return plan_experiment(
            e, allow_extra_diff=flags.allow_extra_diff, on_change=on_change, max_model_len=flags.max_model_len
        )

    first = acceptance_experiment(exp)
    plan = planned(first)
    probes = plan_probes(exp, len(plan.setup.items), flags.check_k)
    for line in _plan_lines(probes):
        screen.line(line)
    if flags.dry_run:  # the cost phase's size is the acceptance phase's at two loads: the plan line says both
        for line in dry_run_lines(dry_run_interruptible(plan)):
            screen.line(line)
        return None
    started = time.perf_counter()

    def probe(phase: str, e: Experiment) -> tuple[Report, ABRun] | None:
        phase_out = out / PROBES_DIR / phase
        check_ab_output_dir(phase_out)
        inputs = runner(planned(e), phase_out, screen)
        return (build_report(inputs), inputs) if inputs is not None else None

    accepted = probe(ACCEPTANCE_DIR, first)
    if accepted is None:
        return PredictOutcome(None, interrupted=True)
    rates = _measured_rates(accepted[0])
    forced, unforced = cost_experiment(exp, rates, flags.check_k), cost_experiment(exp, {}, flags.check_k)
    said: list[ReportWarning] = []  # what prediction.json records beside its candidates
    try:
        cost = probe(COST_DIR, forced)
    except (EndpointError, ErrorRateExceeded) as e:
        if forced.speculations == unforced.speculations:
            raise  # nothing was forced: the failure is the engine's own, as in any run
        # the engine has the knob but this build refused it (vLLM 0.32's CPU build: "Synthetic acceptance not
        # supported with CPU sampling", its engine dies): the cost probed again at real acceptance, and said so
        refused = ReportWarning(WarningKind.PREDICT_FORCING_REFUSED, fields={"error": str(e).splitlines()[0][:300]})
        screen.line(refused)
        said.append(refused)
        cost = probe(COST_DIR + "-unforced", unforced)
    if cost is None:
        return PredictOutcome(None, interrupted=True)
    parts = [accepted, cost]
    prediction = predict_from_report(
        parts,
        probes.low,
        probes.high,
        np.random.default_rng(flags.seed),
        requests_sent=probes.requests,
        sweep_requests=probes.sweep_requests,
        probe_wall_s=time.perf_counter() - started,
    )
    prediction = _spelt(prediction, exp, parts[0][0])
    prediction = replace(prediction, warnings=(*said, *prediction.warnings))
    path = out / PREDICTION_FILE
    path.write_text(dumps(prediction.to_dict(), indent=1) + "\n", encoding="utf-8")
    screen.prediction(prediction, path)
    return PredictOutcome(prediction)
