"""The experiment file's YAML schema: pydantic models at the edge, strict (unknown keys are errors).

`speculab.config.load` validates a file against `ExperimentSchema` and converts it to the frozen dataclasses of
`speculab.config.experiment`; nothing else sees these models.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from speculab.config.experiment import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TRANSITION_S,
    KNOWN_METHODS,
    MAX_PHASES,
    MAX_STREAM_UNARY_PROMPTS,
    NEEDS_MODEL,
    SEARCH_GROUPS,
    SEARCH_MAX_PROBES,
    STREAM_UNARY_PROMPTS,
    EngineKind,
    decide_on_metric,
    guardrail_floors,
    guardrail_names,
    margins,
)


class _Model(BaseModel):
    # strict: YAML already gives native types, so `true` is not silently a 1, nor 2.5 a float where ints belong.
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, strict=True)


# the entry's own keys, which `options` may not repeat
_OWN_KEYS = frozenset({"method", "num_speculative_tokens", "model", "prompt_lookup_max", "prompt_lookup_min"})


class SpeculationSchema(_Model):
    # any name an engine may accept (vLLM's `suffix`, llama.cpp's `ngram-map-k`): checked against the engine's own
    # list when the run is planned (harness.servers.methods.here.check_methods), not here
    method: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
    num_speculative_tokens: int = Field(ge=1, le=64)
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    engine_args: list[str] = Field(default_factory=list)
    name: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._=-]*$")

    @model_validator(mode="after")
    def _check(self) -> SpeculationSchema:
        near = difflib.get_close_matches(self.method, KNOWN_METHODS, n=1, cutoff=0.8)
        if self.method not in KNOWN_METHODS and near:  # `ngarm`: a typo of one of ours, not an engine's name
            raise ValueError(f"method {self.method}: did you mean `{near[0]}`?")
        own = [k for k in self.options if k in _OWN_KEYS]
        if own:  # one setting, one place: vLLM's JSON would take the option's value silently over the key's
            raise ValueError(f"options.{own[0]}: give it as the speculation entry's own key `{own[0]}`, not in options")
        if self.method in NEEDS_MODEL and not self.model:
            raise ValueError(f"method {self.method} needs `model` (the draft model's path or name)")
        if self.method == "ngram" and self.model:
            raise ValueError("method ngram takes no `model`; use method draft_model for a draft model")
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if self.method != "ngram" and (lo is not None or hi is not None):
            raise ValueError("prompt_lookup_min/max only apply to method ngram")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"prompt_lookup_min ({lo}) must be <= prompt_lookup_max ({hi})")
        return self


class LaunchSchema(_Model):
    engine: EngineKind
    command: list[str] = Field(min_length=1)
    # auto: speculab chooses a free port and writes it as the command's --port value (moved if another takes it)
    port: int | Literal["auto"]
    env: dict[str, str] = Field(default_factory=dict)
    ready_timeout_s: float = Field(default=600.0, gt=0)
    host: str = "127.0.0.1"
    health_path: str | None = None

    @field_validator("port", mode="before")
    @classmethod
    def _port(cls, v: Any) -> Any:
        """One message for both shapes (pydantic would report each branch of the union)."""
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 65535):
            return v
        raise ValueError(f"must be a TCP port (1-65535) or auto, got {v!r}")


class ArmSchema(_Model):
    url: str | None = None
    launch: LaunchSchema | None = None
    model: str | None = None
    api_key_env: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> ArmSchema:
        if (self.url is None) == (self.launch is None):
            raise ValueError("give exactly one of `url` (a running server) or `launch` (a command to start)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self


class CandidateSchema(_Model):
    url: str | None = None
    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    model: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> CandidateSchema:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of `url` (two-URL mode) or `command` (explicit candidate command)")
        return self


class WorkloadSchema(_Model):
    spec: str = Field(min_length=1)
    num_prompts: int | None = Field(default=None, ge=1)
    api: Literal["completions", "chat"] = "completions"
    warmup_requests: int = Field(default=4, ge=0)
    fit: Literal["skip", "cap", "refuse"] = "skip"  # prompts that cannot fit the context (harness.workload.fit)


class SamplingSchema(_Model):
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    seed: int = Field(default=0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    min_tokens: int | None = Field(default=None, ge=0)
    ignore_eos: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)

    @model_validator(mode="after")
    def _check(self) -> SamplingSchema:
        limit = self.max_tokens if self.max_tokens is not None else DEFAULT_MAX_TOKENS
        if self.min_tokens is not None and self.min_tokens > limit:
            raise ValueError(f"min_tokens ({self.min_tokens}) must be <= max_tokens ({limit})")
        return self


class WorkersSchema(_Model):
    n: int = Field(ge=1, le=1024)
    ray: str | None = None  # Ray actors on a cluster (harness.load.ray_pool): auto | local | an address


class LoadSchema(_Model):
    concurrency: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0)
    arrival: Literal["poisson", "constant", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    ramp_up_s: float = Field(default=0.0, ge=0)
    trace_speed: float | None = Field(default=None, gt=0)
    # client processes offering this load: a number (processes on this machine, at most 64), or {n, ray}
    workers: Annotated[int, Field(ge=1, le=64)] | WorkersSchema = 1

    @model_validator(mode="after")
    def _one_of(self) -> LoadSchema:
        if sum(x is not None for x in (self.concurrency, self.rate, self.trace_speed)) != 1:
            raise ValueError(
                "give exactly one of `concurrency` (closed loop), `rate` (requests/s, open loop) or `trace_speed` "
                "(a trace workload at its own arrival times, scaled)"
            )
        if self.trace_speed is not None and (self.arrival != "poisson" or self.burstiness != 1.0 or self.ramp_up_s):
            raise ValueError("a trace sets its own arrival times: arrival, burstiness and ramp_up_s do not apply")
        if self.ramp_up_s > 0 and self.concurrency is None:
            raise ValueError("ramp_up_s staggers closed-loop workers; with `rate` the arrival process sets the pacing")
        if self.concurrency is not None and (self.max_concurrency is not None or self.arrival != "poisson"):
            raise ValueError("arrival and max_concurrency apply to `rate` loads only")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError(f"burstiness shapes gamma arrivals only; set arrival: gamma (not {self.arrival})")
        return self


class AdaptiveRepeatsSchema(_Model):
    min: int = Field(default=1, ge=1, le=100)
    max: int = Field(ge=1, le=100)
    until: Literal["decided"] = "decided"
    mdc: float = Field(default=0.05, gt=0, lt=1)  # "no difference" is decided when it could detect less than this
    spending: Literal["pocock", "obrien-fleming"] = "pocock"

    @model_validator(mode="after")
    def _order(self) -> AdaptiveRepeatsSchema:
        if self.min > self.max:
            raise ValueError(f"repeats.min ({self.min}) must be <= repeats.max ({self.max})")
        return self


class SearchSchema(_Model):
    """`loads: {search: ...}` (docs/experiment.md, "Searching for the crossover")."""

    kind: Literal["concurrency", "rate"]
    low: float = Field(gt=0)
    high: float = Field(gt=0)
    tolerance: float | None = Field(default=None, gt=0)  # None: a quarter of high - low
    max_probes: int = Field(default=SEARCH_MAX_PROBES, ge=2, le=100)
    groups: int = Field(default=SEARCH_GROUPS, ge=6, le=1000)  # a verdict needs 6 groups of prompts sent together
    max_groups: int | None = Field(default=None, ge=6, le=10000)  # None: SEARCH_MAX_GROUPS (docs/experiment.md)

    @model_validator(mode="after")
    def _range(self) -> SearchSchema:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low:g}) must be < high ({self.high:g})")
        if self.max_groups is not None and self.max_groups < self.groups:
            raise ValueError(f"max_groups ({self.max_groups}) must be at least groups ({self.groups})")
        if self.kind == "concurrency" and not (float(self.low).is_integer() and float(self.high).is_integer()):
            raise ValueError(
                f"a concurrency search needs whole numbers for low and high (got {self.low:g}, {self.high:g})"
            )
        if self.tolerance is not None and self.tolerance >= self.high - self.low:
            raise ValueError(
                f"tolerance ({self.tolerance:g}) must be < high - low ({self.high - self.low:g}): it is the width at "
                "which the crossover's interval is narrow enough"
            )
        return self


_Axis = Literal["concurrency", "rate"]
_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Load = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class RampSchema(_Model):
    """`{ramp: {from, to, over, steps, axis}}`: `steps` equal phases from `from` to `to` over `over` seconds."""

    model_config = ConfigDict(populate_by_name=True)
    from_: _Load = Field(alias="from")
    to: _Load
    over: _Seconds
    steps: int = Field(default=4, ge=2, le=MAX_PHASES)
    axis: _Axis = "concurrency"


class BurstSchema(_Model):
    """`{burst: {base, peak, every, for, times, axis}}`: `base` for `every - for` seconds, then `peak` for `for`
    seconds, `times` times over, then `base` again for `every - for` seconds."""

    model_config = ConfigDict(populate_by_name=True)
    base: _Load
    peak: _Load
    every: _Seconds
    for_: _Seconds = Field(alias="for")
    times: int = Field(default=3, ge=1, le=MAX_PHASES // 2 - 1)
    axis: _Axis = "concurrency"

    @model_validator(mode="after")
    def _inside(self) -> BurstSchema:
        if self.for_ >= self.every:
            raise ValueError(f"for ({self.for_:g} s) must be < every ({self.every:g} s): a burst is part of its period")
        return self


class ZigzagSchema(_Model):
    """`{zigzag: {low, high, every, times, axis}}`: low, high, low, ... each held `every` seconds, `times` highs."""

    low: _Load
    high: _Load
    every: _Seconds
    times: int = Field(default=2, ge=1, le=MAX_PHASES // 2 - 1)
    axis: _Axis = "concurrency"


class PhaseSchema(_Model):
    """One entry of `loads.phases`: `{concurrency: N | rate: R, duration_s: D}`, or a shorthand (ramp, burst,
    zigzag) that stands for several phases."""

    concurrency: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    duration_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    ramp: RampSchema | None = None
    burst: BurstSchema | None = None
    zigzag: ZigzagSchema | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PhaseSchema:
        given = [k for k in ("concurrency", "rate", "ramp", "burst", "zigzag") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of `concurrency` or `rate` (with `duration_s`), or a shorthand `ramp`, `burst` or "
                f"`zigzag` (got {', '.join(given) or 'none'})"
            )
        plain = given[0] in ("concurrency", "rate")
        if plain and self.duration_s is None:
            raise ValueError(f"a {given[0]} phase needs duration_s: how long it is held, seconds")
        if not plain and self.duration_s is not None:
            raise ValueError(f"{given[0]} sets its own durations: remove duration_s")
        return self


class LoadsSchema(_Model):
    operating: LoadSchema | None = None  # required unless `search` or `phases` places the loads
    low: LoadSchema = LoadSchema(concurrency=1)
    sweep: list[LoadSchema] = Field(default_factory=list)
    search: SearchSchema | None = None
    phases: list[PhaseSchema] | None = Field(default=None, min_length=1)
    transition_s: float = Field(default=DEFAULT_TRANSITION_S, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _search_or_levels(self) -> LoadsSchema:
        if self.search is None and self.operating is None and self.phases is None:
            raise ValueError(
                "give `operating` (the load you serve at), `search: {kind, low, high}` to find the crossover, or "
                "`phases: [...]` for a load that changes"
            )
        fixed = [k for k in ("operating", "low", "sweep") if k in self.model_fields_set]
        if self.search is not None and fixed:
            raise ValueError(
                f"search places its own loads: remove {', '.join(fixed)} (a search needs no fixed levels beside it)"
            )
        if self.phases is not None and (fixed or self.search is not None):
            others = ", ".join(fixed + (["search"] if self.search is not None else []))
            raise ValueError(f"phases is the whole load schedule: remove {others} (or run them as another experiment)")
        if self.phases is None and "transition_s" in self.model_fields_set:
            raise ValueError("transition_s applies to `phases` only")
        return self

    @model_validator(mode="after")
    def _sweep_axis(self) -> LoadsSchema:
        if len(self.sweep) == 1:
            raise ValueError("sweep needs at least 2 loads (or none)")
        kinds = {
            "concurrency" if lv.concurrency is not None else ("rate" if lv.rate is not None else "trace")
            for lv in self.sweep
        }
        if len(kinds) > 1:
            raise ValueError(
                f"sweep mixes {' and '.join(sorted(kinds))} loads; use one axis so a crossover can be found"
            )
        return self


class SlosSchema(_Model):
    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    e2e_s: float | None = Field(default=None, gt=0)
    attainment: float = Field(default=0.9, gt=0, le=1)


class PriceSchema(_Model):
    usd_per_hour: float = Field(ge=0)
    gpus: int = Field(default=1, ge=1)


class CostSchema(_Model):
    baseline: PriceSchema
    candidate: PriceSchema | None = None  # None: the same as the baseline
    target_rate_rps: float | None = Field(default=None, gt=0)
    usd_per_kwh: float | None = Field(default=None, ge=0)  # electricity: the energy cost of output tokens


class CacheSchema(_Model):
    # between-blocks: empty the server's caches before every block, where its engine has an endpoint for it
    reset: Literal["between-blocks", "never"] = "between-blocks"


class ChecksSchema(_Model):
    # correctness beyond the workload's own checks (docs/metrics.md): prompts also sent unary in each arm, whose text
    # is compared with the same prompt streamed (at temperature 0); 0 sends none
    stream_unary: int = Field(default=STREAM_UNARY_PROMPTS, ge=0, le=MAX_STREAM_UNARY_PROMPTS)


class ExperimentSchema(_Model):
    name: str | None = None
    workload: WorkloadSchema | str
    sampling: SamplingSchema = SamplingSchema()
    loads: LoadsSchema
    slos: SlosSchema = SlosSchema()
    repeats: int | AdaptiveRepeatsSchema = Field(default=1)
    checks: bool | ChecksSchema = True  # true | false | {stream_unary: N} (checks on, N prompts sent unary)
    python_checks: bool = False  # run `python` checks (code the workload names): an explicit opt-in
    cost: CostSchema | None = None
    baseline: ArmSchema
    speculation: SpeculationSchema | list[SpeculationSchema]
    candidate: CandidateSchema | None = None
    allow_extra_diff: bool = False
    cache: CacheSchema = CacheSchema()
    # the smallest change that matters: 0.03 or "3%" for every time metric, or {tpot: 3%, ttft: 10%, correctness: 5%}
    margin: float | str | dict[str, float | str] | None = None

    @model_validator(mode="after")
    def _margin(self) -> ExperimentSchema:
        margins(self.margin)  # ValueError: the key path is `margin`
        return self

    # the metric a candidate must be faster on, and those it must not be worse on (docs/recommendation.md)
    decide_on: str | None = None
    guardrails: list[str] | None = None

    @field_validator("decide_on")
    @classmethod
    def _decide_on(cls, v: str | None) -> str | None:
        if v is not None:
            decide_on_metric(v)  # ValueError: the key path is `decide_on`
        return v

    @field_validator("guardrails")
    @classmethod
    def _guardrails(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            guardrail_names(v)
        return v

    # a time guardrail's absolute floor: "20ms" for every time metric, or {ttft: 20ms, e2e: 50ms}
    # (docs/recommendation.md)
    guardrail_floor: float | str | dict[str, float | str] | None = None

    @field_validator("guardrail_floor")
    @classmethod
    def _guardrail_floor(cls, v: float | str | dict[str, float | str] | None) -> Any:
        guardrail_floors(v)  # ValueError: the key path is `guardrail_floor`
        return v

    @model_validator(mode="after")
    def _repeats(self) -> ExperimentSchema:
        if isinstance(self.repeats, int) and not 1 <= self.repeats <= 100:
            raise ValueError(f"repeats must be 1-100, or {{min, max, until: decided}}; got {self.repeats}")
        if self.loads.search is not None and not isinstance(self.repeats, int):
            # each look would judge a different set of loads: the two adaptive designs do not compose
            raise ValueError("repeats: adaptive repeats ({min, max}) do not combine with loads.search; give a number")
        return self

    @model_validator(mode="after")
    def _arms(self) -> ExperimentSchema:
        b, c = self.baseline, self.candidate
        if b.url is not None and (c is None or c.url is None):
            raise ValueError(
                "baseline is a running server (url): give candidate.url too (two-URL mode), "
                "or use baseline.launch so speculab can start the candidate"
            )
        if b.launch is not None and c is not None and c.url is not None:
            raise ValueError("candidate.url needs baseline.url too; with baseline.launch the candidate is derived")
        if b.launch is not None and b.launch.engine == "other" and (c is None or c.command is None):
            raise ValueError(
                "baseline.launch.engine is `other`: give candidate.command (speculab cannot derive its flags)"
            )
        if isinstance(self.speculation, list):
            if not self.speculation:
                raise ValueError("speculation is an empty list: give one block, or a list of candidate blocks")
            if len(self.speculation) > 1:
                if c is not None and c.url is not None:
                    raise ValueError(
                        "two-URL mode compares one candidate (the server at candidate.url): give one speculation "
                        "block, or use baseline.launch to let speculab start each candidate"
                    )
                if c is not None and (c.command is not None or c.port is not None):
                    raise ValueError(
                        "candidate.command and candidate.port fit one candidate; with a list of speculation blocks "
                        "each candidate's command is derived from the baseline's"
                    )
        return self
