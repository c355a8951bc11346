"""The A/B verdict's model: frozen dataclasses of numbers and decisions; summary.json is `json_safe(report)` plus
each candidate's verdict line, which the writer (`speculab.report.summary`) makes from the model. Presentation
(`speculab.report`) reads a `Report` and formats it; it never computes, and the sentences it shows are made there,
not stored here. The types the fields use are named from this module too, so a renderer needs nothing below it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from speculab.harness.analysis import cost as costlib
from speculab.harness.analysis.acceptance import AcceptanceOutlier as AcceptanceOutlier
from speculab.harness.analysis.acceptance import AcceptanceSpeedup
from speculab.harness.analysis.acceptance import PositionAcceptance as PositionAcceptance
from speculab.harness.analysis.acceptance import WeightedAcceptance as WeightedAcceptance
from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN
from speculab.harness.analysis.comparison.margin import Decision as Decision
from speculab.harness.analysis.comparison.metric_comparison import N_RESAMPLES
from speculab.harness.analysis.comparison.metric_comparison import Direction as Direction
from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES as MIN_LAUNCHES
from speculab.harness.analysis.crossover import CrossoverStatus as CrossoverStatus
from speculab.harness.analysis.energy import EnergyView as EnergyView
from speculab.harness.analysis.figures import COMPARED_METRICS
from speculab.harness.analysis.figures import E2E as E2E
from speculab.harness.analysis.figures import HEADLINE as HEADLINE
from speculab.harness.analysis.figures import ITL as ITL
from speculab.harness.analysis.figures import TPOT as TPOT
from speculab.harness.analysis.figures import TTFT as TTFT
from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE
from speculab.harness.analysis.prefix_cache import HitRateChange
from speculab.harness.records import FORCED as FORCED
from speculab.harness.records import AcceptanceSummary
from speculab.harness.results.codec import from_data
from speculab.harness.results.strict_json import dumps, json_safe
from speculab.harness.results.warnings import ACCEPTANCE_VALIDITY
from speculab.harness.results.warnings import ReportWarning as ReportWarning
from speculab.harness.results.warnings import WarningKind as WarningKind
from speculab.harness.search.predict import Crossover as Crossover
from speculab.harness.search.predict import KPrediction as KPrediction
from speculab.harness.search.predict import Prediction as Prediction
from speculab.harness.search.predict import WidthCheck as WidthCheck
from speculab.harness.stats import Distribution as Distribution
from speculab.harness.stats import Interval as Interval
from speculab.harness.verdict.choices import BASELINE_CHOICE as BASELINE_CHOICE
from speculab.harness.verdict.choices import UNDECIDED_CHOICE as UNDECIDED_CHOICE
from speculab.harness.verdict.choices import ArmProgress as ArmProgress
from speculab.harness.verdict.choices import CandidateAnswer as CandidateAnswer
from speculab.harness.verdict.choices import GuardrailAnswer as GuardrailAnswer
from speculab.harness.verdict.choices import KChoice as KChoice
from speculab.harness.verdict.choices import KMeasured as KMeasured
from speculab.harness.verdict.choices import LoadChoice as LoadChoice
from speculab.harness.verdict.choices import ParetoPoint as ParetoPoint
from speculab.harness.verdict.choices import RecommendationBand as RecommendationBand
from speculab.harness.verdict.choices import SearchCrossover as SearchCrossover
from speculab.harness.verdict.choices import SearchPoint as SearchPoint
from speculab.harness.verdict.choices import SearchView as SearchView
from speculab.harness.verdict.choices import SloCapacity as SloCapacity
from speculab.harness.verdict.correctness import CorrectnessComparison as CorrectnessComparison
from speculab.harness.verdict.correctness import CorrectnessOptions
from speculab.harness.verdict.phases.records import CounterPoint as CounterPoint
from speculab.harness.verdict.phases.records import PhaseArm as PhaseArm
from speculab.harness.verdict.phases.records import PhaseMetric as PhaseMetric
from speculab.harness.verdict.phases.records import PhaseView as PhaseView
from speculab.harness.verdict.phases.records import PhaseWindowView as PhaseWindowView
from speculab.harness.verdict.phases.records import TimelinePoint as TimelinePoint

# /2: a gate's reason, what is missing and a crossover's loads left out are records (kind and numbers), and a gated
# load's verdict is NO_VERDICT; the report words them. A /1 file's sentences read back as notes and say the same.
REPORT_SCHEMA = "speculab.report.summary/2"
READABLE_SCHEMAS = ("speculab.report.summary/1", REPORT_SCHEMA)
NO_VERDICT = "no verdict"  # a gated load's verdict; why: its comparison's gate_reason (report.phrases.gated_verdict)
# A headline answer for `--fail-on` and where it was given: a label ("ngram k=4 at concurrency 1"), or for an `errors`
# answer the gate's record (ERROR_GATE, RUN_LOST_REQUESTS), whose words say whom and where (the report words it)
Answer = tuple[str, str | ReportWarning]

# The compared metrics' labels, from their table (`analysis.figures`), for the report's views; the rows above are
# re-exported for the same views (the report names figures by their rows and may not import analysis).
METRIC_LABELS = {c.name: c.label for c in COMPARED_METRICS}
METRIC_UNITS = {c.name: c.unit for c in COMPARED_METRICS}  # of one request's value (comparisons.csv)


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """Knobs of the analysis; defaults are what `speculab run` uses."""

    max_error_rate: float = DEFAULT_MAX_ERROR_RATE  # above this in either arm: no verdict at that load (and exit 4)
    min_load_fraction: float = 0.95  # achieved load below this fraction of the requested: no verdict
    seed: int = 0  # bootstrap RNG seed: a re-rendered report gives the same intervals
    n_resamples: int = N_RESAMPLES
    correctness: CorrectnessOptions = field(default_factory=CorrectnessOptions)
    max_series_points: int = 400  # memory time series are thinned to this many points per repeat
    max_gap_points: int = 2000  # chunk gaps kept per arm and load for the histogram (evenly spaced quantiles)
    # the level of every paired verdict and interval: 95 %, or with adaptive repeats 1 - the last look's alpha
    # (stats.sequential; None: taken from the run's own design, else 95 %)
    confidence: float | None = None
    # the smallest change that matters, per paired metric (relative; missing metrics: the run's own `margin:`, else
    # DEFAULT_MARGIN); None: the run's own
    margin: Mapping[str, float] | None = None
    # the metric a candidate must be faster on to be recommended, and those it must not be worse on beyond their
    # margins (`compare --decide-on`, `report --decide-on`); None: the run's own (`decide_on:`, `guardrails:`), else
    # config.experiment's defaults
    decide_on: str | None = None
    guardrails: tuple[str, ...] | None = None
    # a time guardrail's absolute floor per metric, seconds (`compare --guardrail-floor`); missing metrics: the run's
    # own `guardrail_floor:`, else the figures table's defaults; None: the run's own
    guardrail_floor: Mapping[str, float] | None = None


# ---------------------------------------------------------------------------------------------------------------
# The report's parts. Plain frozen dataclasses of numbers and decisions (summary.json: report.summary).
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AcceptanceView(AcceptanceSummary):
    """An arm's acceptance at one load, its repeats' summaries combined (`arm_level.combine_acceptance`): counters
    summed (exact), gauges averaged (approximate)."""

    repeats: int = 0
    inactive_repeats: int = 0


@dataclass(frozen=True, slots=True)
class RequestAcceptanceView:
    """Acceptance from each response's own fields (`RequestRecord.speculation`), repeats pooled: token-weighted and
    request-weighted side by side, overall and per workload category."""

    source: str
    requests: int  # measured successful requests
    overall: WeightedAcceptance
    by_category: Mapping[str, WeightedAcceptance] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PrefixCacheView:
    """Prefix-cache lookups during the level, from the engine's counters, summed over repeats (prompt tokens)."""

    source: str
    queries: float
    hits: float
    hit_rate: float | None
    requests: int  # measured requests: the trials of the "beyond noise" test (harness.analysis.prefix_cache)
    repeats: int


