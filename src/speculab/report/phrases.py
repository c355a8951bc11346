"""The sentences made from the verdict: the hyperfine-style line per candidate, the best per load, the warnings, the
phrases the views share. Made here, when rendering, from the model's numbers and decisions (formatted by
`formatting`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from speculab.harness.verdict.model import (
    E2E,
    FORCED,
    HEADLINE,
    MIN_LAUNCHES,
    NO_VERDICT,
    TPOT,
    CandidateReport,
    CorrectnessComparison,
    CrossoverStatus,
    Decision,
    Direction,
    Interval,
    LevelComparison,
    PositionAcceptance,
    Ratio,
    Report,
    ReportWarning,
    WarningKind,
)
from speculab.report.formatting import (
    fine_speedup,
    interval,
    margin_pct,
    relative_change,
    signed_bytes,
    speedup,
    speedup_range,
)
from speculab.report.recommendation import guardrail_lines as guardrail_lines
from speculab.report.recommendation import recommendation_lines as recommendation_lines
from speculab.report.words import VERDICT_WORDS, WORDS

# ---------------------------------------------------------------------------------------------------------------
# The verdict line.
# ---------------------------------------------------------------------------------------------------------------


def decision_of(r: Ratio) -> str:
    """The answer to show: the decision against the margin, or in a summary written before margins the verdict."""
    return r.decision or r.verdict


MUCH_MORE = 20  # beyond this many times the data, "about 2.2e+03×" says less than "over 20×"


def decision_phrase(r: Ratio, what: str = "TPOT", where: str = "") -> str:
    """One metric's answer with its numbers, `where` (' at concurrency 1') after the answer: 'TPOT 1.84× faster
    [1.71–1.97] at concurrency 1, beyond the ±3% margin'."""
    rng = speedup_range(r.speedup_low, r.speedup_high)
    est, margin = fine_speedup(r.speedup), margin_pct(r.margin)
    if r.unit == "unpaired":  # every answer from two samples says so where it is read
        where = f"{where} (unpaired)"
    d = decision_of(r)
    beyond = f", beyond the {margin} margin" if r.decision else ""  # a summary before margins had none
    if d == Decision.FASTER.value:
        return f"{what} {est} faster {rng}{where}{beyond}"
    if d == Decision.SLOWER.value:
        return f"{what} {est} (slower) {rng}{where}{beyond}"
    if d == Decision.EQUIVALENT.value:
        clear = {"faster": ": detectably faster, but", "slower": ": detectably slower, but"}.get(r.verdict, "")
        return f"{what} equivalent{where}: no difference larger than {margin} ({est} {rng}{clear} within the margin)"
    if d == Decision.INCONCLUSIVE.value:
        units = {"launch": "launches (repeats)", "unpaired": "requests of both runs"}.get(r.unit, "prompts")
        if r.to_decide is not None and r.to_decide <= MUCH_MORE:
            more = f"; about {r.to_decide:.2g}× the {units} would likely decide it"
        elif r.to_decide is not None:
            more = f"; it would take over {MUCH_MORE}× the {units} to decide it"
        else:
            more = "; it sits on the margin, where more data is unlikely to decide it"
        return f"{what} inconclusive{where}: {est} {rng} straddles the {margin} margin{more}"
    if d == Decision.INSUFFICIENT.value:
        return f"{what}: not enough {'data' if r.unit == 'unpaired' else 'paired data'}{where}"
    mdc = r.min_detectable_change  # a summary before margins: its "no detectable difference"
    could = f", could have detected ±{mdc:.0%}" if math.isfinite(mdc) else ""
    return f"{what} no detectable difference{where} ({speedup(r.speedup)} {rng}{could})"


