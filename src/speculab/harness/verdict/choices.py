"""The recommendation's records (harness.verdict.recommendation): each candidate's answer at each load with its
guardrails, each load's choice, the bands along the load axis, the Pareto points, how far each arm got, and k chosen
from data (`KChoice`, `KMeasured`). Plain frozen
dataclasses of numbers and decisions; `model` names them too, so a renderer needs nothing below it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from speculab.harness.results.warnings import ReportWarning

# The three answers at a load (CandidateAnswer.answer, LoadChoice.answer): the evidence says ship the candidate, the
# evidence says it does not pay (keep plain), or the data cannot say (undecided: inconclusive, too few pairs, gated,
# missing, not finished). Undecided is never folded into plain.
SHIP, PLAIN, UNDECIDED = "ship", "plain", "undecided"

# The choice at an undecided load (LoadChoice.choice, RecommendationBand.choice): neither a candidate nor plain
UNDECIDED_CHOICE = "undecided"

# A guardrail's answer (GuardrailAnswer.answer): "worse" keeps plain; "leans worse" (its interval straddles the
# margin and its estimate lies beyond it on the worse side) holds the load undecided; the others let it ship.
# "tolerated": a time metric worse (or leaning worse) beyond its margin by a loss within its floor, or with the
# candidate within its SLO: shown with its record (`GuardrailAnswer.breach`), never held against the candidate
NOT_WORSE, WORSE, LEANS_WORSE, UNCLEAR, NOT_MEASURED = "not worse", "worse", "leans worse", "unclear", "not measured"
TOLERATED = "tolerated"


@dataclass(frozen=True, slots=True)
class GuardrailAnswer:
    """One guardrail of one candidate at one load, against the baseline.

    Time metrics (ttft_s, e2e_s, ...): `estimate`..`high` is the speedup (> 1 = better) and its interval, `margin`
    relative, `loss_s` what the slowdown costs a request (the baseline's median times it), `floor_s` or `slo_limit_s`
    what a breach of the margin was judged against. error_rate: the candidate's error rate minus the baseline's (a
    fraction; `low` = `high` = `estimate`), `p_value` the two-proportion test's. correctness: the checks' pass-rate
    difference candidate - baseline and its interval, `margin` in pass-rate points. NaN where there is nothing to
    show."""

    name: str  # "ttft_s" | "e2e_s" | "tpot_s" | "itl_s" | "error_rate" | "correctness"
    answer: str  # NOT_WORSE | WORSE | LEANS_WORSE | TOLERATED | UNCLEAR | NOT_MEASURED
    estimate: float
    low: float
    high: float
    margin: float
    p_value: float | None = None  # error_rate only
    # undecided: ~how many times today's units would likely decide it against its bar (the margin's, or the floor's
    # where that is higher); None when unknown
    to_decide: float | None = None
    # time metrics: seconds a request loses, the baseline's median x (1 / speedup - 1) (< 0: gains); None: unknown (no
    # baseline median here, or a summary written before floors)
    loss_s: float | None = None
    floor_s: float | None = None  # the floor a breach of the margin was judged against; None: not judged by one
    slo_limit_s: float | None = None  # the SLO limit it was judged against instead; None: not judged by one
    # TOLERATED: the breach as a record (kind GUARDRAIL_TOLERATED), shown with the recommendation; None otherwise
    breach: ReportWarning | None = None


@dataclass(frozen=True, slots=True)
class CandidateAnswer:
    """One candidate at one load: ship, plain or undecided, why, its guardrails, and what would decide it."""

    candidate: str
    level: str
    answer: str  # SHIP | PLAIN | UNDECIDED
    # the deciding metric's decision (faster | equivalent | slower | inconclusive | not enough paired data), the
    # gate that withheld it (errors | not active | load not achieved | missing), "guardrail" (a guardrail is worse or
    # leans worse), "not finished" (the run stopped before this arm finished here) or NOT_USERS (its acceptance is
    # not the user's traffic's: its speed decides nothing)
    why: str
    speedup: float  # the deciding metric's speedup and interval (NaN without one)
    speedup_low: float
    speedup_high: float
    guardrails: tuple[GuardrailAnswer, ...] = ()
    # undecided: what would likely decide it, from the data: about this many prompts in all at this load (or this
    # many repeats, when launches are the interval's unit); None when no amount of data is likely to, or unknown
    needed: int | None = None
    needed_unit: str = ""  # "prompts" | "repeats" | ""


@dataclass(frozen=True, slots=True)
class ArmProgress:
    """How far one arm got at one load: "finished" (every planned repeat, none cut short), "partial" (some repeats
    missing or cut short) or "not run"."""

    arm: str
    level: str
    state: str


# The choice that keeps speculation off at a load (RecommendationBand.choice, LoadChoice.choice)
BASELINE_CHOICE = "baseline"


# why a load measured more than once is undecided when its measurements' answers differ (recommendation._one_per_load)
DISAGREE = "its measurements disagree"

# why a candidate whose acceptance cannot be the user's (an ACCEPTANCE_VALIDITY record is about it) is undecided
# where its speed alone would have shipped it or kept plain (recommendation.not_users_answer)
NOT_USERS = "acceptance not the user's"


@dataclass(frozen=True, slots=True)
class LoadChoice:
    """The recommendation at one measured load: of the candidates that ship there (faster on the deciding metric
    beyond the margin, no guardrail worse), the one with the largest speedup; else plain when every candidate is
    shown not to pay, else undecided; with why."""

    level: str
    label: str
    value: float
    choice: str  # a candidate's name, BASELINE_CHOICE or UNDECIDED_CHOICE
    # "faster" for a candidate; otherwise the why of the candidates' answers (CandidateAnswer.why): plain: equivalent
    # | slower | guardrail; undecided: inconclusive | not enough paired data | a gate | guardrail | not finished |
    # NOT_USERS (acceptance not the user's)
    decision: str
    speedup: float  # the chosen candidate's speedup on the deciding metric (NaN for plain and undecided)
    speedup_low: float
    speedup_high: float
    tied: tuple[str, ...] = ()  # candidates the chosen one cannot be told apart from (LevelReport.tied_with_best)
    # the load's best by point estimate, when a candidate tied with it was kept instead (the one chosen at the load
    # below: fewer bands); "" when the choice is the load's best
    kept_over: str = ""
    answer: str = ""  # SHIP | PLAIN | UNDECIDED; "" in a summary before the three answers (read `choice`)


@dataclass(frozen=True, slots=True)
class RecommendationBand:
    """Neighbouring measured loads with one choice, and where the band ends above."""

    choice: str  # a candidate's name, BASELINE_CHOICE or UNDECIDED_CHOICE
    label: str
    method: str | None
    k: int | None
    loads: tuple[float, ...]
    load_labels: tuple[str, ...]
    # the edge to the next band up: the crossover estimate and interval when the candidate's speedup crosses 1
    # between the two loads, else None (edge_between bounds it); None and None for the last band
    upper_edge: float | None = None
    upper_edge_low: float | None = None
    upper_edge_high: float | None = None
    edge_between: tuple[float, float] | None = None  # the measured loads on either side of the edge
    edge_source: str = ""  # "crossover of <candidate>" or "between measured loads"; "" next to an undecided band


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One arm at one load in the throughput-per-GPU vs per-user-speed view (engine teams' Pareto picture): up is
    more tokens from each GPU, right is a faster stream for each user."""

    arm: str
    label: str  # the arm's label
    level: str
    load_label: str
    load: float
    # one user's decode speed: 1 / the median per-request TPOT ((E2E - TTFT) / (tokens - 1)), tokens/s; NaN when
    # no request had two tokens
    per_user_tok_s: float
    # output tokens/s (client-measured, mean over repeats, Student-t 95 % interval) divided by the arm's GPUs
    tok_s_per_gpu: float
    tok_s_per_gpu_low: float
    tok_s_per_gpu_high: float
    gpus: int
    on_frontier: bool  # no other point is at least as good on both axes and better on one
    recommended: bool  # the recommendation's choice at this load (plain's points where plain is chosen)


@dataclass(frozen=True, slots=True)
class SearchPoint:
    """One probe of a search (`loads: {search: ...}`): the followed candidate's effect on the deciding metric at
    one load, log(baseline / candidate) (> 0: speculation faster), with the level verdict's interval on that scale."""

    load: float
    level: str  # its level's key (c24, r8)
    effect: float  # log of the verdict's speedup; NaN when the level has no verdict (gated, too few units)
    effect_low: float
    effect_high: float
    fitted: float | None  # the monotone fit's effect at this load; None where the fit gave none
    # each pairing unit's effect (groups sent together), the fit's input
    effects: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchCrossover:
    """The load where the effect changes sign, with its interval (None: not determined)."""

    estimate: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class SearchView:
    """What a search found (commands.run.probing places the loads; harness.search fits them): summary.json `search`."""

    kind: str  # "concurrency" or "rate"
    metric: str  # the deciding metric whose effect the search follows
    candidate: str | None  # the candidate followed (None before any probe had a verdict)
    crossover: SearchCrossover
    probes: tuple[float, ...]  # the loads, in the order measured
    # harness.search.fit's status: "crosses" (an estimate and its interval), "faster throughout" / "slower
    # throughout" (no sign change in the range, the interval wholly past one end), "undetermined"
    status: str
    confidence: float
    method: str
    range_low: float  # the range searched
    range_high: float
    tolerance: float
    max_probes: int
    points: tuple[SearchPoint, ...] = ()  # by load
    rounds: tuple[tuple[float, ...], ...] = ()  # each round's loads
    stop: str | None = None  # why it stopped (harness.search.policy.stop_reason); None: it did not finish
    # with SLOs set: each arm's highest probe load within its SLO (the same as the report's `slo_capacity`)
    goodput: Mapping[str, SloCapacity] | None = None


@dataclass(frozen=True, slots=True)
class SloCapacity:
    """One arm's highest load within its SLO, from the loads measured (harness.search.goodput): summary.json
    `slo_capacity` and `search.goodput`."""

    # harness.search.goodput's status: "crosses" (an estimate and its interval), "meets throughout" (within the SLO at
    # every load measured, up to `highest`), "misses throughout" (outside it already at `lowest`), "undetermined"
    status: str
    estimate: float | None  # the load where the fitted attainment meets the target (None unless it crosses)
    low: float | None  # the interval's ends, loads; None where it reaches past the loads measured
    high: float | None
    target: float  # the attainment target: the fraction of requests that must meet every limit
    metric_limits: Mapping[str, float]  # the limits set (ttft_s, tpot_s, e2e_s), seconds
    kind: str  # "concurrency" or "rate"
    lowest: float | None  # the lowest and highest load measured with requests (None: none)
    highest: float | None
    confidence: float
    method: str


@dataclass(frozen=True, slots=True)
class KMeasured:
    """One k of a method that the experiment ran: its measured TPOT speedup, and what the what-if predicted."""

    k: int
    candidate: str
    speedup: float  # measured, Hodges-Lehmann, over the baseline
    speedup_low: float
    speedup_high: float
    predicted: float | None  # the what-if's speedup at this k (from `KChoice.source`'s acceptance and step cost)


@dataclass(frozen=True, slots=True)
class KChoice:
    """k from data, for one method at one load: the what-if's best k next to the k values that were measured."""

    method: str
    level: str
    level_label: str
    source: str  # the candidate whose acceptance profile and step cost the prediction uses (the largest k measured)
    predicted_best_k: int
    predicted_best_speedup: float
    measured: tuple[KMeasured, ...]  # every k of this method that ran here, by k
    measured_best_k: int | None  # the measured k with the largest speedup, if any was faster beyond the margin
    # an acceptance-validity record is about one of these candidates: no k is chosen from them (measured_best_k None;
    # the prediction's best k is not the user's either)
    not_users: bool = False