@dataclass(frozen=True, slots=True)
class MemoryView:
    """Peaks per repeat, averaged over repeats. Bytes; kv_usage is a fraction."""

    gpu_peak_bytes: float | None = None
    gpu_scope: str = ""  # "process" or "device"
    rss_peak_bytes: float | None = None
    kv_usage_mean: float | None = None
    kv_usage_max: float | None = None
    samples: int = 0


@dataclass(frozen=True, slots=True)
class Series:
    """Plot material, kept in summary.json so `speculab report` and the HTML need nothing else."""

    ttft_s: tuple[float, ...] = ()  # one per successful request, pooled over repeats
    tpot_s: tuple[float, ...] = ()
    e2e_s: tuple[float, ...] = ()
    chunk_gap_s: tuple[float, ...] = ()  # thinned to at most 5000 values
    tokens_per_chunk: Mapping[str, int] = field(default_factory=dict)  # "3" -> number of chunks with 3 tokens
    memory_t_s: tuple[float, ...] = ()  # first repeat, thinned
    memory_gpu_bytes: tuple[float | None, ...] = ()
    memory_rss_bytes: tuple[float | None, ...] = ()
    memory_kv_usage: tuple[float | None, ...] = ()


@dataclass(frozen=True, slots=True)
class ArmLevel:
    """One arm at one load level, repeats pooled."""

    arm: str
    repeats: int  # repeats with records
    interrupted_repeats: int
    sent: int
    ok: int
    error: int
    error_rate: float
    errors_by_category: Mapping[str, int]
    first_error: str  # the first failed request's category and message ("" when none failed): says what to fix
    requested_rate_rps: float | None
    achieved_rate_rps: float | None  # send rate actually achieved (rate loads), mean over repeats
    achieved_concurrency: float | None  # time-weighted in-flight requests while sending (closed loops)
    load_fraction: float | None  # achieved / requested (rate or concurrency)
    distributions: Mapping[str, Distribution]  # bench metric -> distribution, seconds (tokens for counts)
    requests_per_s: Interval
    output_tok_s: Interval
    total_tok_s: Interval
    usd_per_mtok: Interval | None  # $ per 1M output tokens, interval from repeats
    slo_attainment: float | None  # fraction of requests meeting every SLO limit; None without SLOs
    stalled_requests: int | None  # None: not in the file (`not_in_file`)
    # Per repeat, in repeat order: (repeat, position in the ABBA run sequence, output tok/s) - to see drift.
    repeat_tok_s: tuple[tuple[int, int, float], ...]
    token_count_sources: Mapping[str, int]
    acceptance: AcceptanceView | None
    memory: MemoryView
    series: Series
    request_acceptance: RequestAcceptanceView | None = None  # per-request fields, where the engine reports them
    prefix_cache: PrefixCacheView | None = None  # where the engine exposes prefix-cache counters
    cache_resets: Mapping[str, int] = field(default_factory=dict)  # blocks by CacheResetOutcome.outcome; {}: none kept
    # the client process at this load (load.client_health): its CPU share of one core (the highest repeat's) and
    # its event loop's lag p99 (the worst repeat's); None where not measured
    client_cpu_share: float | None = None
    client_loop_lag_p99_s: float | None = None
    # what this arm's result file does not hold, so that no number stands for it (null in summary.json, "not in the
    # file" in views): `distributions` keys (`analysis.metrics.CHUNK_QUANTITIES` of a file that keeps only the
    # first and last token's times) and "output_tok_s" (a file whose send times are rebuilt and that states no
    # duration); () for speculab's own runs
    not_in_file: tuple[str, ...] = ()
    energy: EnergyView | None = None  # from NVML power samples (analysis.energy); None: no NVML device
    # the canon per draft position (verdict.per_request.acceptance_positions, docs/metrics.md); None: no positions
    acceptance_positions: PositionAcceptance | None = None


