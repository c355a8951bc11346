"""The experiment file: YAML in, validated with pydantic at the edge, out as frozen dataclasses.

Every mistake becomes one `UserError` line naming the file and the key path, e.g.
`experiment.yaml: loads.sweep[2].rate: must be > 0`; unknown keys are rejected with a did-you-mean.
The schema is documented in docs/experiment.md.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from speculab.config.experiment import (
    DEFAULT_DECIDE_ON,
    MAX_PHASES,
    STREAM_UNARY_PROMPTS,
    AdaptiveRepeats,
    ArmConfig,
    ArmPrice,
    CandidateConfig,
    CostConfig,
    Experiment,
    LaunchConfig,
    LoadLevel,
    LoadPhase,
    LoadsConfig,
    SamplingConfig,
    SearchConfig,
    SloTargets,
    SpeculationConfig,
    WorkloadConfig,
    decide_on_metric,
    guardrail_floors,
    guardrail_names,
    margins,
)
from speculab.config.schema import (
    ChecksSchema,
    ExperimentSchema,
    LoadSchema,
    LoadsSchema,
    PhaseSchema,
    WorkloadSchema,
)
from speculab.errors import UserError, did_you_mean, user_text


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; every problem is a one-line UserError naming the key path."""
    p = Path(path)
    name = str(path)
    try:
        text = user_text(p.read_bytes(), name)
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


MAX_YAML_DEPTH = 64  # an experiment file nests a few levels; PyYAML composes recursively and would run out of stack


class _DepthLimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting past MAX_YAML_DEPTH with the line where it went past."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_experiment(text: str, source: str = "experiment.yaml") -> Experiment:
    """Validate YAML text (source names it in messages)."""
    try:
        data = yaml.load(text, Loader=_DepthLimitedLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(f"{source}{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of keys (workload, loads, baseline, speculation, ...)")
    try:
        m = ExperimentSchema.model_validate(data)
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
    models: list[type[BaseModel]] = [ExperimentSchema]
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


def _close_key(loc: tuple[Any, ...]) -> str | None:
    """The key of the schema at loc's parent closest to loc's last part (a misspelling's fix), if any is close."""
    close = difflib.get_close_matches(str(loc[-1]), _fields_at(loc[:-1]), n=1, cutoff=0.6)
    return close[0] if close else None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)] if get_origin(annotation) else []


