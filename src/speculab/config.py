"""The experiment file: YAML in, validated with pydantic at the edge, out as frozen dataclasses.

Every mistake becomes one `UserError` line naming the file and the key path, e.g.
`experiment.yaml: loads.sweep[2].rate: must be > 0`; unknown keys are rejected with a did-you-mean.
The schema is documented in docs/experiment.md.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from speculab.bench.cost import ArmPrice, SloTargets
from speculab.errors import UserError

EngineKind = Literal["speculab", "vllm", "sglang", "llamacpp", "tgi", "other"]
ENGINE_KINDS: tuple[str, ...] = get_args(EngineKind)
SpecMethod = Literal["ngram", "draft_model", "eagle", "eagle3", "mtp"]
NEEDS_MODEL = frozenset({"draft_model", "eagle", "eagle3"})


# ---------------------------------------------------------------------------------------------------------------
# Frozen configuration objects: what the rest of speculab sees.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpeculationConfig:
    """What the candidate arm adds. Key names follow vLLM's --speculative-config where they overlap."""

    method: str  # ngram | draft_model | eagle | eagle3 | mtp
    num_speculative_tokens: int  # k: tokens drafted per step
    prompt_lookup_max: int | None = None  # ngram: longest n-gram matched
    prompt_lookup_min: int | None = None  # ngram: shortest n-gram matched
    model: str | None = None  # draft model path or name (draft_model, eagle, eagle3)
    options: Mapping[str, Any] = field(default_factory=dict)  # more keys for the --speculative-config JSON
    engine_args: tuple[str, ...] = ()  # raw flags appended to the candidate command for any engine

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
        """Short name for reports: "ngram k=4", "draft_model k=4"."""
        return f"{self.method} k={self.num_speculative_tokens}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["options"] = dict(self.options)
        d["engine_args"] = list(self.engine_args)
        return d


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """How speculab starts a server: argument list (no shell), extra environment, port it listens on."""

    engine: str  # EngineKind
    command: tuple[str, ...]
    port: int
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 600.0
    host: str = "127.0.0.1"
    health_path: str | None = None  # None: the engine adapter's default

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ArmConfig:
    """The baseline arm: a running server (url) or one speculab launches (launch). Exactly one is set."""

    url: str | None = None
    launch: LaunchConfig | None = None
    model: str | None = None  # served model name; None = the server's only model
    api_key_env: str | None = None  # name of the environment variable holding the API key (never the key)

    @property
    def base_url(self) -> str:
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


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int = 0
    max_tokens: int = 256
    min_tokens: int | None = None  # with ignore_eos: a fixed output length, where the engine supports it
    ignore_eos: bool = False
    logprobs: int | None = None  # top alternatives per token to request: lets the report tell near-ties apart


@dataclass(frozen=True, slots=True)
class LoadLevel:
    """One offered load: closed loop at `concurrency`, or open loop at `rate_rps` (optionally capped)."""

    concurrency: int | None = None
    rate_rps: float | None = None
    arrival: str = "poisson"  # poisson | constant | gamma (open loop only)
    burstiness: float = 1.0  # gamma shape; 1.0 = Poisson
    max_concurrency: int | None = None
    ramp_up_s: float = 0.0  # closed loop: the workers' first requests spread over this long (bench --ramp-up)

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
class LoadsConfig:
    operating: LoadLevel
    low: LoadLevel = field(default_factory=lambda: LoadLevel(concurrency=1))
    sweep: tuple[LoadLevel, ...] = ()

    def all_levels(self) -> tuple[LoadLevel, ...]:
        """Distinct levels in run order: low, operating, then the sweep."""
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


