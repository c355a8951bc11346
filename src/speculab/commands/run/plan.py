"""The A/B plan: what will run, decided (and checked) before anything starts or is sent.

`plan_experiment` loads the workload, derives each candidate's server command through its engine adapter, checks
the single-change rule (refusing a candidate that differs from the baseline in more than speculation), and returns a
frozen `RunPlan` whose `setup` is written to inputs.json as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from speculab.config import CostConfig, Experiment, LoadLevel, SpeculationConfig
from speculab.errors import UserError
from speculab.harness.analysis.groups import MIN_PAIRS, group_size
from speculab.harness.client.endpoint import RequestSampling
from speculab.harness.design import BASELINE, ArmInfo, LevelSpec, Setup, candidate_name
from speculab.harness.records import RequestSpec
from speculab.harness.results.ab_run import ChangeCheck, not_checked
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import adapter_for, diff_for, forced_by_launch, is_single_change, lossy_by_launch
from speculab.harness.servers.adapters.base import EngineAdapter, refuse_if_speculating
from speculab.harness.servers.adapters.flags import is_speculation_flag, redact_command
from speculab.harness.servers.process import ServerCommand, chosen_port_command, with_port
from speculab.harness.stats import ALPHA
from speculab.harness.workload.conversation import conversations
from speculab.harness.workload.fit import DEFAULT_FIT, pool_size, take
from speculab.harness.workload.items import Workload


@dataclass(frozen=True, slots=True)
class ArmPlan:
    """One arm: its description for the report, and how to reach (or start) its server."""

    info: ArmInfo
    launch: ServerCommand | None = None  # None: a running server at info.url
    model: str | None = None  # served model name; None: the server's only model
    api_key: str | None = field(default=None, repr=False)
    k: int | None = None  # speculative tokens per step (llama.cpp per-response acceptance needs it)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything the lifecycle needs; `setup` is written to inputs.json as it is."""

    setup: Setup
    arms: tuple[ArmPlan, ...]  # the baseline first
    changes: tuple[ChangeCheck, ...]
    loads: tuple[LoadLevel, ...]  # aligned with setup.levels
    sampling: RequestSampling
    api: str = "completions"
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # top_k, min_tokens: same for every arm
    logprobs: int | None = None  # top alternatives per token, requested from every arm (near-tie classification)
    warmup_requests: int = 4
    block_size: int | None = None  # two-URL mode: requests per block (None: 2 at concurrency 1, else 4 x it)
    memory_interval_s: float = 1.0
    stop_grace_s: float = 20.0
    request_timeout_s: float = 600.0
    source: str = ""  # the experiment file, resolved ("" when planned from text): what `run --resume DIR` rereads
    # fitting the items to the context before the first request (experiment.preflight): the whole set they come from
    # (empty: the setup's items), how many to take, the policy, and the context the user gave (--max-model-len)
    pool: tuple[RequestSpec, ...] = ()
    num_prompts: int | None = None
    fit_policy: str = DEFAULT_FIT
    max_model_len: int | None = None
    # warnings for the terminal before the run (a method the engine could not check): records the CLI words
    notes: tuple[ReportWarning, ...] = ()
    cache_reset: str = "between-blocks"  # `cache: {reset: between-blocks | never}` (servers.cache_reset)

    def __post_init__(self) -> None:
        if len(self.loads) != len(self.setup.levels):
            raise ValueError("loads and setup.levels must be aligned")
        if not self.arms or self.arms[0].info.name != BASELINE:
            raise ValueError("the first arm must be the baseline")

    @property
    def launch_mode(self) -> bool:
        return all(a.launch is not None for a in self.arms)


def arm_cycle(n: int) -> int:
    """Repeats in one full cycle of `arm_order` for n arms."""
    return n if n % 2 == 0 else 2 * n


def arm_order(n: int, repeat: int) -> list[int]:
    """The order of n arms in repeat `repeat` (1-based): rows of a balanced Latin square (Williams design), so over a
    full cycle every arm runs once in every position and follows every other arm equally often, and slow drift or a
    warm machine favours none. The cycle is n repeats (2n for odd n, each row then also reversed). With two arms
    this is ABBA: A B | B A | A B ..."""
    if n < 1 or repeat < 1:
        raise ValueError(f"arm_order needs n >= 1 and repeat >= 1, got {n}, {repeat}")
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:  # 0, 1, n-1, 2, n-2, ...
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    r = (repeat - 1) % arm_cycle(n)
    row = [(a + r % n) % n for a in first]
    return row[::-1] if r >= n else row


