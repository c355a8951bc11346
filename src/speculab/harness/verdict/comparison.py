"""Per load and candidate: the paired comparisons (per prompt, in groups sent together), the gates that withhold a
verdict, the breakdowns by category, turn and prompt length.

See docs/results.md and docs/statistics.md for how each number is made."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from speculab.harness import stats
from speculab.harness.analysis import cost as costlib
from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN
from speculab.harness.analysis.comparison.metric_comparison import MetricComparison
from speculab.harness.analysis.comparison.paired import compare_paired, launch_effect
from speculab.harness.analysis.comparison.unpaired import compare_unpaired
from speculab.harness.analysis.energy import j_per_token, mean_power_w
from speculab.harness.analysis.figures import COMPARED_METRICS, E2E, HEADLINE, TPOT, compared_metric
from speculab.harness.analysis.groups import concurrent_groups, diverged_indices, group_size
from speculab.harness.analysis.metrics import REQUEST_VALUES, exceeds_error_rate, request_metrics, request_values
from speculab.harness.design import ArmInfo, LevelSpec, Setup
from speculab.harness.load.client_health import client_fell_behind
from speculab.harness.results.ab_run import ABRun, RepeatRun
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.results.warnings import WarningKind as Kind
from speculab.harness.verdict.arm_level import arm_price, over_repeats, repeat_metrics, throughput_known
from speculab.harness.verdict.model import NO_VERDICT, ArmLevel, LevelComparison, Ratio, ReportOptions
from speculab.harness.verdict.per_request import acceptance_vs_speedup, hit_rate_change, prompt_spread

# ---------------------------------------------------------------------------------------------------------------
# Per load: paired comparisons and gates.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunValues:
    """One repeat with its per-prompt values, each request's metrics computed once: value name (`REQUEST_VALUES`:
    every compared metric, prompt and output tokens) -> prompt index -> the values of its successful requests."""

    run: RepeatRun
    values: Mapping[str, Mapping[int, Sequence[float]]]


# The functions below take a level's runs as saved, or as `run_values` (what `compare_level` passes, so that the
# comparisons of every metric, the launch effects and the breakdowns read each request once).
Runs = Sequence[RepeatRun] | Sequence[RunValues]


def run_values(run: RepeatRun | RunValues) -> RunValues:
    """`run`'s per-prompt values (computed once: `run` itself when it holds them already)."""
    if isinstance(run, RunValues):
        return run
    values: dict[str, dict[int, list[float]]] = {name: defaultdict(list) for name in REQUEST_VALUES}
    for r in run.records:
        if r.warmup or not r.ok:
            continue
        for name, v in request_values(request_metrics(r)).items():
            if v is not None:
                values[name][r.index].append(float(v))
    return RunValues(run, values)


def _repeat_run(run: RepeatRun | RunValues) -> RepeatRun:
    return run.run if isinstance(run, RunValues) else run


def per_prompt(runs: Runs, metric: str) -> dict[int, float]:
    """Prompt index -> the median over repeats of one per-request value (`REQUEST_VALUES`; successful requests)."""
    values: dict[int, list[float]] = defaultdict(list)
    for run in map(run_values, runs):
        for i, v in run.values[metric].items():
            values[i].extend(v)
    return {i: statistics.median(v) for i, v in values.items()}


def per_request(runs: Runs, metric: str) -> dict[int, float]:
    """(repeat, index) -> one per-request value of each successful request, keyed repeat * 2**32 + index so that
    the keys sort in each repeat's send order (the unpaired comparison's samples)."""
    out: dict[int, float] = {}
    for run in sorted(map(run_values, runs), key=lambda r: r.run.repeat):
        one = per_prompt([run], metric)
        out |= {(run.run.repeat << 32) + i: v for i, v in one.items()}
    return out


def _diverged(*runs: Runs) -> frozenset[int]:
    """`analysis.groups.diverged_indices` over every record of `runs`."""
    return diverged_indices(r for rs in runs for run in rs for r in _repeat_run(run).records)


def ratio_of(c: MetricComparison) -> Ratio:
    lo, hi = c.speedup_interval
    return Ratio(
        c.metric,
        c.n_pairs,
        c.n_dropped,
        c.geomean_ratio,
        c.median_ratio,
        c.speedup,
        lo,
        hi,
        c.wilcoxon_p,
        c.verdict.value,
        c.min_detectable_change,
        c.note,
        c.n_units,
        c.group_size,
        c.margin,
        c.decision.value,
        c.to_decide if math.isfinite(c.to_decide) else None,
        c.launches,
        _unit(c),
        c.launch_spread if math.isfinite(c.launch_spread) else None,
        c.samples,
    )


