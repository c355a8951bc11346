"""Speedup = acceptance x cost: predict a candidate's TPOT speedup at every load and K from acceptance measured on the
user's prompts and the engine's step cost measured apart, with a band, the crossover and the best K per load band.

Two measurements of a different nature (issue 49, docs/predict.md):
- **acceptance**: the conditional rate at each draft position (`analysis.acceptance.PositionAcceptance`), measured
  at low load on the user's own prompts; for a chain proposer it does not depend on K, and hardly on load, so the
  tokens a speculative step yields at any k up to the measured K follow: L(k) = 1 + sum_{j<k} prod_{i<=j} c_i.
- **cost**: the time of one engine step against the decode batch b and the draft length k, a property of the engine
  at a load, not of the content. Probes give it: a plain probe's step is its TPOT; a speculative probe's is its TPOT
  x the tokens per step it measured (forced acceptance, where the engine has the knob, fixes that number so that the
  content does not enter). The model is linear: step(b, k) = a + s b + (d + g b) k, k = 0 for plain decoding — a
  step's fixed cost, each request's share of it, and per drafted position a proposal and a verification slot that
  grows with the batch. Ordinary least squares over the probes, with its coefficients' covariance and each probe's
  residual.

The prediction at batch b and k: speedup = step(b, 0) x L(k) / step(b, k) (plain TPOT over speculative TPOT, the
verdict's deciding ratio; at the same concurrency a closed loop's throughput changes by the same factor, prefill
aside). Its band comes from draws: the cost coefficients from their normal approximation, each conditional rate
from its interval's normal approximation (clipped to [0, 1]); the crossover is where a draw's curve first falls to
1 on a grid of loads, its interval the draws' quantiles (a draw that never falls is censored above the range).

What the model assumes and when it fails: batch = concurrency in a closed loop (prefill steps interleaved with
decode make the decode batch smaller, so a load with long prompts reads as a smaller batch); acceptance at load =
acceptance at low load (adaptive proposers change K with load: their acceptance must be measured where they run);
linear cost (at long contexts attention makes the verify cost grow faster than linear, MagicDec: the speedup can
then *grow* with batch, which this model cannot show). The residuals say how far the probes sit from the line.
Pure: the caller passes the probes, the acceptance and the RNG.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy

from speculab.harness.analysis.acceptance import PositionAcceptance
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.stats import CONFIDENCE

FEATURES = ("fixed_s", "per_request_s", "per_draft_s", "per_draft_per_request_s")
N_DRAWS = 2000


@dataclass(frozen=True, slots=True)
class StepProbe:
    """One cost probe: the engine's step time at a decode batch and draft length, from a short run there."""

    k: int  # draft length (0: plain decoding)
    batch: float  # requests decoding together: the achieved concurrency of a closed loop
    step_s: float  # one engine step: TPOT x tokens per step (1 for plain decoding)
    tokens_per_step: float  # what the step time was scaled by (1 for plain; forced or measured for speculation)
    forced: bool  # the probe's acceptance was forced (the engine's knob), not the content's
    requests: int  # requests it measured

    def __post_init__(self) -> None:
        if self.k < 0 or not (self.batch > 0 and self.step_s > 0 and math.isfinite(self.step_s)):
            raise ValueError(f"a step probe needs k >= 0, a positive batch and step time: {self}")


def experienced_batch(
    decoding: Sequence[tuple[float, float]], in_flight: Sequence[tuple[float, float]]
) -> float | None:
    """The mean over requests of the requests in flight while each decoded: for each `decoding` span (its first token
    to its end), the time-average count of `in_flight` spans (sent to end, every request of the window, itself
    included) overlapping it. Why not the closed loop's concurrency: a short probe drains at its end, where its last
    requests decode in a smaller batch. The mean, because the mean TPOT it is paired with is linear in it (the cost
    model is linear in the batch). None without a span of positive length."""
    starts = np.asarray([a for a, _ in in_flight], dtype=float)
    ends = np.asarray([b for _, b in in_flight], dtype=float)
    out = []
    for lo, hi in decoding:
        if not hi > lo:
            continue
        overlap = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0.0, None)
        out.append(float(overlap.sum()) / (hi - lo))
    return float(np.mean(out)) if out else None