def level_phrase(comp: LevelComparison, label: str) -> str:
    """'TPOT 1.84× faster [1.71–1.97] at concurrency 1, beyond the ±3% margin' or the gate's reason."""
    if comp.gate == "not active":
        return f"speculation not active at {label}"
    if comp.gate != "ok":
        return f"no verdict at {label} ({comp.gate})"
    tp = comp.metric(HEADLINE.name)
    if tp is None:
        return f"no TPOT at {label}"
    return decision_phrase(tp, where=f" at {label}")


def launch_phrase(comp: LevelComparison) -> str:
    """What the interval says about server launches: counted as the unit, or unmeasured (the margin covers it)."""
    tp = comp.metric(HEADLINE.name)
    if tp is not None and tp.unit == "launch":
        return f"launch to launch variation is in the interval ({tp.launches} launches per arm are its units)"
    if comp.launched:
        n = comp.launches
        return (
            f"launch effect unmeasured ({n} launch{'es' if n != 1 else ''} per arm; {MIN_LAUNCHES} or more repeats "
            "put it in the interval): the margin is what covers it"
        )
    return "the two servers' own difference is unmeasured (one process each): the margin is what covers it"


# what a view shows for a quantity the arm's result file does not hold (`ArmLevel.not_in_file`): never a number
NOT_IN_FILE = "not in the file"


def samples_phrase(r: Ratio) -> str:
    """What an unpaired comparison counted: 'unpaired: 40 B vs 38 A requests (in 10 + 10 groups of 4 sent
    together)'; "" for a paired one."""
    if r.unit != "unpaired" or len(r.samples) != 2:
        return ""
    cand, base = r.samples
    groups = f" (in {r.n_units} groups of up to {r.group_size} sent together)" if r.group_size > 1 else ""
    return f"unpaired: {cand} B vs {base} A requests{groups}"


def pairs_phrase(comp: LevelComparison) -> str:
    """Why TPOT has fewer pairs than E2E ("" when it has as many): TPOT needs two output tokens."""
    tp, e2e = comp.metric(TPOT.name), comp.metric(E2E.name)
    n = comp.single_token
    if not n or tp is None or e2e is None:
        return ""
    answers = "answer was" if n == 1 else "answers were"
    return f"TPOT pairs {tp.n_pairs} of {e2e.n_pairs}: {n} {answers} one token, and TPOT needs two"


