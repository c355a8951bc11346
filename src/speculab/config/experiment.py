"""The experiment as the rest of speculab sees it: frozen dataclasses, validated and complete.

`speculab.config.load` builds them from YAML (docs/experiment.md); nothing else in the tree builds them from a file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

from speculab.errors import did_you_mean

# The engines an experiment file may name: the adapter registry's (harness.servers.adapters.engine_kinds()), spelt
# here because config/ may not import the harness; tests/unit/harness/servers/test_adapter_registry.py holds them equal.
EngineKind = Literal["speculab", "vllm", "sglang", "llamacpp", "tgi", "trtllm", "other"]
ENGINE_KINDS: tuple[str, ...] = get_args(EngineKind)
# The methods speculab's adapters derive flags for on every engine that has them; `speculation.method` also takes any
# other name, passed to the engine as it is and checked at plan time against the engine's own list (docs/methods.md).
SpecMethod = Literal["ngram", "draft_model", "eagle", "eagle3", "mtp"]
KNOWN_METHODS: tuple[str, ...] = get_args(SpecMethod)
NEEDS_MODEL = frozenset({"draft_model", "eagle", "eagle3"})
DEFAULT_MAX_TOKENS = 256  # output limit of a request whose workload item sets none


@dataclass(frozen=True, slots=True)
class ArmPrice:
    """What one replica of an arm costs: GPU-hour price times GPUs per replica."""

    usd_per_hour: float  # per GPU
    gpus: int = 1

    def __post_init__(self) -> None:
        if self.usd_per_hour < 0 or self.gpus < 1:
            raise ValueError("usd_per_hour must be >= 0 and gpus >= 1")

    @property
    def replica_usd_per_hour(self) -> float:
        return self.usd_per_hour * self.gpus


@dataclass(frozen=True, slots=True)
class SloTargets:
    """Per-request limits (seconds); None = not constrained. A load meets the SLO when at least `attainment` of its
    requests meet every set limit (failed requests never do)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    attainment: float = 0.9

    @property
    def any(self) -> bool:
        """True when at least one limit is set (goodput is measured only then)."""
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))

    @property
    def limits(self) -> dict[str, float | None]:
        """Every limit, set or not, by the figure it bounds: each field is named as its figure (a test holds them to
        the figures table), so summary.json's and manifest.json's `slo` keys are the figures' names."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "attainment"}


@dataclass(frozen=True, slots=True)
class SpeculationConfig:
    """What the candidate arm adds. Key names follow vLLM's --speculative-config where they overlap."""

    method: str  # ngram | draft_model | eagle | eagle3 | mtp, or the engine's own name (`suffix`, `ngram-map-k`)
    num_speculative_tokens: int  # k: tokens drafted per step
    prompt_lookup_max: int | None = None  # ngram: longest n-gram matched
    prompt_lookup_min: int | None = None  # ngram: shortest n-gram matched
    model: str | None = None  # draft model path or name (draft_model, eagle, eagle3)
    options: Mapping[str, Any] = field(default_factory=dict)  # more keys for the --speculative-config JSON
    engine_args: tuple[str, ...] = ()  # raw flags appended to the candidate command for any engine
    name: str | None = None  # the candidate's name in reports and directories; default "<method>-k<k>"
    # environment the candidate's server gets on top of the baseline's, for an engine knob that is no flag (SGLang's
    # forced acceptance, `SGLANG_SIMULATE_ACC_LEN`, set by `speculab predict`'s cost probes); no YAML key
    env: Mapping[str, str] = field(default_factory=dict)

    def speculative_config_json(self) -> str:
        """The --speculative-config value for speculab and vLLM (method first, then k, then the rest)."""
        d: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.model is not None:
            d["model"] = self.model
        if self.prompt_lookup_max is not None:
            d["prompt_lookup_max"] = self.prompt_lookup_max
        if self.prompt_lookup_min is not None:
            d["prompt_lookup_min"] = self.prompt_lookup_min
        d.update(self.options)
        return json.dumps(d, separators=(",", ":"))

    @property
    def label(self) -> str:
        """Short name for reports: the given name, else "ngram k=4", "draft_model k=4"."""
        return self.name or f"{self.method} k={self.num_speculative_tokens}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["options"] = dict(self.options)
        d["engine_args"] = list(self.engine_args)
        d["env"] = dict(self.env)
        if not self.env:  # a speculation without one keeps its shape (the recommended experiment file)
            del d["env"]
        return d


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """How speculab starts a server: argument list (no shell), extra environment, port it listens on."""

    engine: str  # EngineKind
    command: tuple[str, ...]
    port: int | None  # None (`port: auto`): speculab chooses a free one per launch, written as the command's --port
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 600.0
    host: str = "127.0.0.1"
    health_path: str | None = None  # None: the engine adapter's default

    @property
    def url(self) -> str | None:
        """Where it listens; None with `port: auto` (known once speculab chose the port)."""
        return None if self.port is None else f"http://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ArmConfig:
    """The baseline arm: a running server (url) or one speculab launches (launch). Exactly one is set."""

    url: str | None = None
    launch: LaunchConfig | None = None
    model: str | None = None  # served model name; None = the server's only model
    api_key_env: str | None = None  # name of the environment variable holding the API key (never the key)

    @property
    def base_url(self) -> str | None:
        """The server's URL; None for a launch with `port: auto` (its port is chosen at launch)."""
        return self.url if self.url is not None else self.launch.url  # type: ignore[union-attr]


