"""Energy per output token (issue 40), from power samples injected into the runs (no GPU here): per arm with an
interval over repeats, tokens per joule, a paired candidate/baseline ratio, the energy cost at a price per kWh; none
of it without samples."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.analysis.energy import energy_usd_per_mtok, mean_power_w
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import load_inputs, save_inputs
from speculab.harness.results.ab_run import ABRun
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions

FAST = ReportOptions(n_resamples=300)
ONE_LOAD = (LevelSpec("concurrency", 1, ("low", "sweep")),)
WATTS = {"baseline": (300.0, 310.0, 305.0), "ngram-k4": (350.0, 362.0, 340.0)}  # per repeat


def _inputs(repeats: int = 3) -> ABRun:
    cand = {"ngram-k4": ArmEffect(tpot_factor={"c1": 1 / 1.8}, acceptance_length=2.6)}
    return make_inputs(n_prompts=24, repeats=repeats, levels=ONE_LOAD, candidates=cand)


def _powered(inputs: ABRun) -> ABRun:
    """Each repeat's memory samples with the arm's power for that repeat, alternating ±5 W around it."""
    runs = []
    for run in inputs.runs:
        w = WATTS[run.arm][run.repeat - 1]
        mem = tuple(replace(s, gpu_power_w=w + (5 if i % 2 else -5)) for i, s in enumerate(run.memory))
        runs.append(replace(run, memory=mem))
    return inputs.with_runs(runs)


def test_energy_per_token_and_tokens_per_joule_per_arm():
    inputs = _powered(_inputs())
    report = build_report(inputs, FAST)
    lv = report.levels[0]
    for arm in ("baseline", "ngram-k4"):
        a = lv.arm(arm)
        e = a.energy
        tok_s = {rep: x for rep, _, x in a.repeat_tok_s}
        runs = {r.repeat: r for r in inputs.runs if r.arm == arm}
        want = [mean_power_w(runs[j].memory) / tok_s[j] for j in sorted(tok_s)]
        assert e is not None and math.isclose(e.j_per_output_token.estimate, statistics.fmean(want))
        assert e.j_per_output_token.low < e.j_per_output_token.estimate < e.j_per_output_token.high
        assert e.j_per_output_token.n == 3 and e.samples == sum(len(r.memory) for r in runs.values())
        assert math.isclose(e.output_tokens_per_j.estimate, statistics.fmean(1 / x for x in want))
        assert math.isclose(e.mean_power_w, statistics.fmean(WATTS[arm]))
        assert e.usd_per_mtok is None  # no price per kWh given
    # 1.8x the tokens/s at ~1.15x the power: fewer joules per token, paired by repeat
    ratio = lv.comparison("ngram-k4").energy_ratio
    assert ratio is not None and ratio.high < 1 and ratio.n == 3
    b, c = lv.arm("baseline").energy.j_per_output_token.estimate, lv.arm("ngram-k4").energy.j_per_output_token.estimate
    assert 0.9 < ratio.estimate / (c / b) < 1.1  # the paired (geometric) ratio near the ratio of means


def test_energy_cost_at_a_price_per_kwh_and_the_summary_reads_back(tmp_path):
    inputs = _powered(_inputs())
    save_inputs(tmp_path, replace(inputs, setup=replace(inputs.setup, usd_per_kwh=0.12)))
    inputs = load_inputs(tmp_path)  # the price and the power samples as saved on disk
    assert inputs.setup.usd_per_kwh == 0.12 and inputs.runs[0].memory[0].gpu_power_w is not None
    report = build_report(inputs, FAST)
    e = report.levels[0].arm("baseline").energy
    assert e.usd_per_mtok is not None
    assert math.isclose(e.usd_per_mtok.estimate, e.j_per_output_token.estimate * 1e6 / 3.6e6 * 0.12)
    assert energy_usd_per_mtok(3.6, 1.0) == 1.0  # 3.6 J a token: 1 kWh per 1M tokens
    again = Report.from_json(report.to_json())
    assert again.levels[0].arm("baseline").energy == e
    assert again.levels[0].comparison("ngram-k4").energy_ratio == report.levels[0].comparison("ngram-k4").energy_ratio


def test_no_power_samples_no_energy():
    report = build_report(_inputs(repeats=2), FAST)
    lv = report.levels[0]
    assert lv.arm("baseline").energy is None and lv.arm("ngram-k4").energy is None
    assert lv.comparison("ngram-k4").energy_ratio is None