def verdict_line(report: Report, cand: CandidateReport) -> str:
    """The hyperfine-style one-liner of one candidate; every part names its load, interval or source."""
    levels, crossover, acc, correctness = report.levels, cand.crossover, cand.acceptance, cand.correctness
    if not any(lv.arm(cand.name) is not None for lv in levels):
        return f"{cand.label}: not run"  # nothing measured, so nothing else to say (its acceptance is not "unknown")
    shown = [lv for lv in levels if {"low", "operating"} & set(lv.roles)] or list(levels[:2])
    phrases = []
    for lv in shown:
        comp = lv.comparison(cand.name)
        if comp is not None:
            phrases.append(level_phrase(comp, lv.label))
    head = "; ".join(phrases) if phrases else "no load level ran"
    parts = [head]
    if label := effect_label(report, cand):
        parts.append(label)
    any_faster = any(
        (c := lv.comparison(cand.name)) is not None
        and c.gate == "ok"
        and (tp := c.metric(HEADLINE.name)) is not None
        and decision_of(tp) == Direction.FASTER.value
        for lv in levels
    )
    if crossover is not None and any_faster:
        unit = "" if crossover.axis == "concurrency" else " req/s"
        if crossover.status == CrossoverStatus.CROSSES.value and crossover.load is not None:
            lo = ("≤" if crossover.low_censored else "") + f"{crossover.low:.3g}"
            hi = ("≥" if crossover.high_censored else "") + f"{crossover.high:.3g}"
            parts.append(f"crossover ≈ {crossover.load:.3g}{unit} [{lo}–{hi}]")
        else:
            parts.append(f"crossover: {crossover.status}")
    if acc is not None:
        if acc.active and acc.acceptance_length is not None:
            # a draw's acceptance (forced) is never said as a measured one
            forced = "forced, not measured: " if acc.provenance == FORCED else ""
            parts.append(f"acceptance length {acc.acceptance_length:.2f} ({forced}{acc.source})")
        elif not acc.active:
            parts.append(f"no drafts ({acc.source})")
    else:
        parts.append("acceptance unknown (engine reports none)")
    op = next((lv for lv in levels if "operating" in lv.roles), None)
    comp = op.comparison(cand.name) if op is not None else None
    if comp is not None and comp.memory_delta_bytes is not None:
        parts.append(f"memory {signed_bytes(comp.memory_delta_bytes)} ({comp.memory_kind})")
    if comp is not None and comp.cost_ratio is not None and math.isfinite(comp.cost_ratio.estimate):
        parts.append(f"$/1M tokens {ratio_phrase(comp.cost_ratio)} at the operating point")
    elif comp is not None and comp.throughput_ratio is not None and math.isfinite(comp.throughput_ratio.estimate):
        parts.append(f"output tok/s {ratio_phrase(comp.throughput_ratio)} at the operating point")
    if correctness is not None:
        parts.append(f"correctness: {reason_text(correctness.verdict)}")
        if checks := checks_phrase(correctness, {a.name: a.label for a in report.arms}):
            parts.append(checks)
        if (dg := correctness.degeneration) is not None and dg.n_prompts and dg.verdict != correctness.verdict:
            parts.append(f"degeneration: {reason_text(dg.verdict)}")  # an output looped, in either arm
    moved = next(
        (
            (lv, c.prefix_cache)
            for lv in levels
            if (c := lv.comparison(cand.name)) and c.prefix_cache and c.prefix_cache.beyond_noise
        ),
        None,
    )
    if moved is not None:
        change = moved[1]
        parts.append(f"at {moved[0].label}, {prefix_cache_phrase(change.baseline_hit_rate, change.candidate_hit_rate)}")
    return f"{cand.label}: " + "; ".join(parts)


def effect_label(report: Report, cand: CandidateReport) -> str:
    """What the verdict line's speedups are: the per-prompt effect (paired), or the two-sample shift (unpaired); ""
    when no load has a TPOT answer."""
    units = {
        tp.unit
        for lv in report.levels
        if (c := lv.comparison(cand.name)) is not None
        and c.gate == "ok"
        and (tp := c.metric(HEADLINE.name)) is not None
    }
    if not units:
        return ""
    if units == {"unpaired"}:
        return "speedups are two-sample shifts (Hodges–Lehmann), not ratios of the medians"
    return "speedups are per-prompt effects (Hodges–Lehmann), not ratios of the medians"


def non_inferiority_phrase(c: CorrectnessComparison) -> str:
    """'checks pass rate not worse by more than 5 points (−1.2 points, ≥ −4.8)'."""
    d, m = c.pass_rate_difference, c.non_inferiority_margin * 100
    assert d is not None
    low = f"{d.low * 100:+.1f}".replace("-", "−")
    what = {
        "not worse": f"not worse by more than {m:g} points",
        "worse": f"worse by more than {m:g} points",
        "inconclusive": f"inconclusive against the {m:g}-point margin",
    }[c.non_inferiority]
    return f"checks pass rate {what} ({d.estimate * 100:+.1f} points, one-sided bound {low})"