def _unit(c: MetricComparison) -> str:
    if c.samples:
        return "unpaired"
    return "launch" if c.launch_ratio is not None else ("group" if c.group_size > 1 else "prompt")


def judge(
    inputs: ABRun,
    metric: str,
    cand: Mapping[int, float],
    base: Mapping[int, float],
    rng: np.random.Generator,
    opts: ReportOptions,
    size: int,
    margin: float,
    launch_effects: Sequence[float] = (),
    groups: Mapping[int, int] | None = None,
) -> MetricComparison:
    """One metric's comparison at one load: paired per prompt (in the groups sent together), or, when the arms
    did not send the same prompts (`Setup.paired` False), from two samples (`arm_values` gives both). Every verdict
    of a candidate against the baseline is made here (ranking's candidate against candidate is paired only: an
    unpaired comparison, `speculab compare`, has one candidate). `groups`: the level's `prompt_groups`, where the
    caller has them (they are made from every record otherwise, once per call). `metric`: a compared metric's
    name (`analysis.figures.COMPARED_METRICS`: its direction)."""
    lower = compared_metric(metric).lower_is_better
    if not inputs.setup.paired:
        return compare_unpaired(
            metric,
            cand,
            base,
            rng,
            lower_is_better=lower,
            n_resamples=opts.n_resamples,
            confidence=opts.confidence,
            group_size=size,
            margin=margin,
        )
    return compare_paired(
        metric,
        cand,
        base,
        rng,
        lower_is_better=lower,
        n_resamples=opts.n_resamples,
        groups=groups if groups is not None else prompt_groups(inputs, size),
        group_size=size,
        confidence=opts.confidence,
        margin=margin,
        launch_effects=launch_effects,
    )


def level_group_size(level: LevelSpec, base: ArmLevel | None = None, cand: ArmLevel | None = None) -> int:
    """`analysis.groups.group_size` at one load, from the two arms' measured requests in flight."""
    return group_size(level.kind, level.value, (a.achieved_concurrency for a in (base, cand) if a is not None))


def prompt_groups(inputs: ABRun, size: int) -> dict[int, int] | None:
    """Prompt index -> group of `size` prompts sent one after another (every arm sends the workload in its order;
    a conversation's turns are one unit); None at size 1. See analysis.groups.concurrent_groups. Without the
    prompts (another tool's file holds none), the records' indices are the send order: their position in the file."""
    if size <= 1:
        return None
    items = inputs.setup.items
    if not items:
        return concurrent_groups(sorted({r.index for run in inputs.runs for r in run.records if not r.warmup}), size)
    units = {it.index: it.conversation_id for it in items if it.conversation_id is not None}
    return concurrent_groups([it.index for it in items], size, units)


def arm_values(
    setup: Setup, cand_runs: Runs, base_runs: Runs, metric: str
) -> tuple[dict[int, float], dict[int, float], frozenset[int]]:
    """(candidate, baseline) values of one metric and the left-out indices, as the comparison counts them: per
    prompt, paired (`paired_per_prompt`); unpaired, each arm on its own: per index, the median over its repeats,
    where each arm's repeats sent the same prompts (`Setup.repeats_same_prompts`: a prompt repeated is one
    observation of it, not several), else every request its own value (`per_request`)."""
    if setup.paired:
        return paired_per_prompt(cand_runs, base_runs, metric)
    if not setup.repeats_same_prompts:
        return per_request(cand_runs, metric), per_request(base_runs, metric), frozenset()
    out, left = [], frozenset[int]()
    for runs in (cand_runs, base_runs):  # a turn whose context differed between this arm's repeats is left out
        div = _diverged(runs)
        out.append({i: v for i, v in per_prompt(runs, metric).items() if i not in div})
        left |= div
    return out[0], out[1], left


def paired_per_prompt(
    cand_runs: Runs, base_runs: Runs, metric: str
) -> tuple[dict[int, float], dict[int, float], frozenset[int]]:
    """(candidate, baseline) per-prompt values of one metric, without the conversation turns whose context
    differed between the arms (or repeats), and those left-out indices. Every paired comparison reads this."""
    diverged = _diverged(cand_runs, base_runs)
    cand, base = per_prompt(cand_runs, metric), per_prompt(base_runs, metric)
    if diverged:
        cand = {i: v for i, v in cand.items() if i not in diverged}
        base = {i: v for i, v in base.items() if i not in diverged}
    return cand, base, diverged


