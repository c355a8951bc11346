"""#36: the report says only what the evidence supports: correctness in true words, intervals that mean something
(withheld below the launches they need, advice a command can follow, one warning per kind), and a headline that
says what its number is."""

from __future__ import annotations

from tests.fakes.ab_inputs import ArmEffect, make_inputs, with_check_failures

from speculab.harness.design import LevelSpec
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.html.sections import correctness_rows
from speculab.report.phrases import verdict_line

FAST = ReportOptions(n_resamples=200)
C1 = (LevelSpec("concurrency", 1, ("low", "operating")),)
TWO = {
    "ngram-k4": ArmEffect(tpot_factor={"c1": 1 / 1.8}, tokens_per_chunk=3, acceptance_length=2.9),
    "draft_model-k4": ArmEffect(tpot_factor={"c1": 1 / 1.4}, tokens_per_chunk=2, acceptance_length=2.2),
}


def _all_checks_fail(n_prompts: int = 36):
    """Every arm, plain included, fails every check (the demo's model fails all 18 of its checks)."""
    inputs = make_inputs(n_prompts=n_prompts, repeats=1, levels=C1, candidates=TWO)
    for arm in ("baseline", *TWO):
        inputs = with_check_failures(inputs, arm, n_prompts)
    return inputs


def test_identical_outputs_failing_checks_on_every_arm_are_not_an_inconclusive_difference():
    report = build_report(_all_checks_fail(), FAST)
    for cand in report.candidates:
        line = verdict_line(report, cand)
        assert "correctness: identical outputs for all 36 prompts" in line
        assert "18 of 18 checks fail on plain as well: the checks, not speculation" in line
        assert "inconclusive against" not in line


def test_the_baseline_failure_list_once_and_truncated_lists_say_how_many_more():
    rows = correctness_rows(build_report(_all_checks_fail(), FAST))
    assert len(rows) == 2
    (base1, cand1), (base2, cand2) = (r["checks"] for r in rows)
    assert base1["arm"] == base2["arm"] == "plain"
    assert len(base1["failures"]) == 11 and base1["failures"][-1] == "and 8 more"  # 10 shown of 18
    assert base2["failures"] == []  # the same list is not repeated under the second candidate
    assert cand1["failures"][-1] == cand2["failures"][-1] == "and 8 more"  # each candidate's own list stays


def test_the_starter_asks_for_the_repeats_its_intervals_need():
    from speculab.commands.init.starter import starter_yaml
    from speculab.config import parse_experiment
    from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES
    from speculab.harness.servers.look import ServerLook

    look = ServerLook("http://10.0.0.5:8000", "vllm", ({"id": "m", "root": "/models/m"},), {"version": "0.32.0"}, ())
    exp = parse_experiment(starter_yaml(look), "starter.yaml")
    assert exp.repeats >= MIN_LAUNCHES == 3


def _tput(report):
    return report.levels[0].comparisons[0].throughput_ratio


def test_a_two_repeat_throughput_interval_is_withheld_with_the_reason():
    from speculab.report.phrases import ratio_phrase

    two = build_report(make_inputs(n_prompts=12, repeats=2, levels=C1), FAST)
    iv = _tput(two)
    assert iv.n == 2 and iv.estimate > 1 and iv.low != iv.low and iv.high != iv.high  # NaN bounds: withheld
    assert ratio_phrase(iv).endswith("(2 paired repeats, too few for an interval, which needs 3)")
    three = _tput(build_report(make_inputs(n_prompts=12, repeats=3, levels=C1), FAST))
    assert three.n == 3 and three.low < three.estimate < three.high and "[" in ratio_phrase(three)


def _few_repeats_line(report) -> str:
    from speculab.harness.results.warnings import WarningKind
    from speculab.report.phrases import warning_text

    (w,) = [w for w in report.warnings if w.kind == WarningKind.FEW_REPEATS]
    return warning_text(w)


def test_the_advice_names_a_setting_of_the_command_that_made_the_run():
    from dataclasses import replace

    inputs = make_inputs(n_prompts=12, repeats=1, levels=C1)
    run = _few_repeats_line(build_report(inputs, FAST))
    assert run.startswith("1 repeat: throughput and cost have no interval") and "set `repeats: 3`" in run
    compared = replace(inputs, setup=replace(inputs.setup, separate_runs=True, two_url_mode=True))
    said = _few_repeats_line(build_report(compared, FAST))
    assert "`repeats:" not in said and "3 or more runs per load on each side" in said  # compare has no `repeats:`
    demo = replace(inputs, setup=replace(inputs.setup, command="demo"))
    assert "the demo runs each arm once" in _few_repeats_line(build_report(demo, FAST))