def checks_phrase(c: CorrectnessComparison, labels: Mapping[str, str]) -> str:
    """What the checks say about speculation: where the arms agree on every check, that agreement (and how many fail
    on the baseline as well: the checks, not speculation), never an "inconclusive" difference; else the
    non-inferiority answer, with the checks that fail in both arms. "" without checks."""
    b, cand = c.baseline_checks, c.candidate_checks
    if b is None or cand is None:
        return ""
    n, both, plain = min(b.checked, cand.checked), c.checks_fail_both, labels.get(b.arm, b.arm)
    if c.pass_rate_difference is not None and c.pass_rate_difference.n:
        n = c.pass_rate_difference.n  # the prompts checked in both arms
    as_well = f"{both} of {n} checks fail on {plain} as well: the checks, not speculation"
    if c.mcnemar_b == 0 and c.mcnemar_c == 0:  # no discordant pair: the arms agree on every check
        if both == n:
            return as_well
        same = f"checks: the same outcome in both arms on all {n} prompts"
        if both:
            return f"{same}; {as_well}"
        if c.non_inferiority == "not worse" and c.pass_rate_difference is not None:
            return f"{same}; {non_inferiority_phrase(c)}"
        return same
    if not c.non_inferiority or c.pass_rate_difference is None:
        return as_well if both else ""
    return non_inferiority_phrase(c) + (f"; {as_well}" if both else "")


def failure_lines(failures: Sequence[ReportWarning], n_failures: int) -> list[str]:
    """A list of failed checks as shown, and how many more there are ("and 8 more")."""
    more = n_failures - len(failures)
    said = [reason_text(f) for f in failures]
    return [*said, f"and {more} more"] if more > 0 else said


def ratio_phrase(iv: Interval) -> str:
    """A repeat-based ratio as a change with its interval: '−38% [−45%…−30%]', or why there is no verdict."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        why = f", too few for an interval, which needs {MIN_LAUNCHES}" if 1 < iv.n < MIN_LAUNCHES else ", no interval"
        return f"{relative_change(iv.estimate)} ({iv.n} paired repeat{'s' if iv.n != 1 else ''}{why})"
    rng = f"[{relative_change(iv.low)}…{relative_change(iv.high)}]"
    if iv.low <= 1.0 <= iv.high:
        return f"no detectable change ({relative_change(iv.estimate)} {rng})"
    return f"{relative_change(iv.estimate)} {rng}"


UNDECIDED_ANSWERS = (Decision.INCONCLUSIVE.value, Decision.INSUFFICIENT.value)


def decision_of_ranked(r: Any) -> str:
    return r.decision or r.verdict


def best_lines(report: Any) -> list[str]:
    """One line per load: which candidate pays there ("at concurrency 1: ngram k=4, 2.10× [1.80–2.40]"), or that
    none does; with ties the paired test cannot break, the tied candidates are named."""
    out = []
    for lv in report.levels:
        roles = f" (the {' and '.join(lv.roles)} load)" if lv.roles else ""
        if lv.best is None:
            # a candidate that never ran here has a comparison (gate "missing") but no place in the ranking
            entries = list(lv.comparisons) or list(lv.ranking)
            gated = [r for r in entries if r.gate != "ok"]
            open_ = [r for r in lv.ranking if r.gate == "ok" and decision_of_ranked(r) in UNDECIDED_ANSWERS]
            if gated and len(gated) == len(entries):
                out.append(f"at {lv.label}{roles}: undecided (no verdict for any candidate: see the table)")
            elif gated or open_:
                out.append(f"at {lv.label}{roles}: undecided (no candidate shown faster beyond the margin yet)")
            else:
                out.append(
                    f"at {lv.label}{roles}: none pays (no candidate is faster than the baseline beyond the margin)"
                )
            continue
        r = next(x for x in lv.ranking if x.candidate == lv.best)
        rng = speedup_range(r.speedup_low, r.speedup_high)
        text = f"at {lv.label}{roles}: {r.label}, TPOT {speedup(r.speedup)} faster {rng}"
        if lv.tied_with_best:
            labels = {x.candidate: x.label for x in lv.ranking}
            text += f"; cannot be told apart from {', '.join(labels[t] for t in lv.tied_with_best)}"
        out.append(text)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The warnings: one sentence per kind (the model's `ReportWarning` records), like hyperfine's warnings enum.
# ---------------------------------------------------------------------------------------------------------------


# what was done to an arm's server's caches before its blocks (`ArmLevel.cache_resets`), in outcome order
_CACHE_RESETS = (
    ("reset", "cache reset"),
    ("refused", "cache reset refused"),
    ("unavailable", "no cache reset (the engine has no endpoint)"),
    ("off", "no cache reset (cache: {reset: never})"),
)


def positions_phrase(p: PositionAcceptance) -> str:
    """The canon per draft position in words: 'conditional acceptance by position 0.82 [0.78–0.86], 0.64 [...];
    acceptance length at k=1..3: 1.82, 2.34, 2.67 (intervals over 24 prompts)'."""
    rates = ", ".join(interval(r.conditional, ".2f", floor=0.0, ceiling=1.0) for r in p.positions)
    ks = ", ".join(f"{x:.2f}" for x in p.length_by_k)
    over = (
        f"intervals over {p.prompts} prompts"
        if p.interval_over == "prompts"
        else "intervals over steps from the counters, which treat steps as independent (no per-request counts)"
    )
    return (
        f"conditional acceptance by position {rates}; acceptance length at k=1..{p.k_measured}: {ks} ({over}; "
        "the conditional rates do not depend on K for a chain proposer)"
    )