@dataclass(frozen=True, slots=True)
class Coefficient:
    name: str  # one of FEATURES
    estimate: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class StepFit:
    """step(b, k) = fixed + per_request b + (per_draft + per_draft_per_request b) k, least squares over the probes.
    `residuals` are each probe's measured minus fitted step time (seconds), in probe order; `dof` the residual degrees
    of freedom (0: as many probes as free coefficients: no interval, NaN bounds)."""

    coefficients: tuple[Coefficient, ...]
    covariance: tuple[tuple[float, ...], ...]
    residuals: tuple[float, ...]
    residual_sd_s: float
    dof: int
    probes: tuple[StepProbe, ...]
    terms: tuple[str, ...]  # the FEATURES the probes could identify (a term with no variation is left out: 0)

    def step_s(self, batch: float, k: int) -> float:
        x = _features(batch, k)
        return float(sum(c.estimate * x[FEATURES.index(c.name)] for c in self.coefficients))


def _features(batch: float, k: int) -> tuple[float, float, float, float]:
    return (1.0, float(batch), float(k), float(batch) * k)


def fit_step_cost(probes: Sequence[StepProbe], confidence: float = CONFIDENCE) -> StepFit:
    """Least squares of step time on (1, b, k, b k). A term the probes cannot identify (every probe at one k: no k
    terms; every speculative probe at one batch: no b k term) is left out and stays 0, and `terms` says which were
    fitted. ValueError below two probes or when nothing can be fitted."""
    if len(probes) < 2:
        raise ValueError(f"the cost model needs at least 2 probes, got {len(probes)}")
    x = np.asarray([_features(p.batch, p.k) for p in probes])
    y = np.asarray([p.step_s for p in probes])
    cols = [0]
    if np.ptp(x[:, 1]) > 0:
        cols.append(1)
    if np.ptp(x[:, 2]) > 0:
        cols.append(2)
        spec = x[:, 2] > 0
        if spec.sum() >= 2 and np.ptp(x[spec, 1]) > 0 and np.linalg.matrix_rank(x[:, [*cols, 3]]) == len(cols) + 1:
            cols.append(3)
    xs = x[:, cols]
    beta, *_ = np.linalg.lstsq(xs, y, rcond=None)
    resid = y - xs @ beta
    dof = len(probes) - len(cols)
    if dof > 0:
        s2 = float(resid @ resid) / dof
        t = float(scipy.special.stdtrit(dof, 0.5 + confidence / 2))
    else:
        s2, t = math.nan, math.nan
    cov_small = s2 * np.linalg.pinv(xs.T @ xs)
    cov = np.zeros((4, 4))
    for i, ci in enumerate(cols):
        for j, cj in enumerate(cols):
            cov[ci, cj] = cov_small[i, j]
    full = np.zeros(4)
    full[cols] = beta
    coefs = []
    for i, name in enumerate(FEATURES):
        half = t * math.sqrt(cov[i, i]) if i in cols and dof > 0 else (math.nan if i in cols else 0.0)
        coefs.append(Coefficient(name, float(full[i]), float(full[i] - half), float(full[i] + half)))
    return StepFit(
        tuple(coefs),
        tuple(tuple(float(v) for v in row) for row in cov),
        tuple(float(r) for r in resid),
        math.sqrt(s2) if dof > 0 else math.nan,
        dof,
        tuple(probes),
        tuple(FEATURES[c] for c in cols),
    )


@dataclass(frozen=True, slots=True)
class HeldOut:
    """One probe the fit was not made on, against the fit: its measured step time and the fit's at its batch and k,
    with the fit's prediction interval there (NaN bounds without residual degrees of freedom)."""

    batch: float
    measured_s: float
    predicted_s: float
    low_s: float
    high_s: float

    @property
    def residual_s(self) -> float:
        return self.measured_s - self.predicted_s

    @property
    def inside(self) -> bool | None:
        """Inside the prediction interval; None without one."""
        if not (math.isfinite(self.low_s) and math.isfinite(self.high_s)):
            return None
        return self.low_s <= self.measured_s <= self.high_s