def test_one_warning_per_kind_however_many_candidates_and_loads_it_is_about():
    from speculab.harness.results.warnings import WarningKind
    from speculab.report.phrases import warning_lines

    wobbly = ArmEffect(launch_sd=0.10)  # launches 10 % apart: both candidates' launch pairs differ beyond the margin
    cands = {name: ArmEffect(acceptance_length=2.0, launch_sd=0.10, tpot_factor=eff.tpot_factor)
             for name, eff in TWO.items()}  # fmt: skip
    levels = (LevelSpec("concurrency", 1, ("low",)), LevelSpec("concurrency", 4, ("operating",)))
    report = build_report(make_inputs(n_prompts=24, repeats=2, levels=levels, baseline=wobbly, candidates=cands,
                                      seed=3), FAST)  # fmt: skip
    spread = [w for w in report.warnings if w.kind == WarningKind.LAUNCH_SPREAD]
    assert len(spread) == 1, report.warnings
    assert len(spread[0].fields["where"]) >= 2  # several candidates or loads, one warning
    lines = warning_lines(report.warnings)
    assert sum("`repeats: 3`" in line for line in lines) <= 2  # at most the spread and the few-repeats warning
    assert sum("launch pairs' TPOT effects differ" in line for line in lines) == 1


def test_prompt_spread_tells_a_split_from_one_effect_with_spread():
    from speculab.harness.verdict.per_request import prompt_spread

    base = {i: 0.010 for i in range(20)}
    split = {i: 0.010 / (1.6 if i % 2 else 0.7) for i in range(20)}  # half 1.6× faster, half 0.7× (slower)
    ps = prompt_spread(base, split, effect=1.05, medians_speedup=1.3, margin=0.03)
    assert ps is not None and (ps.pairs, ps.faster, ps.slower) == (20, 10, 10) and ps.split and ps.differs
    one = {i: 0.010 / (1.5 + 0.01 * i) for i in range(20)}  # every prompt faster, by 1.50×…1.69×
    ps = prompt_spread(base, one, effect=1.595, medians_speedup=1.60, margin=0.03)
    assert ps is not None and (ps.faster, ps.slower) == (20, 0) and not ps.split and not ps.differs
    assert 1.5 < ps.low_quartile < ps.high_quartile < 1.7
    assert prompt_spread(base, one, effect=1.6, medians_speedup=float("nan"), margin=0.03) is None
    assert prompt_spread({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0}, 1.0, 1.0, 0.03) is None  # too few pairs to describe


def _stretched(inputs, arm: str, factors: dict[int, float]):
    """The same inputs with `arm`'s TPOT on prompt i multiplied by factors[i] (its chunks after the first spread
    out in time), every other record as it was."""
    from dataclasses import replace

    def stretch(r, f):
        t0 = r.chunks[0].t_s
        chunks = tuple(replace(c, t_s=t0 + (c.t_s - t0) * f) for c in r.chunks)
        return replace(r, chunks=chunks, end_s=t0 + (r.end_s - t0) * f)

    runs = []
    for run in inputs.runs:
        if run.arm == arm:
            recs = tuple(stretch(r, factors[r.index]) if r.ok and r.index in factors else r for r in run.records)
            run = replace(run, records=recs)
        runs.append(run)
    return inputs.with_runs(runs)


def test_the_headline_says_its_speedup_is_the_per_prompt_effect_and_why_the_medians_differ():
    from speculab.harness.results.warnings import WarningKind
    from speculab.report.phrases import warning_text

    cand = {"ngram-k4": ArmEffect(acceptance_length=2.5)}
    inputs = make_inputs(n_prompts=40, repeats=1, levels=C1, candidates=cand)
    # bimodal: prompts speculation helps (1/1.7 the TPOT) and prompts it hurts (1.4×), as the demo's EAGLE at c=1
    bimodal = _stretched(inputs, "ngram-k4", {i: (1 / 1.7 if i % 3 == 0 else 1.4) for i in range(40)})
    report = build_report(bimodal, FAST)
    line = verdict_line(report, report.candidates[0])
    assert "speedups are per-prompt effects (Hodges–Lehmann)" in line
    comp = report.levels[0].comparisons[0]
    ps, tp = comp.prompt_spread, comp.metric("tpot_s")
    assert ps is not None and ps.split and ps.differs and ps.faster >= 10 and ps.slower >= 20, ps
    (w,) = [w for w in report.warnings if w.kind == WarningKind.EFFECT_NOT_MEDIANS]
    said = warning_text(w)
    assert said.startswith("TPOT speedups are per-prompt effects (Hodges–Lehmann: each prompt against itself)")
    assert (
        f"ngram k=4 at concurrency 1: {tp.speedup:.2f}× per prompt vs {ps.medians_speedup:.2f}× from the p50s" in said
    )
    assert f"(split both ways: {ps.faster} of 40 prompts faster beyond the margin, {ps.slower} slower)" in said
    # one effect on every prompt: the effect and the p50s agree, and nothing is said
    even = build_report(make_inputs(n_prompts=40, repeats=1, levels=C1), FAST)
    assert even.levels[0].comparisons[0].prompt_spread is not None
    assert not [w for w in even.warnings if w.kind == WarningKind.EFFECT_NOT_MEDIANS]