@dataclass(frozen=True, slots=True)
class Ratio:
    """A paired candidate/baseline comparison of one metric (MetricComparison, flattened)."""

    metric: str
    n_pairs: int
    n_dropped: int
    ratio: Interval  # geometric-mean ratio candidate/baseline, BCa interval
    median_ratio: Interval
    speedup: float  # the verdict's (Hodges-Lehmann) baseline/candidate for time metrics (> 1 = faster)
    speedup_low: float
    speedup_high: float
    wilcoxon_p: float
    verdict: str  # faster | slower | no detectable difference | not enough paired data
    min_detectable_change: float
    # why there is no verdict, or what to read it with (METRIC_* kinds; None: nothing); a summary before records saved
    # the sentence (read back as a note, "" as None)
    note: ReportWarning | None = None
    # What the interval and the test counted: groups of `group_size` prompts sent together at concurrency > 1
    # (their pairs are not independent), or the prompts (group_size 1). 0: a summary written before groups.
    n_units: int = 0
    group_size: int = 1
    # The answer against the margin, from the same interval (speedup_low..speedup_high): faster | slower |
    # equivalent | inconclusive | not enough paired data; "" in a summary written before margins (read `verdict`).
    margin: float = DEFAULT_MARGIN  # relative (0.03 = 3 %), symmetric on the log scale
    decision: str = ""
    # inconclusive: ~how many times today's units would likely decide it; None when decided, or when the estimate
    # sits on the margin (no amount of data is likely to decide it)
    to_decide: float | None = None
    launches: int = 1  # launch pairs the interval counted (>= 3: the launch is its unit); 1: launch effect unmeasured
    # what the interval counted: "prompt", "group" (sent together), "launch", or "unpaired" (two samples)
    unit: str = "prompt"
    # >= 2 launch pairs: how far apart their effects lie (relative); None with one (or in a summary before it)
    launch_spread: float | None = None
    samples: tuple[int, ...] = ()  # unpaired: the usable requests of (candidate, baseline); () when paired