@dataclass(frozen=True, slots=True)
class CandidateConfig:
    """Explicit candidate: a second URL (two-URL mode) or a command (engine `other`, or overriding the adapter)."""

    url: str | None = None
    command: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = None  # None: the baseline's environment
    port: int | None = None  # None: the baseline's port (arms never run at the same time when launched)
    model: str | None = None


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    spec: str  # what `speculab bench --workload` takes
    num_prompts: int | None = None  # None: the whole workload
    api: str = "completions"  # completions | chat
    warmup_requests: int = 4
    fit: str = "skip"  # skip | cap | refuse: prompts too long for the servers' context


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int = 0
    # Set: every request's output limit, the workload items' own limits included (as `bench --max-tokens`);
    # None: each item's own limit, else DEFAULT_MAX_TOKENS.
    max_tokens: int | None = None
    min_tokens: int | None = None  # with ignore_eos: a fixed output length, where the engine supports it
    ignore_eos: bool = False
    logprobs: int | None = None  # top alternatives per token to request: lets the report tell near-ties apart

    @property
    def default_max_tokens(self) -> int:
        """The limit for items without their own (and for every item when `max_tokens` is set)."""
        return self.max_tokens if self.max_tokens is not None else DEFAULT_MAX_TOKENS


# `loads: {phases: [...], transition_s: S}`: the first seconds after a phase's load changes, judged as their own window
# (where adaptive speculation fails: it has not yet followed the new load), docs/experiment.md "Phased loads"
DEFAULT_TRANSITION_S = 5.0
MAX_PHASES = 200  # a schedule longer than this is a mistake (a burst every 0.1 s for an hour), not a load


@dataclass(frozen=True, slots=True)
class LoadPhase:
    """One phase of a phased load: closed loop at `concurrency` or open loop at `rate_rps`, held for `duration_s`."""

    concurrency: int | None
    rate_rps: float | None
    duration_s: float

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_rps is None) or not self.duration_s > 0:
            raise ValueError("a load phase needs one of concurrency or rate_rps, and duration_s > 0")

    @property
    def kind(self) -> str:
        return "concurrency" if self.concurrency is not None else "rate"

    @property
    def value(self) -> float:
        return float(self.concurrency if self.concurrency is not None else self.rate_rps)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"{self.rate_rps:g} req/s"


@dataclass(frozen=True, slots=True)
class LoadLevel:
    """One offered load: closed loop at `concurrency`, open loop at `rate_rps`, or a trace workload replayed at its
    own arrival times `trace_speed` times faster (open loop; both optionally capped by `max_concurrency`)."""

    concurrency: int | None = None
    rate_rps: float | None = None
    arrival: str = "poisson"  # poisson | constant | gamma (open loop only)
    burstiness: float = 1.0  # gamma shape; 1.0 = Poisson
    max_concurrency: int | None = None
    ramp_up_s: float = 0.0  # closed loop: the workers' first requests spread over this long (bench --ramp-up)
    trace_speed: float | None = None  # trace replay (workload trace:PATH): 1 = the recorded times, 2 = twice as fast
    workers: int = 1  # client processes sharing this load (harness.load.coordinator); the offered load is the same
    ray: str | None = None  # the workers as Ray actors on this cluster (harness.load.ray_pool); None: this machine
    # A phased load (`loads: {phases: [...]}`): these phases one after another, in one block per arm and repeat;
    # `concurrency` (or `rate_rps`) is then the schedule's peak, and `transition_s` the window after each change
    phases: tuple[LoadPhase, ...] = ()
    transition_s: float = DEFAULT_TRANSITION_S

    @property
    def duration_s(self) -> float:
        """A phased load's length, seconds (0 for any other load: it runs until its prompts are sent)."""
        return sum(p.duration_s for p in self.phases)

    @property
    def kind(self) -> str:
        if self.trace_speed is not None:
            return "trace"
        return "concurrency" if self.concurrency is not None else "rate"

    @property
    def value(self) -> float:
        if self.trace_speed is not None:
            return float(self.trace_speed)
        return float(self.concurrency if self.concurrency is not None else self.rate_rps)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        if self.phases:
            values = [p.value for p in self.phases]
            shape = " → ".join(f"{v:g}" for v in values) if len(values) <= 6 else f"{min(values):g}–{max(values):g}"
            return f"{len(values)} phases, {self.kind} {shape} ({self.duration_s:g} s)"
        if self.trace_speed is not None:
            return f"trace ×{self.trace_speed:g}"
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"{self.rate_rps:g} req/s"