@dataclass(frozen=True, slots=True)
class WidthCheck:
    """The cost model's linearity in k, checked: probes of the candidate at a second k (`speculab predict --check-k`)
    that the fit was not made on. The model is linear in k (a verify slot per drafted position); a k's step time
    outside the prediction interval says it is not (a verify kernel whose cost jumps at a width, a proposer whose
    cost is not per token), and so the predictions at the k between those measured rest on an untested line."""

    k: int
    probes: tuple[HeldOut, ...]

    @property
    def linear(self) -> bool | None:
        """Every held-out probe inside its interval; None where none has an interval."""
        said = [p.inside for p in self.probes if p.inside is not None]
        return all(said) if said else None


def width_check(fit: StepFit, held_out: Sequence[StepProbe], confidence: float = CONFIDENCE) -> WidthCheck | None:
    """Probes at one k the fit was not made on, against it: each probe's step time beside the fit's at its batch and
    k, with the fit's prediction interval (the line's uncertainty there and one probe's scatter: t sqrt(x'Cx + s^2)).
    None without probes."""
    if not held_out:
        return None
    t = float(scipy.special.stdtrit(fit.dof, 0.5 + confidence / 2)) if fit.dof > 0 else math.nan
    cov = np.asarray(fit.covariance)
    out = []
    for p in held_out:
        x = np.asarray(_features(p.batch, p.k))
        half = t * math.sqrt(float(x @ cov @ x) + fit.residual_sd_s**2) if fit.dof > 0 else math.nan
        pred = fit.step_s(p.batch, p.k)
        out.append(HeldOut(p.batch, p.step_s, pred, pred - half, pred + half))
    return WidthCheck(held_out[0].k, tuple(out))


def tokens_per_step(conditional: Sequence[float], k: int) -> float:
    """L(k) = 1 + sum_{j<k} prod_{i<=j} c_i: the tokens a step yields with k drafts, the target's own included."""
    total, reach = 1.0, 1.0
    for c in conditional[:k]:
        reach *= c
        total += reach
    return total


def _accepted_probabilities(cond: np.ndarray, k: int) -> np.ndarray:
    """[draws, k + 1]: P(a step accepts exactly a drafts), a = 0..k, from conditional rates [draws, >= k]."""
    reach = np.concatenate([np.ones((cond.shape[0], 1)), np.cumprod(cond[:, :k], axis=1)], axis=1)  # P(A >= a)
    probs = reach.copy()
    probs[:, :k] -= reach[:, 1:]
    return probs


def _expected_steps(probs: np.ndarray, tokens: int) -> np.ndarray:
    """[draws]: the expected steps to emit `tokens` tokens when a step emits 1 + accepted of them, the last step cut
    to fit (a renewal count: e(m) = 1 + sum_a P(a) e(m - 1 - a), e(<= 0) = 0)."""
    draws, width = probs.shape
    e = np.zeros((draws, tokens + 1))
    for m in range(1, tokens + 1):
        back = np.maximum(m - 1 - np.arange(width), 0)
        e[:, m] = 1.0 + (probs * e[:, back]).sum(axis=1)
    return e[:, tokens]


MAX_RENEWAL_TOKENS = 4096  # longer outputs: the end effect is below 0.1 %, the plain per-step rate is used


def effective_tokens_per_step(conditional: np.ndarray, k: int, output_tokens: int | None) -> np.ndarray:
    """[draws]: the tokens per step a request of `output_tokens` tokens sees on average, (n - 1) / E[steps for n - 1],
    the first token being the prefill's. Shorter than L(k) because the last step is cut to what is left to emit
    (engines stop at max_tokens or EOS mid-step); the TPOT of such a request is step x E[steps] / (n - 1), so the
    speedup the verdict measures follows this number, not L(k). None (or a long output): L(k) itself."""
    cond = np.atleast_2d(conditional)
    if k == 0:
        return np.ones(cond.shape[0])
    long_run = 1.0 + np.cumprod(cond[:, :k], axis=1).sum(axis=1)
    if output_tokens is None or output_tokens < 2 or output_tokens - 1 > MAX_RENEWAL_TOKENS:
        return long_run
    m = output_tokens - 1
    return m / _expected_steps(_accepted_probabilities(cond, k), m)


@dataclass(frozen=True, slots=True)
class Band:
    estimate: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class CurvePoint:
    load: float
    speedup: Band  # plain TPOT / speculative TPOT (> 1: speculation is faster)