@dataclass(frozen=True, slots=True)
class PromptSpread:
    """TPOT speedup prompt by prompt (baseline / candidate, each prompt against itself: what the verdict's
    Hodges-Lehmann effect summarises) beside the ratio of the arms' p50 TPOTs that the per-load table shows. The two
    answer different questions and can disagree: when they differ by more than the margin the report says so, and
    why (`split`: the prompts fall in two groups, some faster and some slower beyond the margin)."""

    medians_speedup: float  # baseline p50 TPOT / candidate p50 TPOT, each arm's requests pooled (the table's p50s)
    pairs: int  # prompts with a TPOT in both arms
    faster: int  # prompts faster than the baseline beyond the margin
    slower: int  # prompts slower beyond the margin
    low_quartile: float  # the per-prompt speedups' quartiles
    high_quartile: float
    split: bool  # a quarter or more of the prompts on each side of the margin: two groups, not one effect
    differs: bool  # the verdict's effect and medians_speedup differ by more than the margin (log scale)


@dataclass(frozen=True, slots=True)
class LevelComparison:
    """One candidate vs the baseline at one load."""

    candidate: str
    gate: str  # "ok" | "missing" | "errors" | "not active" | "load not achieved"
    # why the gate withheld the verdict (None: "ok"); a summary before /2 saved the sentence (read back as a note)
    gate_reason: ReportWarning | None
    verdict: str  # the TPOT verdict, or the gate's: "speculation not active", NO_VERDICT (gate_reason says why)
    metrics: tuple[Ratio, ...]
    throughput_ratio: Interval | None  # output tok/s candidate/baseline, paired by repeat
    cost_ratio: Interval | None  # $ per 1M tokens candidate/baseline (0.62 = 38% cheaper)
    memory_delta_bytes: float | None  # candidate - baseline peak
    memory_kind: str  # "gpu" or "rss" or ""
    by_category: tuple[Ratio, ...] = ()  # TPOT per workload category; Ratio.metric holds the category name
    # per prompt: the candidate's acceptance length (its own response fields) against its TPOT speedup
    acceptance_speedup: AcceptanceSpeedup | None = None
    prefix_cache: HitRateChange | None = None  # the two arms' prefix-cache hit rates, when both report one
    by_turn: tuple[Ratio, ...] = ()  # TPOT per conversation turn ("turn 1", ...), when the workload has turns > 1
    by_prompt_length: tuple[Ratio, ...] = ()  # TPOT per prompt-length bucket (server prompt tokens, baseline)
    # conversation turns left out of every pair: their context (the arms' own earlier answers) differed
    diverged: int = 0
    # The TPOT decision against the margin (Ratio.decision) when the gate is open; else the gate ("errors", ...)
    decision: str = ""
    # Server processes per arm behind this comparison: launched once per repeat (launch mode) or 1 (two-URL mode,
    # compare). Below analysis.comparison.paired.MIN_LAUNCHES the launch effect is not in the interval; the margin
    # covers it.
    launches: int = 1
    launched: bool = False  # launch mode (each repeat relaunches both arms)
    # prompts paired on E2E but without a TPOT pair: a one-token answer in either arm (TPOT needs two tokens); why
    # the TPOT pairs can be fewer than the E2E pairs
    single_token: int = 0
    # TPOT prompt by prompt beside the ratio of the arms' p50s (paired comparisons with a verdict; None otherwise)
    prompt_spread: PromptSpread | None = None
    energy_ratio: Interval | None = None  # J per output token candidate/baseline, paired by repeat (power samples)
    predicted: Interval | None = None  # `run --prediction`: the TPOT speedup predicted here (docs/predict.md)

    def metric(self, name: str) -> Ratio | None:
        return next((m for m in self.metrics if m.metric == name), None)