# `loads: {search: ...}` defaults (docs/experiment.md): probes at most, and groups of prompts sent together per probe
# (a verdict needs 6: harness.analysis.groups.MIN_PAIRS, which config may not import; a few more keep a probe's
# interval from resting on the minimum)
SEARCH_MAX_PROBES = 10
SEARCH_GROUPS = 8
# the most groups one probe sends where a load measured again asks for more to decide its sign (issue 49; a load's
# first probe sends `groups`): three times the default, so a probe at the top of a search's range stays affordable
SEARCH_MAX_GROUPS = 24


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """`loads: {search: {kind, low, high, tolerance, max_probes, groups, max_groups}}`: load levels placed adaptively
    between `low` and `high` to bracket where the best candidate's effect on the deciding metric changes sign, until the
    crossover's interval is narrower than `tolerance` (same unit as the loads) or `max_probes` levels ran."""

    kind: str  # concurrency | rate
    low: float
    high: float
    tolerance: float
    max_probes: int = SEARCH_MAX_PROBES
    groups: int = SEARCH_GROUPS  # groups of prompts sent together that each probe sends
    # the most a probe sends when its load's spread asks for more; None: SEARCH_MAX_GROUPS (or `groups` if more)
    max_groups: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("concurrency", "rate") or not 0 < self.low < self.high or self.tolerance <= 0:
            raise ValueError("a search needs kind concurrency|rate, 0 < low < high and tolerance > 0")

    @classmethod
    def with_defaults(
        cls, kind: str, low: float, high: float, tolerance: float | None = None, **rest: int | None
    ) -> SearchConfig:
        """The default tolerance is a quarter of the range (two halvings past the first bracket)."""
        return cls(kind, low, high, tolerance if tolerance is not None else (high - low) / 4, **rest)


@dataclass(frozen=True, slots=True)
class LoadsConfig:
    # With a search, `operating` is its low end (what `speculab diagnose` probes) and there are no fixed levels.
    operating: LoadLevel
    low: LoadLevel = field(default_factory=lambda: LoadLevel(concurrency=1))
    sweep: tuple[LoadLevel, ...] = ()
    search: SearchConfig | None = None

    def all_levels(self) -> tuple[LoadLevel, ...]:
        """Distinct levels in run order: low, operating, then the sweep."""
        if self.search is not None:
            return ()  # placed as the search goes
        out: list[LoadLevel] = []
        for lv in (self.low, self.operating, *self.sweep):
            if lv not in out:
                out.append(lv)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class CostConfig:
    baseline: ArmPrice
    candidate: ArmPrice
    target_rate_rps: float | None = None
    usd_per_kwh: float | None = None  # electricity price: energy cost per output token (analysis.energy)


@dataclass(frozen=True, slots=True)
class AdaptiveRepeats:
    """`repeats: {min, max, until: decided}`: add repeats until every verdict is decided (stats.sequential)."""

    min: int
    max: int
    until: str = "decided"
    mdc: float = 0.05  # "no difference" counts as decided once the minimum detectable change is below this
    spending: str = "pocock"  # the alpha-spending function across looks


# `margin:` keys -> the metrics they set (docs/experiment.md): a number or "3%" sets every compared metric; a mapping
# sets some (the others keep the default). `correctness` is the checks' non-inferiority margin, in pass-rate points.
# The compared metrics' keys are the metric table's (`harness.analysis.figures.COMPARED_METRICS`, which config may
# not import): tests/unit/harness/analysis/test_metric_table.py holds them equal.
MARGIN_KEYS = {"tpot": "tpot_s", "e2e": "e2e_s", "ttft": "ttft_s", "itl": "itl_s", "correctness": "correctness"}
TIME_MARGINS = tuple(metric for metric in MARGIN_KEYS.values() if metric != "correctness")