def _env_lines(base: Mapping[str, str], cand: Mapping[str, str]) -> list[str]:
    out = []
    for k in sorted(set(base) | set(cand)):
        if base.get(k) != cand.get(k):
            out.append(f"env {k}: {base.get(k, '(absent)')} -> {cand.get(k, '(absent)')}")
    return out


def derive_candidate(
    adapter: EngineAdapter,
    baseline: ServerCommand,
    speculation: SpeculationConfig,
    *,
    name: str,
    command: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> tuple[ServerCommand, ChangeCheck]:
    """The candidate's server command (derived by the adapter unless given) and its single-change check.

    verified: True when only speculation flags differ; False when more differs; None when it cannot be known
    (engine `other`, whose speculation flags speculab does not know)."""
    refuse_if_speculating(adapter, baseline.command)
    cmd = tuple(command) if command is not None else tuple(adapter.candidate_command(baseline.command, speculation))
    if baseline.port_chosen and port is None:  # on the port speculab chose for the baseline, given command or derived
        cmd = with_port(replace(baseline, command=cmd), baseline.port).command
    if command is None:  # the files the derived command names (TensorRT-LLM's options file), before any launch
        write_candidate_files(adapter.candidate_files(baseline.command, speculation))
    cand = replace(
        baseline,
        command=cmd,
        # the speculation's own environment on top (an engine knob that is no flag: SGLang's forced acceptance)
        env={**(dict(env) if env is not None else dict(baseline.env)), **speculation.env},
        port=port if port is not None else baseline.port,
        port_chosen=baseline.port_chosen and port is None,  # a candidate's own port is the user's
    )
    diff = diff_for(adapter, baseline.command, cmd)
    shown_env = _env_lines(baseline.env, cand.env)
    # what differs beyond speculation: the variables the speculation sets are part of its change, as its flags are
    env_diff = _env_lines({**baseline.env, **speculation.env}, cand.env)
    lines = tuple([*diff.lines(), *shown_env] if diff.differences else shown_env or diff.lines())
    if adapter.kind == "other":
        return cand, ChangeCheck(name, lines, None, not_checked("engine_other"))
    verified = is_single_change(diff, adapter) and not env_diff
    if verified:
        return cand, ChangeCheck(name, lines, True)
    extra = [
        d.describe()
        for d in diff.differences
        if not is_speculation_flag(d.flag, adapter.speculation_flags, adapter.speculation_prefixes)
    ]
    # what differs beyond speculation, as data ([]: the commands are identical); the report words the note
    differs = ReportWarning(
        WarningKind.CHANGE_NOT_SPECULATION, fields={"differs": [*extra, *env_diff], "allowed": False}
    )
    return cand, ChangeCheck(name, lines, False, differs)


def write_candidate_files(files: Mapping[str, str]) -> None:
    """Write what a derived candidate command names; an unwritable place is the user's to fix, in one line."""
    for path, text in files.items():
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")
        except OSError as e:
            raise UserError(
                f"cannot write {path} for the candidate's command ({e.strerror}); make it writable"
            ) from None


def enforce_single_change(change: ChangeCheck, allow_extra_diff: bool) -> ChangeCheck:
    """Refuse a candidate that differs in more than speculation, unless allowed (then say so in the record)."""
    if change.verified is not False:
        return change
    if not allow_extra_diff:
        if change.diff_lines == ("(the commands are identical)",):
            raise UserError(
                f"candidate {change.candidate}: its command is identical to the baseline's, so speculation would not "
                "be switched on; check the speculation block (or pass --allow-extra-diff for an A-vs-A run)"
            )
        differs = change.note.fields["differs"] if change.note is not None else []
        extra = "; ".join(differs) or "the commands are identical"
        raise UserError(
            f"candidate {change.candidate} differs from the baseline in more than speculation ({extra}); make the "
            "commands differ only in speculation, or pass --allow-extra-diff to run anyway"
        )
    # the record says the run went ahead, and why: the report adds it to the note's words
    assert change.note is not None
    return replace(change, note=replace(change.note, fields={**change.note.fields, "allowed": True}))


def _levels_and_loads(exp: Experiment) -> tuple[tuple[LevelSpec, ...], tuple[LoadLevel, ...]]:
    """Distinct levels in run order (low, operating, sweep), each with all its roles."""
    if exp.loads.search is not None:
        return (), ()  # a search places its levels as it goes (commands.run.probing)
    op = exp.loads.operating
    if op.phases:  # the whole schedule is one level, run as one block per arm and repeat
        phased = LevelSpec(op.kind, op.value, ("operating",), phases=op.phases, transition_s=op.transition_s)
        return (phased,), (op,)
    specs: dict[tuple[str, float], LevelSpec] = {}
    loads: dict[tuple[str, float], LoadLevel] = {}
    tagged = [(exp.loads.low, "low"), (exp.loads.operating, "operating"), *((lv, "sweep") for lv in exp.loads.sweep)]
    for lv, role in tagged:
        key = (lv.kind, lv.value)
        if key in specs:
            prev = specs[key]
            if role not in prev.roles:
                specs[key] = replace(prev, roles=(*prev.roles, role))
            continue
        rate = lv.kind == "rate"
        specs[key] = LevelSpec(
            lv.kind,
            lv.value,
            (role,),
            lv.arrival if rate else None,
            lv.max_concurrency if lv.kind != "concurrency" else None,
        )
        loads[key] = lv
    return tuple(specs.values()), tuple(loads[k] for k in specs)


def _api_key(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise UserError(f"baseline.api_key_env names {env_name}, which is not set; export it or remove the key")
    return key


def plan_experiment(
    exp: Experiment,
    *,
    allow_extra_diff: bool = False,
    on_change: Callable[[ChangeCheck], None] | None = None,
    max_model_len: int | None = None,
) -> RunPlan:
    """Load the workload, derive the candidate, check the single change. Nothing is started or sent.

    on_change sees each candidate's command difference before any refusal, so the user sees what differs."""
    from speculab.harness.workload.sources import load_workload

    w = exp.workload
    pool = load_workload(w.spec, seed=exp.sampling.seed, num_prompts=pool_size(w.spec, w.num_prompts), api=w.api)
    # the items as loaded; fitted to the context once it is known, before the first request (experiment.preflight)
    wl = replace(pool, items=take(pool.items, w.num_prompts, exp.sampling.seed))
    if exp.workload.api == "completions" and any(it.prompt is None for it in wl.items):
        raise UserError(f"{exp.source}: workload.api is completions but the workload has chat messages; use chat")
    levels, loads = _levels_and_loads(exp)
    trace_levels = [lv.label for lv in levels if lv.kind == "trace"]
    if trace_levels and not any(it.arrival_s is not None for it in wl.items):
        raise UserError(
            f"{exp.source}: loads {', '.join(trace_levels)} replay a trace's arrival times, but the workload "
            f"{exp.workload.spec!r} has none; use workload.spec: trace:PATH, or give those loads a rate"
        )
    _check_phased(exp, wl)
    for lv in loads:
        if lv.workers > 1 and lv.concurrency is not None and lv.concurrency < lv.workers:
            raise UserError(
                f"{exp.source}: loads at {lv.label}: workers: {lv.workers} needs a concurrency of at least "
                f"{lv.workers} (one stream per worker at least)"
            )
        if lv.ray is not None:
            from speculab.harness.load.ray_pool import check_address

            check_address(lv.ray)  # now, not after the baseline's first launch
    key = _api_key(exp.baseline.api_key_env)
    notes = _check_methods(exp)  # before anything is launched: a method the engine does not declare is refused
    if exp.two_url_mode:
        arms, changes = _two_url_arms(exp, key)
        if on_change is not None:
            on_change(changes[0])
    else:
        arms, changes = _launch_arms(exp, key, on_change)
        changes = tuple(enforce_single_change(c, allow_extra_diff or exp.allow_extra_diff) for c in changes)
    s = exp.sampling
    return RunPlan(
        setup=_setup(exp, wl, levels),
        arms=arms,
        changes=changes,
        loads=loads,
        sampling=RequestSampling(
            max_tokens=s.default_max_tokens,
            max_tokens_overrides_items=s.max_tokens is not None,  # as `bench --max-tokens`: the user's limit wins
            temperature=s.temperature,
            top_p=s.top_p,
            seed=s.seed,
            ignore_eos=s.ignore_eos,
        ),
        api=exp.workload.api,
        extra_body=sampling_extras(s.top_k, s.min_tokens),
        logprobs=s.logprobs,
        warmup_requests=exp.workload.warmup_requests,
        source=str(Path(exp.source).resolve()) if exp.source and Path(exp.source).is_file() else "",
        pool=pool.items,
        num_prompts=w.num_prompts,
        fit_policy=w.fit,
        max_model_len=max_model_len,
        notes=notes,
        cache_reset=exp.cache_reset,
    )


def _check_phased(exp: Experiment, wl: Workload) -> None:
    """A phased load runs its schedule as one block per arm (launched per block in launch mode; in two-URL mode each
    arm's server runs it whole in turn), single turns (one client process: its schema has no `workers`)."""
    op = exp.loads.operating
    if not op.phases:
        return
    where = f"{exp.source}: loads.phases"
    if any(it.turn is not None and it.turn > 1 for it in wl.items):
        raise UserError(f"{where}: a schedule sends single requests; use a single-turn workload")


def _check_methods(exp: Experiment) -> tuple[ReportWarning, ...]:
    """`speculation.method` names outside speculab's five and every entry's `options`, against the launched engine's
    own lists (docs/methods.md)."""
    from speculab.harness.servers.methods.here import check_methods

    la, specs = exp.baseline.launch, list(exp.speculations)
    whole = exp.candidate is not None and exp.candidate.command is not None
    why = "two_url" if la is None else "whole_command"  # why there is no command to ask, when there is none
    try:
        return check_methods(la.engine if la else "other", la.command if la and not whole else None, specs, why)
    except UserError as e:
        raise UserError(f"{exp.source}: {e}") from None


def _arm_infos(exp: Experiment) -> tuple[ArmInfo, tuple[ArmInfo, ...]]:
    """The baseline's and each candidate's description for the report (prices, method, k), before any URL."""
    cost = exp.cost
    base = ArmInfo(
        BASELINE,
        "plain",
        usd_per_hour=cost.baseline.usd_per_hour if cost else None,
        gpus=cost.baseline.gpus if cost else 1,
    )
    cands = candidate_infos(exp.speculations, cost, exp.source)
    return base, cands


def _two_url_arms(exp: Experiment, key: str | None) -> tuple[tuple[ArmPlan, ...], tuple[ChangeCheck, ...]]:
    """Both servers already run: the arms are their URLs; the single change cannot be verified."""
    base_info, (cand_info,) = _arm_infos(exp)
    c, k = exp.candidate, exp.speculation.num_speculative_tokens
    assert exp.baseline.url is not None and c is not None and c.url is not None
    base = ArmPlan(replace(base_info, url=exp.baseline.url), None, exp.baseline.model, key)
    cand = ArmPlan(replace(cand_info, url=c.url), None, c.model or exp.baseline.model, key, k)
    change = ChangeCheck(cand_info.name, (), None, not_checked("two_url"))
    return (base, cand), (change,)


def _launch_arms(
    exp: Experiment, key: str | None, on_change: Callable[[ChangeCheck], None] | None
) -> tuple[tuple[ArmPlan, ...], tuple[ChangeCheck, ...]]:
    """speculab launches every arm: each candidate's command is derived by the engine adapter from the baseline's
    (or given, for a single candidate) and diffed against it."""
    base_info, cand_infos = _arm_infos(exp)
    la, c = exp.baseline.launch, exp.candidate
    assert la is not None
    adapter = adapter_for(la.engine)
    # what the engine's reset endpoint needs in its environment (vLLM's dev mode), in every arm's alike: the
    # single-change check compares the environments too; a value the user set stays theirs
    reset_env = adapter.cache_reset.env if adapter.cache_reset and exp.cache_reset == "between-blocks" else {}
    base_cmd = ServerCommand(
        la.command, la.port or 0, {**reset_env, **la.env}, la.host, la.health_path or adapter.health_path,
        la.ready_timeout_s,
    )  # fmt: skip
    if la.port is None:  # `port: auto`
        base_cmd = chosen_port_command(base_cmd)
    base = ArmPlan(
        replace(base_info, url=base_cmd.url, engine=la.engine, command=redact_command(base_cmd.command)),
        base_cmd,
        exp.baseline.model,
        key,
    )
    cands, changes = candidate_arms(
        adapter,
        base_cmd,
        la.engine,
        exp.speculations,
        cand_infos,
        command=c.command if c is not None else None,
        env={**reset_env, **c.env} if c is not None and c.env is not None else None,
        port=c.port if c is not None else None,
        model=(c.model if c is not None else None) or exp.baseline.model,
        key=key,
        on_change=on_change,
    )
    arms = [base, *cands]
    return tuple(arms), tuple(changes)


def candidate_arms(
    adapter: EngineAdapter,
    base_cmd: ServerCommand,
    engine: str,
    speculations: Sequence[SpeculationConfig],
    infos: Sequence[ArmInfo],
    *,
    command: tuple[str, ...] | None = None,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    model: str | None = None,
    key: str | None = None,
    on_change: Callable[[ChangeCheck], None] | None = None,
) -> tuple[list[ArmPlan], list[ChangeCheck]]:
    """The list form of `speculation:`: one launched arm per speculation block, each derived from the baseline's
    command by the engine adapter (or `command`, for a single candidate), with its command difference. `speculab
    run` and `speculab demo` both build their candidates here."""
    arms, changes = [], []
    for sp, info in zip(speculations, infos, strict=True):
        cmd, change = derive_candidate(adapter, base_cmd, sp, name=info.name, command=command, env=env, port=port)
        if on_change is not None:
            on_change(change)
        forced = launch_forced(cmd)
        lossy = lossy_by_launch(cmd.command)  # after its files are written: TensorRT-LLM's options file says it
        shown = redact_command(cmd.command)
        arms.append(
            ArmPlan(
                replace(
                    info, url=cmd.url, engine=engine, command=shown, forced_acceptance=forced, lossy_acceptance=lossy
                ),
                cmd,
                model,
                key,
                sp.num_speculative_tokens,
            )
        )
        changes.append(change)
    return arms, changes


def launch_forced(cmd: ServerCommand) -> tuple[str, ...]:
    """What forces acceptance in a launched arm's command and the environment its server gets (this process's, with
    the arm's own on top, as `servers.process` starts it)."""
    return forced_by_launch(cmd.command, {**os.environ, **cmd.env})


def candidate_infos(
    speculations: Sequence[SpeculationConfig], cost: CostConfig | None = None, source: str = ""
) -> tuple[ArmInfo, ...]:
    """Each candidate's description (name, label, method, k, price); names must be distinct."""
    cands = tuple(
        ArmInfo(
            sp.name or candidate_name(sp.method, sp.num_speculative_tokens),
            sp.label,
            method=sp.method,
            num_speculative_tokens=sp.num_speculative_tokens,
            usd_per_hour=cost.candidate.usd_per_hour if cost else None,
            gpus=cost.candidate.gpus if cost else 1,
        )
        for sp in speculations
    )
    names = [c.name for c in cands]
    dup = next((n for n in names if names.count(n) > 1 or n == BASELINE), None)
    if dup is not None:
        raise UserError(
            f"{source}: two speculation blocks are both named {dup!r} (or one is named baseline): give each a "
            "distinct `name`"
        )
    return cands


def _setup(exp: Experiment, wl: Workload, levels: tuple[LevelSpec, ...]) -> Setup:
    """What was asked, as inputs.json records it (started/finished and versions are filled in by the run)."""
    s, cost = exp.sampling, exp.cost
    return Setup(
        name=exp.name or Path(exp.source).stem,
        workload_name=wl.name,
        workload_source=wl.source,
        synthesised_prompts=wl.synthesised,
        api=exp.workload.api,
        items=wl.items,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
        max_tokens=s.default_max_tokens,
        min_tokens=s.min_tokens,
        ignore_eos=s.ignore_eos,
        levels=levels,
        repeats=exp.repeats,
        sequential=None
        if exp.adaptive is None
        else {
            "min": exp.adaptive.min,
            "max": exp.adaptive.max,
            "until": exp.adaptive.until,
            "mdc": exp.adaptive.mdc,
            "spending": exp.adaptive.spending,
            "alpha": ALPHA,
            # looks only after whole rounds of the arms' order (launch mode: ABBA, or the Latin square's cycle),
            # so no look sees one arm favoured by position; two-URL mode balances every repeat block by block
            "round": 1 if exp.two_url_mode else arm_cycle(1 + len(exp.speculations)),
            "looks": [],
        },
        slo_ttft_s=exp.slos.ttft_s,
        slo_tpot_s=exp.slos.tpot_s,
        slo_e2e_s=exp.slos.e2e_s,
        slo_attainment=exp.slos.attainment,
        target_rate_rps=cost.target_rate_rps if cost else None,
        usd_per_kwh=cost.usd_per_kwh if cost else None,
        checks_enabled=exp.checks,
        stream_unary=exp.stream_unary,
        two_url_mode=exp.two_url_mode,
        margin=dict(exp.margin),
        decide_on=exp.decide_on,
        guardrails=exp.guardrails,
        guardrail_floor=dict(exp.guardrail_floor),
        search=_search_design(exp),
    )


def _search_design(exp: Experiment) -> dict[str, Any] | None:
    """What inputs.json says of a search before it starts: its design and the deciding metric; the run adds each
    round's loads, the candidate it follows and why it stopped (commands.run.probing)."""
    s = exp.loads.search
    if s is None:
        return None
    return {
        "kind": s.kind,
        "low": s.low,
        "high": s.high,
        "tolerance": s.tolerance,
        "max_probes": s.max_probes,
        "groups": s.groups,
        # only when set: a search recorded before the key resumes with the same plan identity (the default applies)
        **({"max_groups": s.max_groups} if s.max_groups is not None else {}),
        "metric": exp.decide_on,
        "rounds": [],
        "candidate": None,
        "stop": None,
    }


def sampling_extras(top_k: int | None, min_tokens: int | None) -> dict[str, Any]:
    """Sampling keys outside the OpenAI schema that vLLM, SGLang and speculab accept in the body."""
    out: dict[str, Any] = {}
    if top_k is not None:
        out["top_k"] = top_k
    if min_tokens is not None:
        out["min_tokens"] = min_tokens
    return out


def describe_plan(plan: RunPlan) -> list[str | ReportWarning]:
    """A few lines for the terminal before the run starts, then its warnings (records the CLI words)."""
    s = plan.setup
    lines: list[str | ReportWarning] = [
        f"workload {s.workload_name}: {len(s.items)} prompts; temperature {s.temperature:g}, max_tokens {s.max_tokens}",
        "loads: "
        + (", ".join(lv.label for lv in s.levels) or "placed by the search")
        + (
            f"; {s.repeats} repeat(s)" + (" alternating ABBA" if s.repeats > 1 else "")
            if s.sequential is None
            else f"; {s.sequential['min']} to {s.sequential['max']} repeats, until every verdict is decided "
            f"(alpha spent across looks: {s.sequential['spending']})"
        ),
        "arms: "
        + ", ".join(a.info.label for a in plan.arms)
        + (" (two-URL mode: blocks of requests interleaved)" if s.two_url_mode else " (launched one at a time)"),
    ]
    lines += plan.notes
    # At concurrency c the verdict's units are groups of c prompts sent together (analysis.groups): say before the
    # run, not after it, when a level cannot reach a verdict however large the effect.
    # a conversation's turns are one unit of the send order (docs/statistics.md)
    n = sum(1 for _ in conversations(s.items))
    what = "prompts" if n == len(s.items) else "conversations"
    for lv in s.levels:
        if lv.phases:
            continue  # a schedule sends as many as its time allows
        c = group_size(lv.kind, lv.value)  # an open loop's in-flight count is known only once it ran
        groups = -(-n // c)  # as analysis.groups.concurrent_groups cuts them: the last group may be partial
        if c > 1 and groups < MIN_PAIRS:
            few = {"at": lv.label, "n": n, "what": what, "groups": groups, "size": c, "min_groups": MIN_PAIRS}
            lines.append(ReportWarning(WarningKind.FEW_GROUPS, fields=few))
    return lines