@dataclass(frozen=True, slots=True)
class Crossover:
    """The load where the predicted speedup falls to 1. `estimate` None: the point curve does not cross in the range
    (`above_range`: faster throughout; else slower throughout); `low`/`high` None where the draws reach beyond the
    range on that side."""

    estimate: float | None
    low: float | None
    high: float | None
    above_range: bool


@dataclass(frozen=True, slots=True)
class KPrediction:
    k: int
    tokens_per_step: float  # tokens per step at this k for the workload's output length (L(k) without one)
    curve: tuple[CurvePoint, ...]
    crossover: Crossover


@dataclass(frozen=True, slots=True)
class KBand:
    """Over loads `low`..`high` (inclusive grid points), the best k by predicted speedup; 0: plain decoding (no k is
    predicted to pay there)."""

    low: float
    high: float
    k: int


def load_grid(low: float, high: float, points: int = 24) -> tuple[float, ...]:
    """Loads from low to high, evenly spaced on a log scale (the effect changes fastest at small batches)."""
    if not (0 < low <= high):
        raise ValueError(f"a load range needs 0 < low <= high, got {low}..{high}")
    if low == high:
        return (float(low),)
    return tuple(float(v) for v in np.geomspace(low, high, points))


def _draw_conditionals(acc: PositionAcceptance, draws: int, rng: np.random.Generator) -> np.ndarray:
    """[draws, K] conditional rates: each position's estimate with its interval's normal approximation (an interval
    with NaN bounds, e.g. from one prompt: the estimate alone), clipped to [0, 1]."""
    z = float(scipy.special.ndtri(0.5 + CONFIDENCE / 2))
    cols = []
    for r in acc.positions:
        iv = r.conditional
        est = iv.estimate if math.isfinite(iv.estimate) else 0.0
        sd = (iv.high - iv.low) / (2 * z) if math.isfinite(iv.low) and math.isfinite(iv.high) else 0.0
        cols.append(np.clip(rng.normal(est, sd, draws), 0.0, 1.0))
    return np.stack(cols, axis=1) if cols else np.zeros((draws, 0))


def _draw_coefficients(fit: StepFit, draws: int, rng: np.random.Generator) -> np.ndarray:
    mean = np.asarray([c.estimate for c in fit.coefficients])
    cov = np.asarray(fit.covariance)
    if fit.dof <= 0 or not np.all(np.isfinite(cov)):
        return np.tile(mean, (draws, 1))
    return rng.multivariate_normal(mean, cov, size=draws, method="eigh")


def _crossing(loads: Sequence[float], speedup: np.ndarray) -> float | None:
    """The first load where `speedup` (over `loads`) falls from above 1 to 1 or below, interpolated on log load;
    None where it never does (or starts at or below 1: -inf sentinel handled by the caller)."""
    for i in range(1, len(loads)):
        a, b = speedup[i - 1], speedup[i]
        if a > 1.0 >= b:
            la, lb = math.log(loads[i - 1]), math.log(loads[i])
            return float(math.exp(la + (lb - la) * (a - 1.0) / (a - b)))
    return None