def _gate(
    level: LevelSpec, base: ArmLevel | None, cand: ArmLevel | None, cand_label: str, opts: ReportOptions
) -> tuple[str, ReportWarning | None]:
    """(gate, why as a record; None when "ok", a verdict may be given)."""
    if base is None or base.repeats == 0 or cand is None or cand.repeats == 0:
        which = "baseline" if base is None or base.repeats == 0 else cand_label
        return "missing", ReportWarning(Kind.GATE_NO_RUNS, fields={"side": which, "at": level.label})
    for side, a in (("baseline", base), (cand_label, cand)):
        if exceeds_error_rate(a.error_rate, opts.max_error_rate):
            fields = {
                "side": side,
                "error_rate": a.error_rate,
                "failed": a.error - a.errors_by_category.get("cancelled", 0),
                "counted": a.sent - a.errors_by_category.get("cancelled", 0),
                "max_error_rate": opts.max_error_rate,
                "first": a.first_error or "",
            }
            return "errors", ReportWarning(Kind.GATE_ERROR_RATE, fields=fields)
    acc = cand.acceptance
    if acc is not None and not acc.active:
        return "not active", ReportWarning(Kind.GATE_NO_DRAFTS, fields={"drafts": acc.drafts, "source": acc.source})
    for side, a in (("baseline", base), (cand_label, cand)):
        if a.load_fraction is not None and a.load_fraction < opts.min_load_fraction:
            achieved = a.achieved_rate_rps if level.open_loop else a.achieved_concurrency
            fields = {
                "side": side,
                "open_loop": level.open_loop,
                "kind": level.kind,
                "value": level.value,
                "achieved": achieved,
                "fraction": a.load_fraction,
                "min_fraction": opts.min_load_fraction,
            }
            return "load not achieved", ReportWarning(Kind.GATE_LOAD_NOT_ACHIEVED, fields=fields)
    for side, a in (("baseline", base), (cand_label, cand)):
        if client_fell_behind(a.client_cpu_share, a.client_loop_lag_p99_s):
            fields = {"side": side, "cpu_share": a.client_cpu_share, "loop_lag_p99_s": a.client_loop_lag_p99_s}
            return "load not achieved", ReportWarning(Kind.GATE_CLIENT_BEHIND, fields=fields)
    return "ok", None


def _repeat_tok_s(runs: Sequence[RepeatRun]) -> dict[int, float]:
    """Output tok/s per repeat, of the repeats that have a measured window (none: no throughput comparison)."""
    measured = (run for run in runs if any(not r.warmup for r in run.records) and throughput_known(run))
    return {run.repeat: repeat_metrics(run).output_tok_s for run in measured}


def _repeat_j_per_token(runs: Sequence[RepeatRun], tok_s: Mapping[int, float]) -> dict[int, float]:
    """Joules per output token per repeat, of the repeats with power samples and a throughput."""
    watts = {run.repeat: p for run in runs if (p := mean_power_w(run.memory)) is not None}
    return {j: j_per_token(watts[j], tok_s[j]) for j in sorted(set(watts) & set(tok_s)) if tok_s[j] > 0}


def _energy_ratio(b_runs: Sequence[RepeatRun], c_runs: Sequence[RepeatRun], b_tok: Mapping[int, float],
                  c_tok: Mapping[int, float]) -> stats.Interval | None:  # fmt: skip
    """J per output token candidate/baseline, paired by repeat as throughput is; None without power samples."""
    b_j, c_j = _repeat_j_per_token(b_runs, b_tok), _repeat_j_per_token(c_runs, c_tok)
    both = sorted(set(b_j) & set(c_j))
    if not both:
        return None
    return over_repeats(stats.repeat_ratio_interval([c_j[j] for j in both], [b_j[j] for j in both]))


def _memory_delta(base: ArmLevel, cand: ArmLevel) -> tuple[float | None, str]:
    if base.memory.gpu_peak_bytes is not None and cand.memory.gpu_peak_bytes is not None:
        return cand.memory.gpu_peak_bytes - base.memory.gpu_peak_bytes, "gpu"
    if base.memory.rss_peak_bytes is not None and cand.memory.rss_peak_bytes is not None:
        return cand.memory.rss_peak_bytes - base.memory.rss_peak_bytes, "rss"
    return None, ""


