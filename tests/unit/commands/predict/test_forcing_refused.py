"""`speculab predict` on an engine that has the forced-acceptance knob but refuses it (vLLM 0.32's CPU build: its
engine dies at the first step): the cost is probed again at real acceptance (OUT/probes/cost-unforced) and
prediction.json is still written, with the refusal recorded. No server: a fake engine's probe runs
(tests/fakes/ab_inputs.py) stand in for `run`'s machinery."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.commands.predict.predict import PredictFlags, predict_command
from speculab.commands.run.plan import RunPlan
from speculab.errors import EndpointError
from speculab.harness.results.ab_run import ABRun
from speculab.harness.results.warnings import ReportWarning, WarningKind

EXPERIMENT = """
workload: {spec: "synthetic:input=10,output=17", num_prompts: 24}
loads: {low: {concurrency: 1}, operating: {concurrency: 8}}
baseline:
  launch: {engine: vllm, command: [serve, --port, "8000"], port: 8000}
speculation: {method: ngram, num_speculative_tokens: 4}
"""
REFUSAL = "Synthetic acceptance not supported with CPU sampling"


class RefusingEngine:
    """Each phase's A/B run as the fake engine gives it: the candidate faster at one stream than at eight, with
    per-position acceptance; a server started forcing acceptance dies before any answer, as the run reports it."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, tuple[str, ...]]] = []  # (phase directory, the arms started forcing)

    def __call__(self, plan: RunPlan, out: Path, screen) -> ABRun:
        forced = tuple(a.info.name for a in plan.arms if a.info.forced_acceptance)
        self.ran.append((out.name, forced))
        out.mkdir(parents=True)  # the run's own directory, as `run` makes it (a failed run leaves it)
        if forced:
            raise EndpointError(f"{REFUSAL}\n(the engine's traceback follows)")
        return fake_run(plan)


def fake_run(plan: RunPlan) -> ABRun:
    """The plan's levels run on the fake engine, each arm recorded as started (forcing acceptance or not); with
    `--check-k`, the candidate at k = 2 too (`ngram-k4-at-k2`)."""
    speedup = {"c1": 1 / 1.6, "c3": 1 / 1.3, "c8": 1 / 0.95}
    candidate = ArmEffect(tpot_factor=speedup, tokens_per_chunk=3, acceptance_length=2.6, k=4)
    run = make_inputs(n_prompts=24, repeats=1, levels=plan.setup.levels, candidates={"ngram-k4": candidate})
    if any(a.info.name == "ngram-k4-at-k2" for a in plan.arms):
        half = ArmEffect(tpot_factor={k: 1.2 * v for k, v in speedup.items()}, acceptance_length=2.0, k=2)
        two = make_inputs(n_prompts=24, repeats=1, levels=plan.setup.levels, candidates={"ngram-k2": half})
        arm = replace(two.arms[1], name="ngram-k4-at-k2")
        runs = tuple(replace(r, arm="ngram-k4-at-k2") for r in two.runs if r.arm == "ngram-k2")
        run = replace(run, arms=(*run.arms, arm), runs=(*run.runs, *runs))
    started = {a.info.name: a.info.forced_acceptance for a in plan.arms}
    return replace(run, arms=tuple(replace(a, forced_acceptance=started[a.name]) for a in run.arms))


class TakingEngine(RefusingEngine):
    """The same engine, taking the knob."""

    def __call__(self, plan: RunPlan, out: Path, screen) -> ABRun:
        self.ran.append((out.name, tuple(a.info.name for a in plan.arms if a.info.forced_acceptance)))
        out.mkdir(parents=True)
        return fake_run(plan)


class Screen:
    def __init__(self) -> None:
        self.lines: list[str | ReportWarning] = []
        self.shown = None

    def change(self, change) -> None:
        pass

    def line(self, text) -> None:
        self.lines.append(text)

    def prediction(self, prediction, path: Path) -> None:
        self.shown = (prediction, path)


def test_a_refused_knob_probes_the_cost_unforced_and_still_writes_the_prediction(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT, encoding="utf-8")
    engine, screen = RefusingEngine(), Screen()
    outcome = predict_command(PredictFlags(exp, tmp_path / "p"), screen, runner=engine)
    # acceptance at the low end; the cost phase forced, refused; the cost again with nothing forced
    assert engine.ran == [("acceptance", ()), ("cost", ("ngram-k4",)), ("cost-unforced", ())]
    assert outcome is not None and outcome.prediction is not None
    refused = [w for w in screen.lines if isinstance(w, ReportWarning)]
    assert [w.kind for w in refused] == [WarningKind.PREDICT_PLAN, WarningKind.PREDICT_FORCING_REFUSED]
    assert refused[1].fields == {"error": REFUSAL}  # the error's first line, as the CLI words it
    saved = json.loads((tmp_path / "p" / "prediction.json").read_text(encoding="utf-8"))
    assert saved["warnings"] == [refused[1].to_dict()]  # recorded with the prediction, not only on the screen
    assert [c["k"] for c in saved["candidates"]] == [1, 2, 3, 4]
    (model,) = saved["models"]
    probes = model["cost_fit"]["probes"]
    assert probes and not any(p["forced"] for p in probes)  # from the unforced cost probes: real acceptance
    assert screen.shown is not None and screen.shown[0].warnings == (refused[1],)


def test_an_engine_that_takes_the_knob_records_no_warning(tmp_path: Path) -> None:
    """The same engine without the refusal: the forced cost phase is the cost, and prediction.json says nothing."""

    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT, encoding="utf-8")
    engine = TakingEngine()
    predict_command(PredictFlags(exp, tmp_path / "p"), Screen(), runner=engine)
    assert engine.ran == [("acceptance", ()), ("cost", ("ngram-k4",))]
    saved = json.loads((tmp_path / "p" / "prediction.json").read_text(encoding="utf-8"))
    assert saved["warnings"] == []
    forced = [p["forced"] for p in saved["models"][0]["cost_fit"]["probes"]]
    assert any(forced) and not all(forced)  # the cost phase's forced, the acceptance phase's not


def test_check_k_holds_the_cost_fit_against_the_candidate_at_a_second_k(tmp_path: Path) -> None:
    """`predict --check-k`: the cost phase runs ngram k=4 at k=2 too, forced to its first two rates; those probes
    are held out of the fit and prediction.json `models[].width_check` holds them against it."""

    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT, encoding="utf-8")
    engine = TakingEngine()
    predict_command(PredictFlags(exp, tmp_path / "p", check_k=True), Screen(), runner=engine)
    assert engine.ran == [("acceptance", ()), ("cost", ("ngram-k4", "ngram-k4-at-k2"))]
    (model,) = json.loads((tmp_path / "p" / "prediction.json").read_text(encoding="utf-8"))["models"]
    check = model["width_check"]
    # one probe at each of the cost phase's loads (3 and 8 streams), at the batch the requests saw there
    assert (
        check["k"] == 2
        and len(check["probes"]) == 2
        and 2 < check["probes"][0]["batch"] <= 3 < 6 < check["probes"][1]["batch"] <= 8
    )
    assert all(p["low_s"] <= p["predicted_s"] <= p["high_s"] for p in check["probes"])
    assert isinstance(check["linear"], bool)
    assert all(p["k"] in (0, 4) for p in model["cost_fit"]["probes"])  # held out of the fit