@dataclass(frozen=True, slots=True)
class Ranked:
    """One candidate's place at one load: its TPOT speedup over the baseline, and against the best candidate."""

    candidate: str
    label: str
    gate: str  # the baseline comparison's gate ("ok", "errors", ...)
    verdict: str  # its TPOT verdict against the baseline
    speedup: float
    speedup_low: float
    speedup_high: float
    # the best candidate's TPOT speedup over this one, paired per prompt (metric "vs <best>"); None for the best,
    # and for candidates not faster than the baseline
    vs_best: Ratio | None = None
    decision: str = ""  # its TPOT decision against the margin (Ratio.decision); "" in a summary before margins


@dataclass(frozen=True, slots=True)
class LevelReport:
    key: str
    label: str
    kind: str
    value: float
    roles: tuple[str, ...]
    arms: tuple[ArmLevel, ...]
    comparisons: tuple[LevelComparison, ...]
    # Which candidate pays at this load: of the candidates faster (TPOT) than the baseline beyond the margin, the one
    # with the largest speedup; None when none is. `ranking` holds every candidate, best first; `tied_with_best`
    # those faster than the baseline that the best does not beat beyond the margin.
    best: str | None = None
    ranking: tuple[Ranked, ...] = ()
    tied_with_best: tuple[str, ...] = ()

    def arm(self, name: str) -> ArmLevel | None:
        return next((a for a in self.arms if a.arm == name), None)

    def comparison(self, candidate: str) -> LevelComparison | None:
        return next((c for c in self.comparisons if c.candidate == candidate), None)


@dataclass(frozen=True, slots=True)
class CrossoverView:
    axis: str  # "concurrency" or "rate"
    loads: tuple[float, ...]
    speedups: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    status: str
    load: float | None
    low: float | None
    high: float | None
    low_censored: bool
    high_censored: bool
    method: str
    scale: str
    excluded: tuple[ReportWarning, ...] = ()  # loads left out (gated): why, its `load` the load's label


@dataclass(frozen=True, slots=True)
class KRow:
    k: int
    expected_tokens: float
    speedup: float
    model: str


@dataclass(frozen=True, slots=True)
class WhatIfView:
    level: str  # LevelSpec.key where acceptance and the observed speedup came from
    level_label: str
    per_position: tuple[float, ...]
    alpha: float
    profile_source: str
    step_cost: float
    step_cost_source: str
    rows: tuple[KRow, ...]
    recommended_k: int
    observed_k: int | None
    observed_speedup: float | None
    notes: tuple[ReportWarning, ...] = ()  # the what-if model's (a summary /1: sentences, read back as notes)


@dataclass(frozen=True, slots=True)
class PlanSide:
    goodput_rps_per_replica: float | None
    replicas: int | None
    gpus: int | None
    usd_per_month: float | None