def cache_reset_phrase(counts: Mapping[str, int]) -> str:
    """ "cache reset before 4 of 4 blocks"; "" when the run kept none (compare, older runs)."""
    total = sum(counts.values())
    said = [f"{words} before {counts[k]} of {total} blocks" for k, words in _CACHE_RESETS if counts.get(k)]
    return "; ".join(said)


def prefix_cache_phrase(baseline_hit_rate: float, candidate_hit_rate: float) -> str:
    """What a reader must see when the arms' prefix-cache hit rates differ beyond noise."""
    return (
        f"speculation changed the prefix-cache hit rate from {baseline_hit_rate:.0%} to "
        f"{candidate_hit_rate:.0%}: TTFT differences may come from that"
    )


def more_repeats(n: int, command: str) -> str:
    """How to get `n` repeats, in the settings of the command that made the run (compare and the demo have no
    `repeats:`)."""
    if command == "compare":
        return f"compare results of {n} or more runs per load on each side (vLLM `bench sweep serve --num-runs {n}`)"
    if command == "demo":
        return f"the demo runs each arm once; an experiment file with `repeats: {n}` (`speculab run`) gives them"
    return f"set `repeats: {n}` or more in the experiment file"


def _where(f: Mapping[str, Any], what: Callable[[Mapping[str, Any]], str]) -> str:
    """'ngram k=4 at concurrency 1: 12.0%; draft k=4 at concurrency 4: 8.1%' (a summary.json before `where`: the
    one warning's own numbers; its subject and load are said before the sentence)."""
    entries = f.get("where")
    if entries is None:
        return what(f)
    return "; ".join(f"{e['subject']} at {e['load']}: {what(e)}" for e in entries)


def _near_margin_text(f: Mapping[str, Any]) -> str:
    where = _where(f, lambda e: f"{e['speedup']:.3g}× [{e['speedup_low']:.3g}–{e['speedup_high']:.3g}]")
    what = f"TPOT near the ±{f['margin']:.0%} margin, and the launch effect is not in the interval ({where})"
    if f["launched"]:
        n = f["launches"]
        more = more_repeats(f["repeats"], f.get("command", "run"))
        return f"{what}, {n} launch{'es' if n != 1 else ''} per arm: {more} (each repeat relaunches both servers)"
    return f"{what}, one server each: restart both servers and run again to see how much it moves"


def _launch_spread_text(f: Mapping[str, Any]) -> str:
    where = _where(f, lambda e: f"{e['launch_spread']:.1%} over {e['launches']} launch pairs")
    return (
        f"launch pairs' TPOT effects differ by more than the ±{f['margin']:.0%} margin ({where}), and the interval "
        f"does not carry it: {more_repeats(f['repeats'], f.get('command', 'run'))} so that it does"
    )