def _message(err: dict[str, Any], loc: tuple[Any, ...]) -> str:
    """One error's text; `loc` is its key path without pydantic's branch names (for did-you-mean)."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key" + did_you_mean(loc[-1], _fields_at(loc[:-1]))
    if kind == "missing":
        return "required key is missing"
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        limit = next(iter(ctx.values()))
        return (
            f"must be {bounds[kind]} {limit:g}" if isinstance(limit, int | float) else f"must be {bounds[kind]} {limit}"
        )
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        return f"must be one of {expected}" + did_you_mean(err.get("input"), re.findall(r"'([^']*)'", expected))
    if kind == "string_pattern_mismatch" and loc and loc[-1] == "method":
        return "must be a method name (letters, digits, _ . + -), as the engine spells it: ngram, suffix, ngram-map-k"
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


_WRONG_SHAPE = ("list_type", "model_type", "model_attributes_type", "dict_type", "int_type", "int_parsing", "bool_type")
_BRANCH_NAMES = (
    "function-after[",
    "list[",
    "SpeculationSchema",
    "AdaptiveRepeatsSchema",
    "WorkersSchema",
    "ChecksSchema",
    "constrained-int",
)
_UNIONS = ("speculation", "repeats", "workers", "checks")  # keys that take either of two shapes


def _first_error(e: ValidationError, source: str) -> str:
    errors = e.errors()
    # `workload` accepts a mapping or a string: pydantic reports both branches; keep the mapping's complaint.
    errors = [x for x in errors if not (len(x["loc"]) > 1 and x["loc"][0] == "workload" and "str" in str(x["loc"][1]))]

    # `speculation` is one block or a list of them: drop the branch the input was not (a mapping is no list, and a
    # list is no mapping), and the branch names pydantic puts in the path
    # list is no mapping), and the branch names pydantic puts in the path. `repeats` (a number or {min, max, until})
    # and a load's `workers` (a number or {n, ray}) are the same, and so is `checks` (true/false or {stream_unary}).
    def union(loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
        i = next((i for i, p in enumerate(loc) if p in _UNIONS), None)
        return None if i is None else loc[: i + 1]

    for prefix in {u for x in errors if (u := union(x["loc"])) is not None}:
        if any(union(x["loc"]) == prefix and x["type"] not in _WRONG_SHAPE for x in errors):
            errors = [x for x in errors if not (union(x["loc"]) == prefix and x["type"] in _WRONG_SHAPE)]
    # A misspelt key shows up as "missing X" and "unknown Y"; the unknown one (with its did-you-mean) helps more.
    errors.sort(key=lambda x: x["type"] != "extra_forbidden")
    cleaned: list[tuple[tuple[Any, ...], str]] = []
    for x in errors:
        loc = tuple(
            p
            for p in x["loc"]
            if p not in ("WorkloadSchema", "int", "bool") and not (isinstance(p, str) and p.startswith(_BRANCH_NAMES))
        )
        cleaned.append((loc, _message(x, loc)))
    # a misspelt required key is also reported missing: the unknown key's did-you-mean already names it
    unknown = [loc for (loc, _), x in zip(cleaned, errors, strict=True) if x["type"] == "extra_forbidden"]
    fixes = {(*loc[:-1], close) for loc in unknown if (close := _close_key(loc)) is not None}
    kept = [(loc, msg) for (loc, msg), x in zip(cleaned, errors, strict=True)
            if not (x["type"] == "missing" and loc in fixes)]  # fmt: skip
    # every mistake is named (each unknown key with its fix), on one line
    lines = list(dict.fromkeys(f"{_loc_str(loc)}: {msg}" if loc else msg for loc, msg in kept))
    return f"{source}: " + "; ".join(lines)


def _load(m: LoadSchema) -> LoadLevel:
    n, ray = (m.workers, None) if isinstance(m.workers, int) else (m.workers.n, m.workers.ray)
    return LoadLevel(
        m.concurrency, m.rate, m.arrival, m.burstiness, m.max_concurrency, m.ramp_up_s, m.trace_speed, n, ray
    )


def _loads(m: LoadsSchema, source: str = "") -> LoadsConfig:
    if m.phases is not None:
        phased = _phased(m, source)
        return LoadsConfig(phased, phased, ())
    if m.search is None:
        assert m.operating is not None  # LoadsSchema: one of the two
        return LoadsConfig(_load(m.operating), _load(m.low), tuple(_load(x) for x in m.sweep))
    s = m.search
    search = SearchConfig.with_defaults(
        s.kind, s.low, s.high, s.tolerance, max_probes=s.max_probes, groups=s.groups, max_groups=s.max_groups
    )
    lowest = LoadLevel(concurrency=int(s.low)) if s.kind == "concurrency" else LoadLevel(rate_rps=s.low)
    return LoadsConfig(lowest, lowest, (), search)


def _phase(axis: str, value: float, duration_s: float) -> LoadPhase:
    return LoadPhase(round(value), None, duration_s) if axis == "concurrency" else LoadPhase(None, value, duration_s)


def expand_phase(m: PhaseSchema) -> list[LoadPhase]:
    """One entry of `loads.phases` -> its phases: itself, or what its shorthand stands for (docs/experiment.md)."""
    if m.concurrency is not None or m.rate is not None:
        assert m.duration_s is not None  # PhaseSchema: a plain phase has one
        return [LoadPhase(m.concurrency, m.rate, m.duration_s)]
    if m.ramp is not None:
        r = m.ramp
        step_s = r.over / r.steps
        return [_phase(r.axis, r.from_ + (r.to - r.from_) * i / (r.steps - 1), step_s) for i in range(r.steps)]
    if m.burst is not None:
        b = m.burst
        quiet = [_phase(b.axis, b.base, b.every - b.for_)]
        return quiet + [_phase(b.axis, b.peak, b.for_), *quiet] * b.times
    z = m.zigzag
    assert z is not None  # PhaseSchema: exactly one of the five
    low = [_phase(z.axis, z.low, z.every)]
    return low + [_phase(z.axis, z.high, z.every), *low] * z.times


def _phased(m: LoadsSchema, source: str) -> LoadLevel:
    """`loads: {phases: [...]}` -> one load that runs the schedule (its peak as its `concurrency` or `rate_rps`)."""
    assert m.phases is not None
    phases: list[LoadPhase] = []
    for entry in m.phases:
        phases.extend(expand_phase(entry))
    where = f"{source}: loads.phases" if source else "loads.phases"
    kinds = sorted({p.kind for p in phases})
    if len(kinds) > 1:
        raise UserError(f"{where}: mixes concurrency and rate phases; use one axis (a ramp or burst: its `axis`)")
    if len(phases) > MAX_PHASES:
        raise UserError(f"{where}: {len(phases)} phases, more than {MAX_PHASES}; use fewer or longer phases")
    peak = max(p.value for p in phases)
    closed = kinds[0] == "concurrency"
    return LoadLevel(
        concurrency=round(peak) if closed else None,
        rate_rps=None if closed else peak,
        phases=tuple(phases),
        transition_s=m.transition_s,
    )


def _stream_unary(checks: bool | ChecksSchema) -> int:
    """`checks:` -> the prompts sent unary per arm: the default with `true`, none with `false`, else as given."""
    if isinstance(checks, bool):
        return STREAM_UNARY_PROMPTS if checks else 0
    return checks.stream_unary


def _to_experiment(m: ExperimentSchema, source: str) -> Experiment:
    w = m.workload if isinstance(m.workload, WorkloadSchema) else WorkloadSchema(spec=m.workload)
    s, b = m.sampling, m.baseline
    specs = m.speculation if isinstance(m.speculation, list) else [m.speculation]
    launch = None
    if b.launch is not None:
        la = b.launch
        launch = LaunchConfig(
            la.engine,
            tuple(la.command),
            None if la.port == "auto" else la.port,
            dict(la.env),
            la.ready_timeout_s,
            la.host,
            la.health_path,
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
        cand_price = ArmPrice(cp.usd_per_hour, cp.gpus) if cp else base_price
        cost = CostConfig(base_price, cand_price, m.cost.target_rate_rps, m.cost.usd_per_kwh)
    return Experiment(
        name=m.name,
        workload=WorkloadConfig(w.spec, w.num_prompts, w.api, w.warmup_requests, w.fit),
        sampling=SamplingConfig(
            s.temperature, s.top_p, s.top_k, s.seed, s.max_tokens, s.min_tokens, s.ignore_eos, s.logprobs
        ),
        loads=_loads(m.loads, source),
        slos=SloTargets(m.slos.ttft_s, m.slos.tpot_s, m.slos.e2e_s, m.slos.attainment),
        repeats=m.repeats if isinstance(m.repeats, int) else m.repeats.max,
        adaptive=None
        if isinstance(m.repeats, int)
        else AdaptiveRepeats(m.repeats.min, m.repeats.max, m.repeats.until, m.repeats.mdc, m.repeats.spending),
        checks=m.checks is not False,
        python_checks=m.python_checks,
        stream_unary=_stream_unary(m.checks),
        cost=cost,
        baseline=ArmConfig(b.url, launch, b.model, b.api_key_env),
        speculations=tuple(
            SpeculationConfig(
                sp.method,
                sp.num_speculative_tokens,
                sp.prompt_lookup_max,
                sp.prompt_lookup_min,
                sp.model,
                dict(sp.options),
                tuple(sp.engine_args),
                sp.name,
            )
            for sp in specs
        ),
        candidate=cand,
        allow_extra_diff=m.allow_extra_diff,
        source=source,
        margin=margins(m.margin),
        decide_on=decide_on_metric(m.decide_on) if m.decide_on is not None else DEFAULT_DECIDE_ON,
        guardrails=guardrail_names(m.guardrails) if m.guardrails is not None else None,
        guardrail_floor=guardrail_floors(m.guardrail_floor),
        cache_reset=m.cache.reset,
    )