def parse_margin(value: float | int | str, *, what: str = "margin", up_to_one: bool = False) -> float:
    """A margin as a fraction: 0.03, or "3%" (3 percent); 0 <= margin < 1 (<= 1 with `up_to_one`: a share such as
    --max-error-rate, whose 100% lets every request fail). ValueError names `what` and the accepted forms."""
    text = str(value).strip()
    try:
        m = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        m = float("nan")
    if not (0 <= m <= 1 if up_to_one else 0 <= m < 1):  # NaN fails too
        hint = f" (did you mean {m:g}%?)" if 1 <= m <= 100 and not text.endswith("%") else ""
        most = "at most 1" if up_to_one else "below 1"
        raise ValueError(f"{what} {value!r}: give a fraction {most} or a percentage, e.g. 0.03 or 3%{hint}")
    return m


def parse_error_rate(value: float | int | str) -> float:
    """`--max-error-rate` as `--margin` takes it: 0.05 or "5%" (0 to 100%). ValueError names the accepted forms."""
    return parse_margin(value, what="max error rate", up_to_one=True)


def margins(value: float | int | str | Mapping[str, float | int | str] | None) -> dict[str, float]:
    """`margin:` (or `--margin`) -> {metric: margin}; {} for None (the defaults). ValueError for an unknown key."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        return dict.fromkeys(TIME_MARGINS, parse_margin(value))
    out = {}
    for key, v in value.items():
        if key not in MARGIN_KEYS:
            raise ValueError(
                f"unknown metric {key!r}{did_you_mean(key, MARGIN_KEYS)} (margin keys: {', '.join(MARGIN_KEYS)})"
            )
        out[MARGIN_KEYS[key]] = parse_margin(v)
    return out


# `decide_on:` and `guardrails:` (docs/recommendation.md): the metric a candidate must be faster on to be recommended,
# and those it must not be worse on beyond their margins. Time metrics by their margin keys; `error_rate` (the arm's
# failed requests) and `correctness` (the checks' pass rate) are guardrails only.
DECIDE_ON_KEYS = {k: v for k, v in MARGIN_KEYS.items() if v in TIME_MARGINS}
GUARDRAIL_KEYS = {**DECIDE_ON_KEYS, "error_rate": "error_rate", "correctness": "correctness"}
# TPOT, the figures table's headline (held equal to `harness.analysis.figures.HEADLINE` by a test): config keeps the
# one copy of the figures' names, in MARGIN_KEYS
DEFAULT_DECIDE_ON = MARGIN_KEYS["tpot"]
DEFAULT_GUARDRAILS = (MARGIN_KEYS["ttft"], MARGIN_KEYS["e2e"], "error_rate", "correctness")


def decide_on_metric(value: str) -> str:
    """`decide_on:` (or `--decide-on`) -> the metric's name; ValueError names the accepted keys."""
    if value not in DECIDE_ON_KEYS:
        raise ValueError(
            f"unknown metric {value!r}{did_you_mean(value, DECIDE_ON_KEYS)} (one of: {', '.join(DECIDE_ON_KEYS)})"
        )
    return DECIDE_ON_KEYS[value]