def _effect_not_medians_text(f: Mapping[str, Any]) -> str:
    def why(e: Mapping[str, Any]) -> str:
        said = f"{e['speedup']:.2f}× per prompt vs {e['medians_speedup']:.2f}× from the p50s"
        if e["split"]:  # bimodal per-prompt ratios: no one number describes them
            return (
                f"{said} (split both ways: {e['faster']} of {e['pairs']} prompts faster beyond the margin, "
                f"{e['slower']} slower)"
            )
        return f"{said} (per-prompt quartiles {e['low_quartile']:.2f}×–{e['high_quartile']:.2f}×)"

    return (
        "TPOT speedups are per-prompt effects (Hodges–Lehmann: each prompt against itself), not the ratio of the "
        f"arms' p50 TPOTs (each arm's middle request, not one prompt's change), and they differ by more than the "
        f"±{f['margin']:.0%} margin: {_where(f, why)}"
    )


def _few_repeats_text(f: Mapping[str, Any]) -> str:
    n = f["repeats"]
    return (
        f"{n} repeat{'s' if n != 1 else ''}: throughput and cost have no interval (one over repeats needs "
        f"{f['needed']}); {more_repeats(f['needed'], f.get('command', 'run'))}"
    )


def _no_acceptance_text(f: Mapping[str, Any]) -> str:
    tpc = f.get("tokens_per_chunk")  # set only when it streamed like the baseline
    hint = ""
    if tpc is not None:
        hint = f" (and it streamed {tpc:.2f} tokens per chunk, like the baseline: it may not have speculated)"
    return f"the engine reported no acceptance, so speculation could not be confirmed active{hint}"


def _drafts(n: float | None) -> str:
    return f"{n:g} drafts" if n is not None else "no drafts"


def _load_not_achieved_text(f: Mapping[str, Any]) -> str:
    if f["open_loop"]:
        asked = f"of {f['value']:g} requested" if f["kind"] == "rate" else f"replaying the trace at ×{f['value']:g}"
        got = f"{f['achieved']:.3g} req/s sent {asked}, {f['fraction']:.0%} of the schedule's rate"
    else:
        got = f"{f['achieved']:.3g} requests in flight of {f['value']:g} requested ({f['fraction']:.0%})"
    return f"{f['side']}: {got} (gate {f['min_fraction']:.0%}); raise max_concurrency or use a faster client machine"


def _unverified_because(f: Mapping[str, Any]) -> str:
    """The check's note as its record (an older file: its sentence; none kept: commands unknown)."""
    return reason_text(ReportWarning.from_dict(f["note"])) if f.get("note") else "commands unknown"


