"""The margin's four answers (analysis.comparison.margin.decide), how much more data would decide (to_decide), the
launch as the unit (launch_ratio, compare_paired(launch_effects=...)), and the paired pass-rate difference behind the
correctness non-inferiority test (stats.paired_difference)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speculab.harness.analysis.comparison.margin import Decision, decide, to_decide
from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES, compare_paired, launch_effect, launch_ratio
from speculab.harness.stats import paired_difference


@pytest.mark.parametrize(
    ("low", "high", "answer"),
    [
        (1.05, 1.20, Decision.FASTER),  # all beyond +3 %
        (0.80, 0.95, Decision.SLOWER),  # all beyond 1 / 1.03
        (0.99, 1.02, Decision.EQUIVALENT),  # within +-3 %
        (1.001, 1.008, Decision.EQUIVALENT),  # clearly faster, but by less than the margin: not "faster"
        (1.01, 1.05, Decision.INCONCLUSIVE),  # faster, but not clearly beyond the margin
        (0.95, 1.01, Decision.INCONCLUSIVE),
        (0.90, 1.10, Decision.INCONCLUSIVE),  # straddles both margins
        (float("nan"), 1.1, Decision.INSUFFICIENT),
    ],
)
def test_four_answers_from_one_interval(low: float, high: float, answer: Decision):
    assert decide(low, high, 0.03) is answer


def test_the_margin_is_symmetric_on_the_log_scale():
    # 1 / 1.03 = 0.9709: a candidate 3 % slower in rate terms sits exactly on the lower margin
    assert decide(0.971, 1.0, 0.03) is Decision.EQUIVALENT
    assert decide(0.970, 1.0, 0.03) is Decision.INCONCLUSIVE
    assert decide(1.0, 1.03, 0.03) is Decision.EQUIVALENT and decide(1.0, 1.0301, 0.03) is Decision.INCONCLUSIVE
    assert decide(0.999, 1.001, 0.0) is Decision.INCONCLUSIVE  # margin 0: only "detectably different" decides


def test_to_decide_grows_as_the_estimate_nears_the_margin():
    far = to_decide(1.10, 1.02, 1.18, 0.03, 0.95)
    near = to_decide(1.05, 0.98, 1.12, 0.03, 0.95)
    assert 1 < far < near
    assert to_decide(1.03, 0.98, 1.08, 0.03, 0.95) == math.inf  # the estimate on the margin: nothing decides it
    assert math.isnan(to_decide(1.03, math.nan, 1.08, 0.03, 0.95))


def test_to_decide_predicts_the_units_that_decide_about_as_often_as_its_power():
    """Data whose interval straddles the margin; `to_decide` says k x the units; k x units from the same
    distribution decide (faster beyond the margin) in about 80 % of fresh samples (the power it is computed for)."""
    sd, effect, n = 0.04, math.log(1.06), 24  # per-prompt log-ratio noise 4 %, true speedup 6 %, 24 prompts

    def run(n_units: int, seed: int) -> tuple[Decision, float]:
        r = np.random.default_rng(seed)
        base = {i: 1.0 for i in range(n_units)}
        cand = {i: math.exp(-(effect + sd * r.standard_normal())) for i in range(n_units)}  # TPOT lower = faster
        c = compare_paired("tpot_s", cand, base, r, n_resamples=50, margin=0.03)
        return c.decision, c.to_decide

    factors = []
    for seed in range(40):
        d, k = run(n, seed)
        if d is Decision.INCONCLUSIVE and math.isfinite(k):
            factors.append(k)
    assert factors, "some small runs must be inconclusive"
    k = float(np.median(factors))
    decided = [run(round(n * k), 1000 + s)[0] is Decision.FASTER for s in range(60)]
    # at least its power: runs that came out inconclusive had estimates nearer the margin than the truth, so the
    # prediction from them is on the safe side, not an overpromise
    assert 1 < k < 10 and np.mean(decided) >= 0.8, (k, np.mean(decided))


def test_the_launch_is_the_unit_from_min_launches_on():
    rng = np.random.default_rng(1)
    base = {i: 1.0 for i in range(24)}
    cand = {i: math.exp(0.001 * rng.standard_normal()) for i in range(24)}  # prompts agree to 0.1 %
    prompt_only = compare_paired("tpot_s", cand, base, rng, n_resamples=50)
    assert prompt_only.launch_ratio is None and prompt_only.launches == 1
    two = compare_paired("tpot_s", cand, base, rng, n_resamples=50, launch_effects=[0.02, -0.02])
    assert two.launch_ratio is None and two.launches == 2  # too few to estimate launch variance: counted, unused
    effects = [0.02, -0.015, 0.01, -0.02]  # launches differ by ~2 %
    c = compare_paired("tpot_s", cand, base, rng, n_resamples=50, launch_effects=effects)
    assert len(effects) >= MIN_LAUNCHES and c.launches == 4 and c.verdict_basis == "launch_ratio"
    assert c.launch_ratio == launch_ratio(effects)
    lo, hi = c.speedup_interval
    assert lo < 0.99 and hi > 1.01  # the launches' spread, not the prompts' 0.1 %
    assert c.decision is Decision.INCONCLUSIVE  # +-2 % launches do not fit in a +-3 % margin with 4 of them
    assert prompt_only.decision is Decision.EQUIVALENT  # the prompts alone would have said equivalent
    assert c.to_dict()["verdict_basis"] == "launch_ratio" and c.to_dict()["launches"] == 4


def test_launch_effect_is_the_hodges_lehmann_log_ratio_of_one_launch_pair():
    base = {i: 1.0 for i in range(10)}
    cand = {i: 0.9 for i in range(10)}
    assert launch_effect(cand, base) == pytest.approx(math.log(0.9))
    assert launch_effect({0: 1.0}, {0: 1.0}) is None


def test_launches_as_units_hold_the_false_positive_rate_when_launches_differ():
    """Prompts nested in launches: each launch shifts all its prompts by a shared N(0, 1 %) effect. Counting
    prompts calls identical arms different far more often than 5 %; counting 4 launch pairs does not."""
    n_sims, n_prompts, launches = 200, 24, 4
    prompt_fp = launch_fp = 0
    for s in range(n_sims):
        r = np.random.default_rng([7, s])
        shared = 0.01 * r.standard_normal(launches)  # launch-pair effects (the difference of two launches)
        per_launch = []
        pooled = {i: [] for i in range(n_prompts)}
        for j in range(launches):
            logs = shared[j] + 0.002 * r.standard_normal(n_prompts)
            per_launch.append(float(np.median(logs)))
            for i in range(n_prompts):
                pooled[i].append(logs[i])
        cand = {i: math.exp(float(np.median(v))) for i, v in pooled.items()}
        base = dict.fromkeys(range(n_prompts), 1.0)
        prompt_fp += compare_paired("tpot_s", cand, base, r, n_resamples=20).verdict.value != "no detectable difference"
        c = compare_paired("tpot_s", cand, base, r, n_resamples=20, launch_effects=per_launch)
        launch_fp += c.verdict.value != "no detectable difference"
    assert prompt_fp / n_sims > 0.3  # the prompts' interval ignores what they share
    assert launch_fp / n_sims <= 0.1  # nominal 5 %; 200 runs: binomial sd 1.5 points


def test_paired_difference_counts_discordant_pairs():
    cand = {i: i < 18 for i in range(20)}  # 18 of 20 pass
    base = {i: i < 20 for i in range(20)}  # 20 of 20 pass: the candidate fails 2 the baseline passed
    d = paired_difference(cand, base, 0.90)
    assert d.estimate == pytest.approx(-0.10) and d.n == 20 and d.method == "agresti-min"
    assert d.low < -0.10 < d.high <= 0.0 + 1e-9 or d.high > -0.10
    same = paired_difference(base, base, 0.90)
    assert same.estimate == 0 and same.low < 0 < same.high  # no discordant pairs: an interval around 0, not a point
    assert math.isnan(paired_difference({}, {}).estimate)


def test_paired_difference_covers_about_its_level():
    """Coverage of the Agresti-Min interval at n = 40 with correlated pass/fail (90 % two-sided)."""
    hits, sims = 0, 400
    for s in range(sims):
        r = np.random.default_rng([3, s])
        ability = r.uniform(size=40)  # per prompt: how easy it is (the pairing)
        base = {i: bool(ability[i] > 0.2) for i in range(40)}
        cand = {i: bool(ability[i] + 0.05 * r.standard_normal() > 0.25) for i in range(40)}
        truth = -0.05  # P(ability + noise > 0.25) - P(ability > 0.2) ~ -0.05
        d = paired_difference(cand, base, 0.90)
        hits += d.low <= truth <= d.high
    assert 0.82 <= hits / sims <= 0.98