def guardrail_names(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`guardrails:` -> the metrics' names, in order, each once; ValueError names the accepted keys."""
    out = []
    for v in values:
        if v not in GUARDRAIL_KEYS:
            raise ValueError(
                f"unknown guardrail {v!r}{did_you_mean(v, GUARDRAIL_KEYS)} (one of: {', '.join(GUARDRAIL_KEYS)})"
            )
        out.append(GUARDRAIL_KEYS[v])
    return tuple(dict.fromkeys(out))


# `guardrail_floor:` (and `--guardrail-floor`): a time guardrail's absolute floor, per request. A guardrail holds a
# candidate back when it is worse beyond max(its margin, its floor): a loss a user would notice, not only one the
# statistics can detect. The keys are the time metrics' `margin:` keys; the defaults are the figures table's
# (`harness.analysis.figures.DEFAULT_FLOORS_S`: 20 ms for TTFT and E2E, none per token).
_DURATION_UNITS = {"ms": 1e-3, "s": 1.0}
MAX_FLOOR_S = 60.0  # past a minute a floor is a typo (20 for 20ms), not a tolerance


def parse_floor(value: float | int | str) -> float:
    """A floor in seconds: "20ms", "0.02s", or a number of seconds below 1 (0.02); 0 <= floor <= 60 s. ValueError
    names the accepted forms."""
    text = str(value).strip().lower().replace(" ", "")
    unit = next((u for u in ("ms", "s") if text.endswith(u)), "")
    try:
        f = float(text[: len(text) - len(unit)]) * _DURATION_UNITS.get(unit, 1.0)
    except ValueError:
        f = float("nan")
    if not unit and f >= 1:  # `ttft: 20` means 20 ms far more often than 20 s: a unit says which
        raise ValueError(f"floor {value!r}: give a unit, e.g. {f:g}ms or {f:g}s")
    if not 0 <= f <= MAX_FLOOR_S:  # NaN fails too
        raise ValueError(f"floor {value!r}: give a duration, e.g. 20ms or 0.02s (0 for the margin alone)")
    return f


def guardrail_floors(value: float | int | str | Mapping[str, float | int | str] | None) -> dict[str, float]:
    """`guardrail_floor:` (or `--guardrail-floor`) -> {metric: seconds}; {} for None (the defaults). One duration
    sets every time metric; a mapping (or "ttft=20ms,e2e=50ms") sets some. ValueError for an unknown key."""
    if value is None:
        return {}
    if isinstance(value, str) and "=" in value:
        pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"floor {value!r}: give metric=duration pairs, e.g. ttft=20ms,e2e=50ms")
        value = {k.strip(): v for k, v in pairs}
    if not isinstance(value, Mapping):
        return dict.fromkeys(TIME_MARGINS, parse_floor(value))
    out = {}
    for key, v in value.items():
        if key not in DECIDE_ON_KEYS:  # the time metrics' keys
            raise ValueError(
                f"unknown metric {key!r}{did_you_mean(key, DECIDE_ON_KEYS)} (floor keys: {', '.join(DECIDE_ON_KEYS)})"
            )
        out[DECIDE_ON_KEYS[key]] = parse_floor(v)
    return out


# `checks: {stream_unary: N}`: prompts of the workload also sent unary (not streamed) in each arm after its measured
# load, at temperature 0, whose text the stream against unary check compares with the same prompt's streamed text
# (harness.verdict.correctness); 0 sends none. The default with `checks: true`.
STREAM_UNARY_PROMPTS = 8
MAX_STREAM_UNARY_PROMPTS = 256


@dataclass(frozen=True, slots=True)
class Experiment:
    workload: WorkloadConfig
    baseline: ArmConfig
    # the candidates, each derived from the baseline by its own single change: one block, or a list of them
    speculations: tuple[SpeculationConfig, ...]
    loads: LoadsConfig
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    slos: SloTargets = field(default_factory=SloTargets)
    repeats: int = 1  # with `adaptive`, the most repeats it may run (adaptive.max)
    adaptive: AdaptiveRepeats | None = None
    checks: bool = True
    python_checks: bool = False  # run the workload's `python` checks (they import and run the code they name)
    stream_unary: int = STREAM_UNARY_PROMPTS  # `checks: {stream_unary: N}`; 0 with `checks: false`
    cost: CostConfig | None = None
    candidate: CandidateConfig | None = None
    allow_extra_diff: bool = False
    name: str | None = None
    source: str = ""  # the file it came from
    # the smallest change that matters, per metric (`margins`): {} = the defaults
    # (analysis.comparison.margin.DEFAULT_MARGIN; correctness: verdict.correctness.DEFAULT_NON_INFERIORITY_MARGIN)
    margin: Mapping[str, float] = field(default_factory=dict)
    decide_on: str = DEFAULT_DECIDE_ON  # the metric a candidate must be faster on (`decide_on:`)
    guardrails: tuple[str, ...] | None = None  # `guardrails:`; None: DEFAULT_GUARDRAILS
    # a time guardrail's absolute floor per metric, seconds (`guardrail_floor:`): {} = the figures table's defaults
    guardrail_floor: Mapping[str, float] = field(default_factory=dict)
    cache_reset: str = "between-blocks"  # `cache: {reset: between-blocks | never}`: before every block or not at all

    @property
    def speculation(self) -> SpeculationConfig:
        """The first (in two-URL mode, the only) candidate's speculation."""
        return self.speculations[0]

    @property
    def two_url_mode(self) -> bool:
        return self.candidate is not None and self.candidate.url is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for manifest.json); mappings become dicts, tuples lists."""
        return json.loads(json.dumps(asdict(self), default=lambda o: dict(o) if isinstance(o, Mapping) else str(o)))