_WARNING_TEXT: dict[WarningKind, Callable[[Mapping[str, Any]], str]] = {
    WarningKind.INTERRUPTED: lambda f: "the run was interrupted: the report covers only what finished (see 'missing')",
    WarningKind.NOT_SINGLE_CHANGE: lambda f: (
        f"the commands differ in more than speculation ({'; '.join(f['diff_lines'])}): a difference may not be "
        "speculation's doing"
    ),
    WarningKind.CHANGE_UNVERIFIED: lambda f: f"the single change could not be verified ({_unverified_because(f)})",
    WarningKind.NO_VERDICT: lambda f: f"no verdict — {reason_text(ReportWarning.from_dict(f['reason']))}",
    WarningKind.GATE_NO_RUNS: lambda f: f"no {f['side']} runs at {f['at']}",
    WarningKind.GATE_ERROR_RATE: lambda f: (
        f"{f['side']} error rate {f['error_rate']:.1%} ({f['failed']} of {f['counted']}) is above the "
        f"{f['max_error_rate']:.0%} gate" + (f"; first: {f['first']}" if f.get("first") else "")
    ),
    WarningKind.GATE_NO_DRAFTS: lambda f: (
        f"{_drafts(f.get('drafts'))} reported by {f['source']}: the candidate did not speculate"
    ),
    WarningKind.GATE_LOAD_NOT_ACHIEVED: _load_not_achieved_text,
    WarningKind.GATE_CLIENT_BEHIND: lambda f: (
        f"{f['side']}: the client fell behind (CPU {f['cpu_share']:.0%} of a core, event-loop lag p99 "
        f"{(f.get('loop_lag_p99_s') or 0) * 1e3:.1f} ms): its timings carry that delay; run the client on a bigger or "
        "less loaded machine, or lower the load per client process"
    ),
    WarningKind.TOO_FEW_PAIRS: lambda f: "not enough paired TPOT data",
    WarningKind.NO_RUNS: lambda f: "no runs",
    WarningKind.REPEATS_MISSING: lambda f: f"repeats {f['repeats']} missing",
    WarningKind.REPEATS_CUT: lambda f: f"repeat(s) {f['repeats']} interrupted (partial records, no counters)",
    WarningKind.PREFIX_CACHE_MOVED: lambda f: (
        f"{prefix_cache_phrase(f['baseline_hit_rate'], f['candidate_hit_rate'])} (prompt tokens found in the cache, "
        f"engine counters; p = {f['p_value']:.2g} counting {f['baseline_requests']} and {f['candidate_requests']} "
        "requests as the trials)"
    ),
    WarningKind.ONE_TOKEN_PER_CHUNK: lambda f: (
        "per-chunk token counts unknown (one per chunk assumed); tokens per chunk is unreliable — enable continuous "
        "usage stats or logprobs"
    ),
    WarningKind.NO_ACCEPTANCE: _no_acceptance_text,
    WarningKind.REPEATS_WITHOUT_DRAFTS: lambda f: f"{f['inactive_repeats']} of {f['repeats']} repeats made no drafts",
    WarningKind.LAUNCH_SPREAD: _launch_spread_text,
    WarningKind.NEAR_MARGIN: _near_margin_text,
    WarningKind.FEW_REPEATS: _few_repeats_text,
    WarningKind.ONE_REPEAT: lambda f: "one repeat: throughput and cost have no interval",
    WarningKind.EFFECT_NOT_MEDIANS: _effect_not_medians_text,
    WarningKind.WHAT_IF_SKIPPED: lambda f: f"skipped: {f['error']}",
    WarningKind.STEP_COST_CLIPPED: lambda f: (
        f"step cost fitted as {f['step_cost']:.3f} < 0 (speedup above the model's bound); clipped to 0"
    ),
    WarningKind.STEP_COST_FITTED: lambda f: (
        "c was fitted to the observed speedup, so the prediction at the observed k matches it"
    ),
    WarningKind.CHECK_ERROR: lambda f: f"item {f['item']}: check could not run ({f['error']})",
    WarningKind.CONTEXT_DIFFERS: lambda f: (
        f"{f['count']} conversation turns were not compared for identical output: an earlier answer in their "
        "conversation differed, so the arms sent different contexts"
    ),
    WarningKind.PYTHON_CHECKS_SKIPPED: lambda f: (
        f"{f['count']} python checks were not run (they run code the workload file names): pass {f['flag']} (or set "
        "`python_checks: true` in the experiment file) to run them"
    ),
    WarningKind.PYTHON_CHECKS_RAN: lambda f: f"{f['count']} python checks ran per arm ({f['flag']} was given)",
    WarningKind.UNCLASSIFIED_DIVERGENCES: lambda f: (
        f"{f['count']} outputs differ at temperature 0 but no logprobs were recorded, so near-ties cannot be told "
        "from real divergences; set `sampling: {logprobs: 2}` in the experiment file (or bench --logprobs 2) to "
        "classify them"
    ),
    WarningKind.BASELINE_SELF_DIFFERS: lambda f: (
        f"the baseline itself gave different outputs for the same prompt at temperature 0 in {f['rate']:.0%} of "
        "repeated requests (batch-dependent numerics): some divergence is expected"
    ),
    WarningKind.NOTE: lambda f: str(f["text"]),
    WarningKind.RESUMED: lambda f: _resumed_text(f),  # says another note again: worded here, with warning_text
    **VERDICT_WORDS,  # a metric's note, the correctness verdict and its failed checks
    **WORDS,  # every other command's kinds: bench, the client, its workers, the run's notes
}


