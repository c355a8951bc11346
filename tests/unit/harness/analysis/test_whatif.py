"""What-if predictions against closed forms with known alpha and c."""

from __future__ import annotations

import pytest

from speculab.harness.analysis.whatif import (
    expected_tokens,
    fit_alpha,
    geometric_expected_tokens,
    profile_from_alpha,
    profile_from_counters,
    profile_from_per_position,
    profile_from_totals,
    step_cost_from_speedup,
    step_cost_from_times,
    what_if,
    what_if_from_observation,
)
from speculab.harness.results.warnings import WarningKind
from speculab.report.phrases import warning_text


def test_geometric_expected_tokens_closed_form():
    assert geometric_expected_tokens(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)
    assert geometric_expected_tokens(0.0, 5) == 1.0
    assert geometric_expected_tokens(1.0, 5) == 6.0
    with pytest.raises(ValueError):
        geometric_expected_tokens(1.2, 3)


def test_fit_alpha_inverts_the_geometric_mean():
    for alpha in (0.1, 0.5, 0.9):
        mean_accepted = geometric_expected_tokens(alpha, 5) - 1
        assert fit_alpha(mean_accepted, 5) == pytest.approx(alpha, abs=1e-9)
    assert fit_alpha(0.0, 4) == 0.0 and fit_alpha(4.0, 4) == 1.0


def test_known_alpha_and_c_give_leviathan_speedups():
    alpha, c = 0.8, 0.05
    w = what_if(profile_from_alpha(alpha, 8), c)
    for p in w.predictions:
        assert p.speedup == pytest.approx(geometric_expected_tokens(alpha, p.k) / (p.k * c + 1))
    # k=7: 4.161/1.35 = 3.082; k=8: 4.329/1.40 = 3.092 -> 8 (still rising at the edge of 1..8)
    assert w.recommended_k == 8
    assert w.predictions[7].speedup == pytest.approx(3.0922, abs=1e-3)
    # With costlier drafts the optimum moves down: c = 0.2 -> k=4: 3.3616/1.8 = 1.8676 beats k=3 (1.845), k=5 (1.845)
    assert what_if(profile_from_alpha(alpha, 8), 0.2).recommended_k == 4


def test_expensive_drafts_recommend_no_speculation():
    w = what_if(profile_from_alpha(0.3, 4), 1.0)
    assert all(p.speedup < 1 for p in w.predictions)
    assert w.recommended_k == 0


def test_per_position_rates_are_used_exactly_then_extended_geometrically():
    # Non-geometric acceptance: position 0 easy, later ones hard.
    prof = profile_from_per_position([0.9, 0.5, 0.3, 0.2])
    assert expected_tokens(prof, 2) == pytest.approx(1 + 0.9 + 0.5)
    assert expected_tokens(prof, 4) == pytest.approx(2.9) == prof.mean_acceptance_length
    a = prof.alpha
    assert geometric_expected_tokens(a, 4) == pytest.approx(2.9)  # alpha reproduces the measured mean length
    assert expected_tokens(prof, 6) == pytest.approx(2.9 + 0.2 * a + 0.2 * a * a)
    w = what_if(prof, 0.0)
    assert [p.model for p in w.predictions[3:5]] == ["measured per-position", "geometric extrapolation"]


def test_profiles_from_engine_counters_and_totals():
    prof = profile_from_counters(100, [80, 60, 30])
    assert prof.per_position == (0.8, 0.6, 0.3)
    tot = profile_from_totals(num_drafts=100, num_accepted=170, k=3)
    assert tot.mean_acceptance_length == pytest.approx(2.7)
    with pytest.raises(ValueError, match="not active"):
        profile_from_counters(0, [0, 0])
    with pytest.raises(ValueError, match="not prefix-wise"):
        profile_from_per_position([0.5, 0.7])


def test_step_cost_fitted_from_observation_reproduces_the_observed_speedup():
    alpha, c, k = 0.7, 0.1, 4
    e = geometric_expected_tokens(alpha, k)
    observed = e / (k * c + 1)
    assert step_cost_from_speedup(observed, e, k) == pytest.approx(c)
    w = what_if_from_observation(profile_from_alpha(alpha, k), observed)
    assert w.step_cost == pytest.approx(c)
    assert w.predicted_at_observed_k == pytest.approx(observed)
    assert [n.kind for n in w.notes] == [WarningKind.STEP_COST_FITTED]
    assert "fitted to the observed speedup" in warning_text(w.notes[0])
    assert w.to_dict()["profile"]["alpha"] == pytest.approx(alpha)
    assert w.to_dict()["notes"] == [{"kind": "step_cost_fitted", "subject": "", "load": "", "fields": {}}]


def test_step_cost_from_engine_times_and_negative_fit_is_clipped():
    assert step_cost_from_times(0.002, 0.020) == pytest.approx(0.1)
    w = what_if(profile_from_alpha(0.5, 3), -0.2, step_cost_source="fitted to observed speedup")
    assert w.step_cost == 0.0 and w.notes[0].kind == WarningKind.STEP_COST_CLIPPED
    assert w.notes[0].fields["step_cost"] == -0.2
    assert warning_text(w.notes[0]).startswith("step cost fitted as -0.200 < 0 (speedup above the model's bound)")