@dataclass(frozen=True, slots=True)
class Experiment:
    workload: WorkloadConfig
    baseline: ArmConfig
    speculation: SpeculationConfig
    loads: LoadsConfig
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    slos: SloTargets = field(default_factory=SloTargets)
    repeats: int = 1
    checks: bool = True
    cost: CostConfig | None = None
    candidate: CandidateConfig | None = None
    allow_extra_diff: bool = False
    name: str | None = None
    source: str = ""  # the file it came from

    @property
    def two_url_mode(self) -> bool:
        return self.candidate is not None and self.candidate.url is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for manifest.json); mappings become dicts, tuples lists."""
        return json.loads(json.dumps(asdict(self), default=lambda o: dict(o) if isinstance(o, Mapping) else str(o)))


# ---------------------------------------------------------------------------------------------------------------
# The YAML schema (pydantic, edge only).
# ---------------------------------------------------------------------------------------------------------------


class _Model(BaseModel):
    # strict: YAML already gives native types, so `true` is not silently a 1, nor 2.5 a float where ints belong.
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, strict=True)


class _Speculation(_Model):
    method: SpecMethod
    num_speculative_tokens: int = Field(ge=1, le=64)
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    engine_args: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> _Speculation:
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


class _Launch(_Model):
    engine: EngineKind
    command: list[str] = Field(min_length=1)
    port: int = Field(ge=1, le=65535)
    env: dict[str, str] = Field(default_factory=dict)
    ready_timeout_s: float = Field(default=600.0, gt=0)
    host: str = "127.0.0.1"
    health_path: str | None = None


class _Arm(_Model):
    url: str | None = None
    launch: _Launch | None = None
    model: str | None = None
    api_key_env: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> _Arm:
        if (self.url is None) == (self.launch is None):
            raise ValueError("give exactly one of `url` (a running server) or `launch` (a command to start)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self


class _Candidate(_Model):
    url: str | None = None
    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    model: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> _Candidate:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of `url` (two-URL mode) or `command` (explicit candidate command)")
        return self


class _Workload(_Model):
    spec: str = Field(min_length=1)
    num_prompts: int | None = Field(default=None, ge=1)
    api: Literal["completions", "chat"] = "completions"
    warmup_requests: int = Field(default=4, ge=0)


class _Sampling(_Model):
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    seed: int = Field(default=0, ge=0)
    max_tokens: int = Field(default=256, ge=1)
    min_tokens: int | None = Field(default=None, ge=0)
    ignore_eos: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)

    @model_validator(mode="after")
    def _check(self) -> _Sampling:
        if self.min_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must be <= max_tokens ({self.max_tokens})")
        return self


class _Load(_Model):
    concurrency: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0)
    arrival: Literal["poisson", "constant", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    ramp_up_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one_of(self) -> _Load:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("give exactly one of `concurrency` (closed loop) or `rate` (requests/s, open loop)")
        if self.ramp_up_s > 0 and self.concurrency is None:
            raise ValueError("ramp_up_s staggers closed-loop workers; with `rate` the arrival process sets the pacing")
        if self.concurrency is not None and (self.max_concurrency is not None or self.arrival != "poisson"):
            raise ValueError("arrival and max_concurrency apply to `rate` loads only")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError(f"burstiness shapes gamma arrivals only; set arrival: gamma (not {self.arrival})")
        return self


class _Loads(_Model):
    operating: _Load
    low: _Load = _Load(concurrency=1)
    sweep: list[_Load] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sweep_axis(self) -> _Loads:
        if len(self.sweep) == 1:
            raise ValueError("sweep needs at least 2 loads (or none)")
        kinds = {"concurrency" if lv.concurrency is not None else "rate" for lv in self.sweep}
        if len(kinds) > 1:
            raise ValueError("sweep mixes concurrency and rate loads; use one axis so a crossover can be found")
        return self


class _Slos(_Model):
    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    e2e_s: float | None = Field(default=None, gt=0)
    attainment: float = Field(default=0.9, gt=0, le=1)


class _Price(_Model):
    usd_per_hour: float = Field(ge=0)
    gpus: int = Field(default=1, ge=1)


class _Cost(_Model):
    baseline: _Price
    candidate: _Price | None = None  # None: the same as the baseline
    target_rate_rps: float | None = Field(default=None, gt=0)


class _Experiment(_Model):
    name: str | None = None
    workload: _Workload | str
    sampling: _Sampling = _Sampling()
    loads: _Loads
    slos: _Slos = _Slos()
    repeats: int = Field(default=1, ge=1, le=100)
    checks: bool = True
    cost: _Cost | None = None
    baseline: _Arm
    speculation: _Speculation
    candidate: _Candidate | None = None
    allow_extra_diff: bool = False

    @model_validator(mode="after")
    def _arms(self) -> _Experiment:
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
        return self


# ---------------------------------------------------------------------------------------------------------------
# Loading: YAML -> pydantic -> dataclasses, with one-line errors.
# ---------------------------------------------------------------------------------------------------------------


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; every problem is a one-line UserError naming the key path."""
    p = Path(path)
    name = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{name}: no such file; write one with `speculab init --url URL`") from None
    except OSError as e:
        raise UserError(f"{name}: cannot read: {e.strerror}") from None
    exp = parse_experiment(text, name)
    spec = resolve_workload_path(exp.workload.spec, p.parent)
    if spec == exp.workload.spec:
        return exp
    return replace(exp, workload=replace(exp.workload, spec=spec))


def resolve_workload_path(spec: str, base_dir: Path) -> str:
    """A relative file in a workload spec is relative to the experiment file, wherever speculab is run from."""
    for prefix in ("jsonl:", "sharegpt:", ""):
        if prefix and not spec.startswith(prefix):
            continue
        if not prefix and (not spec.endswith(".jsonl") or ":" in spec.split("/")[0]):
            continue
        path = Path(spec[len(prefix) :])
        if not path.is_absolute() and (base_dir / path).exists():
            return prefix + str(base_dir / path)
        return spec
    return spec


def parse_experiment(text: str, source: str = "experiment.yaml") -> Experiment:
    """Validate YAML text (source names it in messages)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(f"{source}{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of keys (workload, loads, baseline, speculation, ...)")
    try:
        m = _Experiment.model_validate(data)
    except ValidationError as e:
        raise UserError(_first_error(e, source)) from None
    return _to_experiment(m, source)


def _loc_str(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the schema model reached by following loc from the root (for did-you-mean)."""
    models: list[type[BaseModel]] = [_Experiment]
    for part in loc:
        nxt: list[type[BaseModel]] = []
        for mdl in models:
            if isinstance(part, int) or part not in mdl.model_fields:
                continue
            nxt.extend(_models_in(mdl.model_fields[part].annotation))
        if isinstance(part, int):
            continue  # list index: stay on the element model found by _models_in
        models = nxt
    return sorted({f for mdl in models for f in mdl.model_fields})


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)] if get_origin(annotation) else []