@dataclass(frozen=True, slots=True)
class PlanView:
    target_rate_rps: float
    axis: str
    baseline: PlanSide
    candidate: PlanSide
    monthly_difference_usd: float | None
    gpu_difference: int | None
    hours_per_month: float = costlib.HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class CandidateReport:
    """Everything about one candidate arm against the baseline, across loads."""

    name: str
    label: str
    acceptance: AcceptanceView | None  # at the low load (batching changes nothing about acceptance in principle)
    crossover: CrossoverView | None
    what_if: tuple[WhatIfView, ...]
    plan: PlanView | None
    correctness: CorrectnessComparison | None
    single_change: bool | None
    diff_lines: tuple[str, ...]
    # the check's note (`ChangeCheck.note`, a CHANGE_* record; not_recorded where the inputs hold no check); a file
    # before #48 item 3 kept its sentence ("" for none), read back as a `note`
    change_note: ReportWarning | None
    acceptance_positions: PositionAcceptance | None = None  # ArmLevel.acceptance_positions at the same low load
    acceptance_outliers: tuple[AcceptanceOutlier, ...] = ()  # per-request rates near 0 or 1 there, with their checks


@dataclass(frozen=True, slots=True)
class ArmView:
    name: str
    label: str
    engine: str
    url: str
    command: tuple[str, ...] | None
    method: str | None
    num_speculative_tokens: int | None
    usd_per_hour: float | None
    gpus: int
    cold_start_ready_s: float | None
    cold_start_first_token_s: float | None
    server_info_json: str  # what the server reported about itself, as JSON text (two-URL mode)


@dataclass(frozen=True, slots=True)
class SetupView:
    name: str
    workload_name: str
    workload_source: str
    api: str
    prompts: int
    categories: Mapping[str, int]
    temperature: float | None  # None: the results did not record it
    top_p: float
    top_k: int | None
    seed: int
    max_tokens: int
    min_tokens: int | None
    ignore_eos: bool
    repeats: int
    levels: tuple[str, ...]  # labels, in run order, with roles
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_e2e_s: float | None
    slo_attainment: float
    target_rate_rps: float | None
    two_url_mode: bool
    started_utc: str
    finished_utc: str
    versions: Mapping[str, str]
    # False: the arms sent different prompts and every comparison is unpaired (two samples; `Ratio.samples`)
    paired: bool = True
    separate_runs: bool = False  # `compare` of two separate runs: the arms were not interleaved
    prompts_candidate: int | None = None  # unpaired: the candidate's own count (`prompts` is then the baseline's)


@dataclass(frozen=True, slots=True)
class RecommendationCost:
    """Plain vs the recommendation at the user's target rate (`cost:` prices, SLOs): the capacity plan, and the
    plan at the two ends of the arms' requests/s intervals over repeats (the candidate's low end against the
    baseline's high end is the least favourable). A draft model on its own device is in the candidate's `gpus`."""

    candidate: str  # the shipped candidate (the winner, or the lowest band's)
    plan: PlanView
    least_favourable: PlanView | None  # None with one repeat (no interval), or where an end gives no plan
    most_favourable: PlanView | None
    repeats: int
    # the plan is the load-dependent deployment's (off-above, per-load: each load's choice, plain where plain was
    # chosen, the shipped candidate's price) rather than the candidate's at every load
    by_load: bool = False