def compare_level(
    level: LevelSpec,
    cand_arm: ArmInfo,
    base_arm: ArmInfo,
    arms: Mapping[str, ArmLevel],
    inputs: ABRun,
    rng: np.random.Generator,
    opts: ReportOptions,
) -> LevelComparison:
    base, cand = arms.get(base_arm.name), arms.get(cand_arm.name)
    gate, reason = _gate(level, base, cand, cand_arm.label, opts)
    if gate == "missing" or base is None or cand is None:
        return LevelComparison(cand_arm.name, gate, reason, NO_VERDICT, (), None, None, None, "")
    b_runs, c_runs = inputs.runs_for(base_arm.name, level.key), inputs.runs_for(cand_arm.name, level.key)
    b_vals, c_vals = [run_values(r) for r in b_runs], [run_values(r) for r in c_runs]
    ratios = []
    values: dict[str, tuple[dict[int, float], dict[int, float]]] = {}
    size = level_group_size(level, base, cand)
    groups = prompt_groups(inputs, size)
    diverged: frozenset[int] = frozenset()
    launched = not inputs.setup.two_url_mode
    paired = inputs.setup.paired
    for metric in (c.name for c in COMPARED_METRICS):
        cand_values, base_values, diverged = arm_values(inputs.setup, c_vals, b_vals, metric)
        values[metric] = (cand_values, base_values)
        effects = launch_effects(c_vals, b_vals, metric, groups, size) if launched else []
        margin = margin_of(opts, metric)
        ratios.append(ratio_of(judge(inputs, metric, *values[metric], rng, opts, size, margin, effects, groups)))
    # the breakdowns and acceptance against speedup are per prompt (of the headline): nothing to say without pairs
    breakdown = _Breakdown(values[HEADLINE.name], rng, opts, groups, size)
    by_category = breakdown(_categories(inputs)) if paired else ()
    by_turn = breakdown(_turns(inputs)) if paired else ()
    by_length = breakdown(_prompt_lengths(per_prompt(b_vals, "prompt_tokens"))) if paired else ()
    b_tok, c_tok = _repeat_tok_s(b_runs), _repeat_tok_s(c_runs)
    common = sorted(set(b_tok) & set(c_tok))
    tput = cost_ratio = None
    if common:
        tput = over_repeats(stats.repeat_ratio_interval([c_tok[j] for j in common], [b_tok[j] for j in common]))
        bp, cp = arm_price(base_arm), arm_price(cand_arm)
        if bp is not None and cp is not None and bp.replica_usd_per_hour > 0:
            cost_ratio = over_repeats(
                costlib.cost_ratio_interval([c_tok[j] for j in common], [b_tok[j] for j in common], cp, bp)
            )
    mem, kind = _memory_delta(base, cand)
    if gate == "not active":
        verdict = decision = "speculation not active"
    elif gate != "ok":
        verdict, decision = NO_VERDICT, gate  # the report says why, from gate_reason
    else:  # the headline's: the first compared metric (the figures table puts it first; a test holds it there)
        verdict, decision = ratios[0].verdict, ratios[0].decision
    cand_tpot, base_tpot = values[HEADLINE.name]
    spread = None
    if paired and gate == "ok" and ratios[0].metric == HEADLINE.name:
        b50, c50 = base.distributions[HEADLINE.name].p50, cand.distributions[HEADLINE.name].p50
        medians = b50 / c50 if c50 > 0 else math.nan
        spread = prompt_spread(base_tpot, cand_tpot, ratios[0].speedup, medians, ratios[0].margin)
    short = _single_token(values[E2E.name], values[TPOT.name], c_vals, b_vals) if paired else 0
    return LevelComparison(
        candidate=cand_arm.name,
        gate=gate,
        gate_reason=reason,
        verdict=verdict,
        metrics=tuple(ratios),
        throughput_ratio=tput,
        cost_ratio=cost_ratio,
        memory_delta_bytes=mem,
        memory_kind=kind,
        by_category=by_category,
        acceptance_speedup=acceptance_vs_speedup(c_runs, base_tpot, cand_tpot, inputs.setup.items) if paired else None,
        prefix_cache=hit_rate_change(base, cand),
        by_turn=by_turn,
        by_prompt_length=by_length,
        diverged=len(diverged),
        decision=decision,
        launches=ratios[0].launches,
        launched=launched,
        single_token=short,
        prompt_spread=spread,
        energy_ratio=_energy_ratio(b_runs, c_runs, b_tok, c_tok),
    )


def _single_token(
    e2e: tuple[dict[int, float], dict[int, float]],
    tpot: tuple[dict[int, float], dict[int, float]],
    cand_runs: Runs,
    base_runs: Runs,
) -> int:
    """Prompts both arms answered (an E2E pair) with no TPOT pair because an arm's answer was one token."""
    unpaired = (e2e[0].keys() & e2e[1].keys()) - (tpot[0].keys() & tpot[1].keys())
    outs = per_prompt(cand_runs, "output_tokens"), per_prompt(base_runs, "output_tokens")
    return sum(1 for i in unpaired if any(o.get(i, 2) <= 1 for o in outs))