def _resumed_text(f: Mapping[str, Any]) -> str:
    stopped = f.get("stopped")
    how = (
        f"it had stopped: {warning_text(ReportWarning.from_dict(stopped))}"
        if stopped is not None
        else "it had stopped without a word (killed, or the host died)"
    )
    return f"resumed at {f['at']} (`speculab run --resume`): {f['done']} of {f['total']} blocks had finished; {how}"


def warning_text(w: ReportWarning) -> str:
    """One warning's sentence: 'ngram k=4 at concurrency 8: 1 of 3 repeats made no drafts'."""
    text = _WARNING_TEXT[w.kind](w.fields)
    if w.kind == WarningKind.WHAT_IF_SKIPPED:  # worded before the other warnings: "<arm> what-if at <load> skipped"
        return f"{w.subject} what-if at {w.load} {text}"
    who = f"{w.subject} at {w.load}" if w.subject and w.load else w.subject or (f"at {w.load}" if w.load else "")
    return f"{who}: {text}" if who else text


def reason_text(w: ReportWarning) -> str:
    """A record's sentence without whom and where it is about: a gate's reason, said after its load or verdict."""
    return _WARNING_TEXT[w.kind](w.fields)


def gated_verdict(comp: LevelComparison) -> str:
    """A load's verdict as the report says it: 'no verdict: <the gate's reason>' where a gate withheld it."""
    if comp.verdict == NO_VERDICT and comp.gate_reason is not None:
        return f"{NO_VERDICT}: {reason_text(comp.gate_reason)}"
    return comp.verdict


def note_text(r: Ratio) -> str:
    """Why one metric's comparison has no verdict, or what to read it with; "" when there is nothing to say."""
    return reason_text(r.note) if r.note is not None else ""


def change_note_text(note: ReportWarning | None) -> str:
    """What to read a single-change check's verdict with (`ChangeCheck.note`, `CandidateReport.change_note`); ""."""
    return reason_text(note) if note is not None else ""


def left_out_text(w: ReportWarning) -> str:
    """A load left out of the crossover, and why: 'concurrency 16: <the gate's reason>' (a /1 file: its sentence)."""
    return f"{w.load}: {reason_text(w)}" if w.load else reason_text(w)


def warning_lines(warnings: Sequence[ReportWarning]) -> list[str]:
    """The warnings' sentences in order, each once: repeats of one warning collapse."""
    return list(dict.fromkeys(warning_text(w) for w in warnings))


# --- a comparison whose unit is the run (summary-only files: harness.verdict.run_level) ----------------------------

NO_PER_REQUEST = "no per-request data: no interval, no verdict"


def run_level_phrase(decision: str | None, speedup_est: float, low: float, high: float, margin: float) -> str:
    """One figure's answer over runs, on the speedup scale (> 1 = B better): 'faster 1.48× [1.41–1.55] over runs,
    beyond the ±3% margin'; without a decision, the summary-only label."""
    if decision is None:
        return NO_PER_REQUEST
    rng, est, m = speedup_range(low, high), fine_speedup(speedup_est), margin_pct(margin)
    if decision == Decision.FASTER.value:
        return f"faster {est} {rng} over runs, beyond the {m} margin"
    if decision == Decision.SLOWER.value:
        return f"slower {est} {rng} over runs, beyond the {m} margin"
    if decision == Decision.EQUIVALENT.value:
        return f"equivalent: no difference larger than {m} over runs ({est} {rng})"
    if decision == Decision.INCONCLUSIVE.value:
        return f"inconclusive: {est} {rng} over runs straddles the {m} margin; more runs a side would narrow it"
    return "not enough runs"