@dataclass(frozen=True, slots=True)
class RecommendationView:
    """What to ship at each load band (harness.verdict.recommendation): only "faster" beyond the margin on the
    deciding metric with no guardrail worse counts; an undecided load is its own band, never plain."""

    axis: str  # "concurrency" or "rate"
    margin: float  # the deciding metric's margin the choices were decided against (relative)
    loads: tuple[LoadChoice, ...]  # by load
    bands: tuple[RecommendationBand, ...]  # by load
    # "plain" | "single" | "off-above" | "per-load" when every load is decided ("per-phase" for a phased load's
    # windows, where the choice differs between phases or at a transition); "undecided" when some load is not;
    # "incomplete" when the run did not finish (no ship or keep-plain answer at all: `progress` says how far it got)
    form: str
    winner: str | None  # the one candidate shipped (single, off-above; undecided: the one shipped where decided)
    off_above: float | None  # off-above: the load above which speculation is turned off (crossover estimate)
    # with `cost:` (prices), SLOs and a target rate: what it costs against plain; None without them
    cost: RecommendationCost | None = None
    # every arm at every load on the axis, for the Pareto picture (throughput per GPU vs per-user tokens/s)
    pareto: tuple[ParetoPoint, ...] = ()
    decide_on: str = HEADLINE.name  # the deciding metric
    guardrails: tuple[str, ...] = ()  # the guardrails every candidate was held to
    answers: tuple[CandidateAnswer, ...] = ()  # every candidate at every load on the axis, by load
    progress: tuple[ArmProgress, ...] = ()  # every arm at every planned load (what finished), in plan order
    # each time guardrail's absolute floor, seconds (0: its margin alone); {} in a summary written before floors
    floors: Mapping[str, float] = field(default_factory=dict)
    # the SLO's limits on the guardrails, seconds, which a breach is judged against instead of the floor; {}: no SLO
    slo_limits: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShippedConfig:
    """The recommendation in the engine's own words, as `speculab run` spells it for the engine it launched
    (commands.run.recommended), and the two files an exporter writes beside summary.json from it."""

    engine: str
    release: str  # the /version the baseline's server answered; "" when it answered none
    form: str  # the recommendation's form as spelt, e.g. "single", "batch-size schedule", "lowest band"
    flags: tuple[str, ...]  # what to add to the baseline command (secret values as ***); () for plain
    flags_file: str  # recommended-flags.txt
    experiment_file: str  # recommended.yaml: the run's experiment file with just the recommendation


@dataclass(frozen=True, slots=True)
class Report:
    schema: str
    title: str
    setup: SetupView
    arms: tuple[ArmView, ...]
    levels: tuple[LevelReport, ...]
    candidates: tuple[CandidateReport, ...]
    warnings: tuple[ReportWarning, ...]  # actionable, most important first; the sentences: report.phrases
    missing: tuple[ReportWarning, ...]  # planned runs that are absent (NO_RUNS, REPEATS_MISSING, REPEATS_CUT)
    interrupted: bool
    diagnosis: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    # methods the experiment ran at several k: predicted best k next to the measured ones, per load
    k_choices: tuple[KChoice, ...] = ()
    # the margin each paired metric was decided against (relative: 0.03 = 3 %); {} in a summary before margins
    margin: Mapping[str, float] = field(default_factory=dict)
    # what to ship at each load band (harness.verdict.recommendation); None in a summary written before it
    recommendation: RecommendationView | None = None
    # the recommendation spelt for the launched engine (`speculab run`, launch mode); None otherwise, and in a
    # summary written before it
    shipped: ShippedConfig | None = None
    # `loads: {search: ...}`: the crossover it found, with its probes (harness.verdict.across_loads.search_view)
    search: SearchView | None = None
    # with SLOs set: each arm's highest load within its SLO, from every load measured on the axis (None without SLOs)
    slo_capacity: Mapping[str, SloCapacity] | None = None
    # a phased load (`loads: {phases: [...]}`): each phase with its windows' answers (its windows are `levels`), and
    # each arm's requests over the schedule's time; () otherwise
    phases: tuple[PhaseView, ...] = ()
    timeline: tuple[TimelinePoint, ...] = ()
    speculation_timeline: tuple[CounterPoint, ...] = ()  # from the engine's counters, where it reports them

    @property
    def acceptance_validity(self) -> tuple[ReportWarning, ...]:
        """Why acceptance in this run is not the user's traffic's (`warnings` of the ACCEPTANCE_VALIDITY kinds, said
        first): the headline says them before anything else."""
        return tuple(w for w in self.warnings if w.kind in ACCEPTANCE_VALIDITY)

    def level(self, key: str) -> LevelReport | None:
        return next((lv for lv in self.levels if lv.key == key), None)

    def candidate(self, name: str) -> CandidateReport | None:
        return next((c for c in self.candidates if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self)

    def to_json(self) -> str:
        """The model as summary.json lays it out, without the sentences its writer (`report.summary`) adds."""
        return dumps(self, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Report:
        d = json.loads(text)
        if d.get("schema") not in READABLE_SCHEMAS:
            raise ValueError(f"not a speculab A/B summary (schema {d.get('schema')!r}, want {REPORT_SCHEMA})")
        return from_data(cls, d)