def margin_of(opts: ReportOptions, metric: str) -> float:
    """The margin a metric is decided against: the options' (build_report resolves the run's own), else the default;
    a breakdown's subsets (categories, turns, lengths) are the headline's (TPOT)."""
    margins = opts.margin or {}
    return float(margins.get(metric, margins.get(HEADLINE.name, DEFAULT_MARGIN)))


def launch_effects(
    cand_runs: Runs, base_runs: Runs, metric: str, groups: Mapping[int, int] | None, size: int
) -> list[float]:
    """One effect per launch pair (repeat j of each arm: in launch mode each repeat is a fresh server process per
    arm), for the repeats both arms finished; interrupted repeats are left out (their server stopped mid-level)."""
    by_repeat = {b.run.repeat: b for b in map(run_values, base_runs) if not b.run.interrupted}
    out = []
    for c in sorted(map(run_values, cand_runs), key=lambda v: v.run.repeat):
        b = by_repeat.get(c.run.repeat)
        if b is None or c.run.interrupted:
            continue
        cand, base, _ = paired_per_prompt([c], [b], metric)
        e = launch_effect(cand, base, groups, size)
        if e is not None:
            out.append(e)
    return out


class _Breakdown:
    """TPOT speedup per subset of prompts (category, turn, prompt-length bucket), each subset paired and judged like
    the whole load; a subset's prompts keep the level's groups (those sent together are one unit)."""

    def __init__(
        self,
        tpot: tuple[dict[int, float], dict[int, float]],
        rng: np.random.Generator,
        opts: ReportOptions,
        groups: dict[int, int] | None,
        size: int,
    ):
        self.tpot, self.rng, self.opts, self.groups, self.size = tpot, rng, opts, groups, size

    def __call__(self, subsets: Sequence[tuple[str, set[int]]]) -> tuple[Ratio, ...]:
        """`subsets`: (label, indices) in display order; nothing when fewer than two subsets (the whole load)."""
        if len(subsets) < 2:
            return ()
        cand, base = self.tpot
        out = []
        for label, idx in subsets:
            c = compare_paired(
                label,
                {i: v for i, v in cand.items() if i in idx},
                {i: v for i, v in base.items() if i in idx},
                self.rng,
                n_resamples=self.opts.n_resamples,
                groups=self.groups,
                group_size=self.size,
                confidence=self.opts.confidence,
                margin=margin_of(self.opts, HEADLINE.name),
            )
            out.append(ratio_of(c))
        return tuple(out)


def _categories(inputs: ABRun) -> list[tuple[str, set[int]]]:
    """Workload categories (input-grounded prompts are where n-gram drafts hit), by name."""
    cats: dict[str, set[int]] = defaultdict(set)
    for it in inputs.setup.items:
        if it.category:
            cats[it.category].add(it.index)
    return sorted(cats.items())


def _turns(inputs: ABRun) -> list[tuple[str, set[int]]]:
    """Conversation turns ("turn 1", "turn 2", ...; single-turn items count as turn 1), when there are turns > 1."""
    turns: dict[int, set[int]] = defaultdict(set)
    for it in inputs.setup.items:
        turns[it.turn or 1].add(it.index)
    return [(f"turn {t}", idx) for t, idx in sorted(turns.items())] if len(turns) > 1 else []


# Prompt-length buckets, tokens (the server's prompt_tokens, baseline median over repeats): fixed edges, so two runs'
# buckets compare; acceptance decays with long context, and users gate speculation by length.
PROMPT_LENGTH_EDGES = (128, 512, 2048, 8192, 32768)


def prompt_length_bucket(tokens: float) -> int:
    """The bucket of a prompt of `tokens` tokens: 0 for < 128, 1 for 128-511, ..., 5 for >= 32768."""
    return sum(tokens >= e for e in PROMPT_LENGTH_EDGES)


def prompt_length_label(bucket: int) -> str:
    edges = (0, *PROMPT_LENGTH_EDGES)
    if bucket == len(PROMPT_LENGTH_EDGES):
        return f">= {edges[-1]:,} prompt tokens"
    return f"{edges[bucket]:,}-{edges[bucket + 1] - 1:,} prompt tokens"


def _prompt_lengths(prompt_tokens: Mapping[int, float]) -> list[tuple[str, set[int]]]:
    buckets: dict[int, set[int]] = defaultdict(set)
    for i, n in prompt_tokens.items():
        buckets[prompt_length_bucket(n)].add(i)
    return [(prompt_length_label(b), idx) for b, idx in sorted(buckets.items())]