def _message(err: dict[str, Any]) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        key = str(err["loc"][-1])
        close = difflib.get_close_matches(key, _fields_at(tuple(err["loc"][:-1])), n=1, cutoff=0.6)
        return "unknown key" + (f"; did you mean `{close[0]}`?" if close else "")
    if kind == "missing":
        return "required key is missing"
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        limit = next(iter(ctx.values()))
        return (
            f"must be {bounds[kind]} {limit:g}" if isinstance(limit, int | float) else f"must be {bounds[kind]} {limit}"
        )
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}"
    if kind in ("too_short", "too_long"):
        return "must not be empty" if ctx.get("min_length") == 1 else err["msg"].lower()
    simple = {
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be a string (quote it)",
        "list_type": "must be a list, e.g. [a, b]",
        "dict_type": "must be a mapping of keys",
        "model_type": "must be a mapping of keys",
    }
    if kind in simple:
        if err["loc"] and err["loc"][0] == "workload" and len(err["loc"]) <= 2 and kind == "model_type":
            return "must be a workload spec string (as `speculab bench --workload` takes) or a mapping with `spec`"
        if err["loc"] and err["loc"][-1] == "command" and kind == "list_type":
            return 'must be a list of arguments, e.g. [python, -m, my.server, --port, "8000"]'
        return simple[kind]
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    return err["msg"][:1].lower() + err["msg"][1:]


def _first_error(e: ValidationError, source: str) -> str:
    errors = e.errors()
    # `workload` accepts a mapping or a string: pydantic reports both branches; keep the mapping's complaint.
    errors = [x for x in errors if not (len(x["loc"]) > 1 and x["loc"][0] == "workload" and "str" in str(x["loc"][1]))]
    # A misspelt key shows up as "missing X" and "unknown Y"; the unknown one (with its did-you-mean) helps more.
    errors.sort(key=lambda x: x["type"] != "extra_forbidden")
    cleaned = []
    for x in errors:
        loc = tuple(p for p in x["loc"] if p not in ("_Workload",))
        cleaned.append((loc, _message(x)))
    loc, msg = cleaned[0]
    more = f" (and {len(cleaned) - 1} more)" if len(cleaned) > 1 else ""
    where = _loc_str(loc)
    return f"{source}: {where}: {msg}{more}" if where else f"{source}: {msg}{more}"


def _load(m: _Load) -> LoadLevel:
    return LoadLevel(m.concurrency, m.rate, m.arrival, m.burstiness, m.max_concurrency, m.ramp_up_s)


def _to_experiment(m: _Experiment, source: str) -> Experiment:
    w = m.workload if isinstance(m.workload, _Workload) else _Workload(spec=m.workload)
    s, b, sp = m.sampling, m.baseline, m.speculation
    launch = None
    if b.launch is not None:
        la = b.launch
        launch = LaunchConfig(
            la.engine, tuple(la.command), la.port, dict(la.env), la.ready_timeout_s, la.host, la.health_path
        )
    cand = None
    if m.candidate is not None:
        c = m.candidate
        cand = CandidateConfig(
            c.url, tuple(c.command) if c.command else None, dict(c.env) if c.env is not None else None, c.port, c.model
        )
    cost = None
    if m.cost is not None:
        base_price = ArmPrice(m.cost.baseline.usd_per_hour, m.cost.baseline.gpus)
        cp = m.cost.candidate
        cost = CostConfig(base_price, ArmPrice(cp.usd_per_hour, cp.gpus) if cp else base_price, m.cost.target_rate_rps)
    return Experiment(
        name=m.name,
        workload=WorkloadConfig(w.spec, w.num_prompts, w.api, w.warmup_requests),
        sampling=SamplingConfig(
            s.temperature, s.top_p, s.top_k, s.seed, s.max_tokens, s.min_tokens, s.ignore_eos, s.logprobs
        ),
        loads=LoadsConfig(_load(m.loads.operating), _load(m.loads.low), tuple(_load(x) for x in m.loads.sweep)),
        slos=SloTargets(m.slos.ttft_s, m.slos.tpot_s, m.slos.e2e_s, m.slos.attainment),
        repeats=m.repeats,
        checks=m.checks,
        cost=cost,
        baseline=ArmConfig(b.url, launch, b.model, b.api_key_env),
        speculation=SpeculationConfig(
            sp.method,
            sp.num_speculative_tokens,
            sp.prompt_lookup_max,
            sp.prompt_lookup_min,
            sp.model,
            dict(sp.options),
            tuple(sp.engine_args),
        ),
        candidate=cand,
        allow_extra_diff=m.allow_extra_diff,
        source=source,
    )
