"""What-if: the speedup speculation would give at other draft lengths k, from measured acceptance and step cost.

Model (Leviathan, Kalman & Matias 2023, "Fast inference from transformers via speculative decoding"): one
speculative step drafts k tokens at a cost of c target-steps each and verifies them in one target step, so it
costs (k*c + 1) plain steps and emits E[tokens | k] tokens (accepted prefix + the target's own token). Speedup in
TPOT over plain decoding is E[tokens | k] / (k*c + 1). With i.i.d. per-token acceptance alpha,
E[tokens | k] = (1 - alpha^(k+1)) / (1 - alpha).

We do better than i.i.d. where we can: engines count, per draft position j, how often the first j+1 drafted tokens
were all accepted (vLLM/speculab `..._accepted_tokens_per_pos_total{position=j}` / drafts). Acceptance is
prefix-wise, so for any k up to the measured k, E[tokens | k] = 1 + sum_{j<k} P(position j accepted) exactly --
assuming a proposer asked for fewer tokens drafts the same first ones, which holds for n-gram lookup and greedy
draft models. Beyond the measured k we extend with the geometric model: each further position multiplies the last
measured rate by alpha, where alpha is the i.i.d. rate that reproduces the measured mean acceptance length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import scipy

from speculab.harness.results.warnings import ReportWarning, WarningKind

K_RANGE = tuple(range(1, 9))


@dataclass(frozen=True, slots=True)
class AcceptanceProfile:
    """Per-position acceptance: per_position[j] = P(the first j+1 drafted tokens were all accepted)."""

    per_position: tuple[float, ...]
    alpha: float  # i.i.d. per-token acceptance that reproduces sum(per_position) at k = len(per_position)
    source: str  # "per-position counters", "totals (geometric model)", "assumed alpha"

    @property
    def k_measured(self) -> int:
        return len(self.per_position)

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens per speculative step at the measured k, bonus token included (vLLM's definition)."""
        return 1.0 + sum(self.per_position)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mean_acceptance_length"] = self.mean_acceptance_length
        return d