def predict(
    acc: PositionAcceptance,
    fit: StepFit,
    loads: Sequence[float],
    ks: Sequence[int],
    rng: np.random.Generator,
    draws: int = N_DRAWS,
    confidence: float = CONFIDENCE,
    output_tokens: int | None = None,
) -> tuple[KPrediction, ...]:
    """For each k (at most the measured K): the speedup at each load with its band, and the crossover. With
    `output_tokens` (the workload's typical output length) the tokens per step are those a request of that length
    sees (`effective_tokens_per_step`), else L(k)."""
    too_long = [k for k in ks if k > acc.k_measured or k < 1]
    if too_long:
        raise ValueError(f"k {too_long} outside 1..{acc.k_measured}: acceptance beyond the measured K is not known")
    cond_point = [r.conditional.estimate for r in acc.positions]
    cond = _draw_conditionals(acc, draws, rng)
    coef = _draw_coefficients(fit, draws, rng)
    q = ((1 - confidence) / 2, 1 - (1 - confidence) / 2)
    out = []
    for k in ks:
        length = float(effective_tokens_per_step(np.asarray([cond_point]), k, output_tokens)[0])
        lengths = effective_tokens_per_step(cond, k, output_tokens)
        point, per_draw = [], []
        for b in loads:
            x0, xk = np.asarray(_features(b, 0)), np.asarray(_features(b, k))
            plain, spec = coef @ x0, coef @ xk
            with np.errstate(divide="ignore", invalid="ignore"):
                # a draw whose plain or speculative step takes no time (or less) is no engine: no speedup from it
                s = np.where((spec > 0) & (plain > 0), plain * lengths / spec, np.nan)
            per_draw.append(s)
            steps = fit.step_s(b, 0), fit.step_s(b, k)
            point.append(steps[0] * length / steps[1] if min(steps) > 0 else math.nan)
        draws_by_load = np.stack(per_draw, axis=1)  # [draws, loads]
        curve = []
        for i, b in enumerate(loads):
            col = draws_by_load[:, i]
            col = col[np.isfinite(col)]
            # more of the draws than the band leaves out are no engine (a step time <= 0: a cost fit that its probes
            # do not hold there, e.g. a negative coefficient): no band, rather than one drawn from the rest
            enough = col.size >= confidence * draws_by_load.shape[0]
            lo, hi = (float(v) for v in np.quantile(col, q)) if enough else (math.nan, math.nan)
            curve.append(CurvePoint(float(b), Band(float(point[i]), lo, hi)))
        out.append(KPrediction(k, length, tuple(curve), _crossover(loads, np.asarray(point), draws_by_load, q)))
    return tuple(out)


def _crossover(loads: Sequence[float], point: np.ndarray, draws: np.ndarray, q: tuple[float, float]) -> Crossover:
    est = _crossing(loads, point)
    # each draw's first crossing; a draw already at or below 1 at the lowest load crosses below the range (its
    # crossing is the lowest load or under), one that never falls crosses above it
    below, above = -math.inf, math.inf
    xs = []
    for row in draws:
        if not np.isfinite(row).all():
            continue
        if row[0] <= 1.0:
            xs.append(below)
            continue
        c = _crossing(loads, row)
        xs.append(above if c is None else c)
    arr = np.asarray(xs)
    # an order statistic, not an interpolation: the censored draws are infinities
    lo, hi = (float(v) for v in np.quantile(arr, q, method="inverted_cdf")) if arr.size else (math.nan, math.nan)
    # an end at -inf reaches below the range (None); at +inf beyond it: a low end there is the range's top (the
    # crossing lies above it in nearly every draw), a high end None
    low = None if lo == -math.inf or math.isnan(lo) else (float(loads[-1]) if lo == math.inf else lo)
    high = None if not math.isfinite(hi) else hi
    return Crossover(est, low, high, above_range=est is None and bool(point[-1] > 1.0))


def k_schedule(predictions: Sequence[KPrediction]) -> tuple[KBand, ...]:
    """The best k at each load of the curves (their loads must agree), merged into contiguous bands; 0 where no k
    is predicted faster than plain decoding (speedup <= 1)."""
    if not predictions:
        return ()
    loads = [p.load for p in predictions[0].curve]
    bands: list[KBand] = []
    for i, b in enumerate(loads):
        best = max(predictions, key=lambda p: (p.curve[i].speedup.estimate, -p.k))
        k = best.k if best.curve[i].speedup.estimate > 1.0 else 0
        if bands and bands[-1].k == k:
            bands[-1] = KBand(bands[-1].low, b, k)
        else:
            bands.append(KBand(b, b, k))
    return tuple(bands)


# ---------------------------------------------------------------------------------------------------------------
# The prediction of a probe run, as prediction.json holds it.
# ---------------------------------------------------------------------------------------------------------------

PREDICTION_SCHEMA = "speculab.prediction/1"
# proposers whose i-th proposal does not depend on how many are asked for (a chain), so that the conditional rates
# measured at K give the acceptance at every k < K: prompt lookup, a greedy draft model, EAGLE's and MTP's chains
CHAIN_METHODS = frozenset({"ngram", "draft_model", "eagle", "eagle3", "mtp"})