def geometric_expected_tokens(alpha: float, k: int) -> float:
    """(1 - alpha^(k+1)) / (1 - alpha): expected tokens per step with i.i.d. acceptance alpha and k drafts."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha={alpha} outside [0, 1]")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def fit_alpha(mean_accepted: float, k: int) -> float:
    """The alpha with alpha + alpha^2 + ... + alpha^k = mean_accepted (accepted drafts per step, bonus excluded)."""
    if k < 1:
        raise ValueError("k must be >= 1")
    if not 0.0 <= mean_accepted <= k:
        raise ValueError(f"mean accepted tokens per step {mean_accepted} outside [0, {k}]")
    if mean_accepted == 0.0:
        return 0.0
    if mean_accepted == k:
        return 1.0
    return float(scipy.optimize.brentq(lambda a: geometric_expected_tokens(a, k) - 1.0 - mean_accepted, 0.0, 1.0))


def profile_from_per_position(rates: Sequence[float]) -> AcceptanceProfile:
    """From per-position acceptance rates (accepted_per_pos[j] / drafts); must lie in [0, 1] and not increase."""
    if not rates:
        raise ValueError("no per-position acceptance rates")
    for j, r in enumerate(rates):
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"acceptance at position {j} is {r}, outside [0, 1]")
        # Counters are exact, but scrapes of several engine processes can be off by one step: allow 1e-3.
        if j and r > rates[j - 1] + 1e-3:
            raise ValueError(f"acceptance rises from position {j - 1} ({rates[j - 1]}) to {j} ({r}): not prefix-wise")
    clipped = tuple(min(r, min(rates[: j + 1])) for j, r in enumerate(rates))
    return AcceptanceProfile(clipped, fit_alpha(sum(clipped), len(clipped)), "per-position counters")


def profile_from_counters(num_drafts: float, accepted_per_pos: Sequence[float]) -> AcceptanceProfile:
    """From counter deltas: drafts (verification steps) and accepted tokens at each draft position."""
    if num_drafts <= 0:
        raise ValueError("no drafts were made: speculation was not active")
    return profile_from_per_position([a / num_drafts for a in accepted_per_pos])


def profile_from_totals(num_drafts: float, num_accepted: float, k: int) -> AcceptanceProfile:
    """From totals only (e.g. llama.cpp timings.draft_n_accepted): the geometric model at every position."""
    if num_drafts <= 0:
        raise ValueError("no drafts were made: speculation was not active")
    alpha = fit_alpha(num_accepted / num_drafts, k)
    return AcceptanceProfile(tuple(alpha ** (j + 1) for j in range(k)), alpha, "totals (geometric model)")


def profile_from_alpha(alpha: float, k: int) -> AcceptanceProfile:
    """An assumed i.i.d. acceptance, e.g. for planning before any measurement."""
    return AcceptanceProfile(tuple(alpha ** (j + 1) for j in range(k)), alpha, "assumed alpha")


def expected_tokens(profile: AcceptanceProfile, k: int) -> float:
    """E[tokens per step | k drafts]: exact from per-position rates for k <= k_measured, geometric tail beyond."""
    if k < 0:
        raise ValueError("k must be >= 0")
    rates = profile.per_position
    if k <= len(rates):
        return 1.0 + sum(rates[:k])
    last = rates[-1]
    tail = sum(last * profile.alpha**m for m in range(1, k - len(rates) + 1))
    return 1.0 + sum(rates) + tail


def step_cost_from_speedup(observed_speedup: float, tokens_per_step: float, k: int) -> float:
    """Solve speedup = E / (k*c + 1) for c: the effective cost of one drafted token in target steps.

    Fitted this way, c also absorbs the verification step's extra cost over a plain step (k+1 positions through
    the target instead of 1) and scheduler overhead; it assumes that cost grows linearly in k.
    """
    if observed_speedup <= 0 or k < 1:
        raise ValueError("need a positive observed speedup and k >= 1")
    return (tokens_per_step / observed_speedup - 1.0) / k


def step_cost_from_times(draft_token_s: float, target_step_s: float) -> float:
    """c from engine-measured times: seconds to draft one token / seconds of one plain target step."""
    if target_step_s <= 0 or draft_token_s < 0:
        raise ValueError("step times must be positive")
    return draft_token_s / target_step_s


@dataclass(frozen=True, slots=True)
class KPrediction:
    k: int
    expected_tokens: float  # per speculative step, bonus token included
    speedup: float  # predicted TPOT speedup over plain decoding
    model: str  # "measured per-position" (k <= measured) or "geometric extrapolation"


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Predicted speedup for each k, the recommendation, and how it compares to what was observed."""

    profile: AcceptanceProfile
    step_cost: float  # c
    step_cost_source: str  # "fitted to observed speedup" or "engine step times" or "assumed"
    predictions: tuple[KPrediction, ...]
    recommended_k: int  # 0 = speculation is not predicted to pay at any k
    observed_k: int | None = None
    observed_speedup: float | None = None
    predicted_at_observed_k: float | None = None
    notes: tuple[ReportWarning, ...] = field(default=())  # step_cost_clipped, step_cost_fitted: worded by the report

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["profile"] = self.profile.to_dict()
        d["notes"] = [n.to_dict() for n in self.notes]
        return d


def what_if(
    profile: AcceptanceProfile,
    step_cost: float,
    *,
    step_cost_source: str = "assumed",
    ks: Iterable[int] = K_RANGE,
    observed_k: int | None = None,
    observed_speedup: float | None = None,
) -> WhatIf:
    """Speedup E[tokens|k] / (k*c + 1) for each k; recommend the best k (smallest on ties), or 0 if none pays."""
    notes: list[ReportWarning] = []
    c = step_cost
    if c < 0:
        notes.append(ReportWarning(WarningKind.STEP_COST_CLIPPED, fields={"step_cost": c}))
        c = 0.0
    preds = []
    for k in ks:
        e = expected_tokens(profile, k)
        model = "measured per-position" if k <= profile.k_measured else "geometric extrapolation"
        if profile.source != "per-position counters":
            model = "geometric model"
        preds.append(KPrediction(k, e, e / (k * c + 1.0), model))
    best = max(preds, key=lambda p: (round(p.speedup, 9), -p.k))
    recommended = best.k if best.speedup > 1.0 else 0
    at_obs = None
    if observed_k is not None:
        at_obs = expected_tokens(profile, observed_k) / (observed_k * c + 1.0)
        if step_cost_source == "fitted to observed speedup":
            notes.append(ReportWarning(WarningKind.STEP_COST_FITTED))
    return WhatIf(
        profile, c, step_cost_source, tuple(preds), recommended, observed_k, observed_speedup, at_obs, tuple(notes)
    )


def what_if_from_observation(
    profile: AcceptanceProfile, observed_speedup: float, *, ks: Iterable[int] = K_RANGE
) -> WhatIf:
    """Fit c to the observed speedup at the measured k, then predict the other k."""
    k = profile.k_measured
    c = step_cost_from_speedup(observed_speedup, profile.mean_acceptance_length, k)
    return what_if(
        profile,
        c,
        step_cost_source="fitted to observed speedup",
        ks=ks,
        observed_k=k,
        observed_speedup=observed_speedup,
    )