@dataclass(frozen=True, slots=True)
class EngineForm:
    """The candidate's predicted k schedule as the engine takes it: the form ("single", "per-load", "batch-size
    schedule", "lowest band", "plain", ...) and the flags it adds to the baseline command."""

    form: str
    flags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CandidatePrediction:
    name: str
    label: str
    method: str | None
    measured_k: int
    chain: bool  # the method is a chain proposer: the k < K predictions hold (else they are not made)
    acceptance: PositionAcceptance
    fit: StepFit
    per_k: tuple[KPrediction, ...]
    schedule: tuple[KBand, ...]
    engine_form: EngineForm | None = None  # None: not spelt (no launched engine to spell it for)
    width_check: WidthCheck | None = None  # probes at a second k, held out of the fit (`--check-k`); None: none


@dataclass(frozen=True, slots=True)
class Prediction:
    low: float
    high: float
    candidates: tuple[CandidatePrediction, ...]
    skipped: tuple[ReportWarning, ...]  # candidates with no prediction, and why
    requests_sent: int
    sweep_requests: int
    probe_wall_s: float | None
    output_tokens: int | None = None  # the output length the tokens per step were computed for (None: long outputs)
    # what happened to the probes that the prediction should be read with (the engine refused forced acceptance:
    # its cost was probed at real acceptance, `predict_forcing_refused`)
    warnings: tuple[ReportWarning, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """prediction.json: `candidates[]` one per candidate and k (name, k, crossover, curve), `k_schedule` per
        candidate, `requests_sent` beside what a fixed K x load sweep would send, and per candidate its acceptance
        and cost fit."""
        rows, fits, schedule = [], [], []
        for c in self.candidates:
            for p in c.per_k:
                rows.append(
                    {
                        "name": c.name,
                        "label": c.label,
                        "method": c.method,
                        "k": p.k,
                        "measured_k": c.measured_k,
                        "tokens_per_step": p.tokens_per_step,
                        "crossover": asdict(p.crossover),
                        "curve": [asdict(pt) for pt in p.curve],
                    }
                )
            fits.append(
                {
                    "name": c.name,
                    "chain_proposer": c.chain,
                    "engine_form": asdict(c.engine_form) if c.engine_form is not None else None,
                    "acceptance": asdict(c.acceptance),
                    "cost_fit": asdict(c.fit),
                    "width_check": _width_dict(c.width_check),
                }
            )
            schedule.extend({"name": c.name, "low": b.low, "high": b.high, "k": b.k} for b in c.schedule)
        return {
            "schema": PREDICTION_SCHEMA,
            "loads": {"kind": "concurrency", "low": self.low, "high": self.high},
            "candidates": rows,
            "k_schedule": schedule,
            "models": fits,
            "skipped": [w.to_dict() for w in self.skipped],
            "warnings": [w.to_dict() for w in self.warnings],
            "requests_sent": self.requests_sent,
            "sweep_requests": self.sweep_requests,
            "probe_wall_s": self.probe_wall_s,
            "output_tokens": self.output_tokens,
        }


def _width_dict(w: WidthCheck | None) -> dict[str, Any] | None:
    """prediction.json `models[].width_check`: the second k, `linear`, and each held-out probe with its residual."""
    if w is None:
        return None
    rows = [asdict(p) | {"residual_s": p.residual_s, "inside": p.inside} for p in w.probes]
    return {"k": w.k, "linear": w.linear, "probes": rows}


def band_at(curve: Sequence[tuple[float, float, float, float]], load: float) -> Band | None:
    """A predicted curve's band at `load`, (load, estimate, low, high) rows interpolated on log load (the grid is
    geometric); None outside the curve's loads (no extrapolation: the model was fitted inside them)."""
    # a band not predicted at a load is NaN (null once saved as JSON: inputs.json keeps the curve)
    rows = sorted((x, *(math.nan if v is None else v for v in rest)) for x, *rest in curve)
    if not rows or not rows[0][0] <= load <= rows[-1][0]:
        return None
    for (x0, *a), (x1, *b) in itertools.pairwise(rows):
        if x0 <= load <= x1:
            t = 0.0 if x1 == x0 else (math.log(load) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return Band(*(u + (v - u) * t for u, v in zip(a, b, strict=True)))
    return Band(*rows[-1][1:])
