"""The verdict's records that are not warnings, in words: why one metric's comparison has no verdict, or what to read it
with (`Ratio.note`), the correctness verdict (`CorrectnessComparison.verdict`), each failed check (`ArmChecks.failures`)
and the degeneration check's verdict (`DegenerationComparison.verdict`) in `VERDICT_WORDS`; the error gate's line, a
run-level comparison's notes and candidates of different K compared by acceptance rate in `GATE_WORDS` (merged into
`words.WORDS`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import WarningKind
from speculab.harness.verdict.model import METRIC_LABELS
from speculab.report.formatting import fine_speedup, margin_pct, seconds, speedup_range

Fields = Mapping[str, Any]


def _run_level_side(f: Fields) -> str:
    """'plain.json: 4 run(s) summarised by vllm bench serve 0.6.3, model m' (the side, A or B, is its subject)."""
    tool = f["tool"]
    version = f"{tool} {f['version']}" if f.get("version") else f"{tool}, its version not stated in the file"
    version = f"{tool} ({f['layout']})" if not f.get("version") and f.get("layout") else version
    model = f", model {f['model']}" if f.get("model") else ""
    detail = " (it keeps per-request data too; the other side does not)" if f.get("per_request") else ""
    return f"{f['name']}: {f['runs']} run(s) summarised by {version}{model}{detail}" + "".join(
        part for part in (_side_rows(f), _side_acceptance(f), _side_load(f)) if part
    )


# how each tool weighs the acceptance it states (summaries.summary's weightings), in words
_WEIGHTING = {
    "per_request_mean": "the mean of each request's own",
    "pooled": "pooled over the run's steps",
    "last_request": "the last request's alone",
}


def _side_rows(f: Fields) -> str:
    """'; row(s) 26: draft 0.5B Q8_0' (the rows' numbers in their files, the fields that tell the arms apart)."""
    if not f.get("rows"):
        return ""
    config = ", ".join(f"{k} {v}" for k, v in f.get("configuration") or ())
    return f"; row(s) {', '.join(str(i) for i in f['rows'])}" + (f": {config}" if config else "")


def _side_acceptance(f: Fields) -> str:
    """'; acceptance as its file states it: length 2.83 tokens per step at concurrency 32 (the mean of each
    request's own, trtllm-bench's decoding_stats.acceptance_length_percentiles.average)'."""

    def one(a: Fields) -> str:
        value = f"{a['value']:.2f} tokens per step" if a["kind"] == "length" else f"{a['value']:.1%}"
        weighting = _WEIGHTING.get(a["weighting"], a["weighting"])
        return f"{a['kind']} {value} at {a['load']} ({weighting}, the file's `{a['source']}`)"

    stated = f.get("acceptance") or ()
    return f"; acceptance as its file states it: {'; '.join(one(a) for a in stated)}" if stated else ""


def _side_load(f: Fields) -> str:
    if not f.get("measured_load"):
        return ""
    return (
        f"; its load is the measured average concurrency (`{f['measured_load']}`, rounded): the file keeps no asked "
        "load"
    )


def _error_gate(f: Fields) -> str:
    # a summary file counts its failed requests without their categories (a run-level comparison's gate)
    cats = "".join(f", {k} {v}" if i else f": {k} {v}" for i, (k, v) in enumerate(f["by_category"].items()))
    return (
        f"{f['failed']} of {f['counted']} requests failed ({f['error_rate']:.1%}{cats}), more than --max-error-rate "
        f"{f['max_error_rate']:.0%} allows"
    )


def _outliers(f: Fields) -> str:
    """'3 requests accepted nearly every draft (>= 95 %): prompt 4 (checks failed, loops), ...; 1 nearly none ...'."""

    def one(o: Fields) -> str:
        said = {"passed": "checks passed", "failed": "checks failed", "none": "no checks"}[o["checks"]]
        loops = {True: ", loops", False: "", None: ", too short to judge loops"}[o["degenerate"]]
        return (
            f"{o['prompt_id'] or 'prompt ' + str(o['index'])} ({o['rate']:.0%} of {o['draft_tokens']}: {said}{loops})"
        )

    parts = []
    for side, what in (("low", "nearly no draft (at most 5 %)"), ("high", "nearly every draft (at least 95 %)")):
        these = [o for o in f["outliers"] if o["side"] == side]
        if these:
            parts.append(f"{len(these)} request(s) accepted {what}: " + ", ".join(one(o) for o in these))
    return (
        "; ".join(parts) + " — acceptance that far from the rest can track garbled or looping output: read those "
        "outputs (report.html lists the checks that failed)"
    )


def _rate_across_k(f: Fields) -> str:
    def one(c: Fields) -> str:
        rate = f"{c['rate']:.0%}" if isinstance(c.get("rate"), int | float) else "not reported"
        length = f"{c['length']:.2f}" if isinstance(c.get("length"), int | float) else "not reported"
        return f"{c['label']} (k={c['k']}): rate {rate}, length {length}"

    return (
        "the candidates draft different K, and an acceptance rate falls with K by construction (a longer draft's "
        "later positions are accepted less often): compare them by acceptance length (tokens per step) or by the "
        "conditional rate at each position, never by rate — " + "; ".join(one(c) for c in f["candidates"])
    )


_CAUSES = {
    "acceptance_at_load": lambda c: (
        f"acceptance moved: {c['measured']:.2f} tokens per step here against {c['predicted']:.2f} predicted from the "
        "low load (an adaptive proposer, or content that drafts differently under load)"
    ),
    "batch_below_concurrency": lambda c: (
        f"the decode batch was smaller than asked: {c['in_flight']:.1f} requests in flight of {c['asked']:g} (prefill "
        "steps between decode steps, or a client behind)"
    ),
    "cost_model": lambda c: "the cost model itself (its residuals: prediction.json models[].cost_fit)",
}


def _prediction_missed(f: Fields) -> str:
    p, m = f["predicted"], f["measured"]
    likely = "; ".join(_CAUSES[c["cause"]](c) for c in f["causes"] if c.get("cause") in _CAUSES)
    return (
        f"measured TPOT speedup {m[0]:.2f}× [{m[1]:.2f}–{m[2]:.2f}] outside the predicted {p[0]:.2f}× "
        f"[{p[1]:.2f}–{p[2]:.2f}]; what likely broke: {likely}"
    )


GATE_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.ACCEPTANCE_RATE_ACROSS_K: _rate_across_k,
    WarningKind.ACCEPTANCE_OUTLIERS: _outliers,
    WarningKind.PREDICT_NO_POSITIONS: lambda f: (
        "no prediction: the engine reported no acceptance per draft position at the lowest load"
        + ("" if f.get("k") else ", and the candidate's K is not known")
        + " (the prediction needs per-position counters, e.g. vLLM's spec_decode_num_accepted_tokens_per_pos)"
    ),
    WarningKind.PREDICTION_MISSED: _prediction_missed,
    WarningKind.PREDICT_FORCING_REFUSED: lambda f: (
        "the cost probes at forced acceptance failed, so they run again at real acceptance (the engine has the knob, "
        f"this build refused it; vLLM's CPU build does: 'Synthetic acceptance not supported with CPU sampling'): "
        f"{f['error']}"
    ),
    WarningKind.PREDICT_PLAN: lambda f: (
        f"probes: the baseline and each candidate at concurrency {', '.join(str(c) for c in f['loads'])}, "
        f"{f['prompts']} prompts each (acceptance at the first, cost at the others"
        + (f", {', '.join(f['forced'])} at forced acceptance set to what it measured)" if f.get("forced") else ")")
        + "".join(f"; {c['name']} also at k={c['k']}, to check the cost's linearity in k" for c in f.get("checked", ()))
        + f": {f['requests']:,} requests, to predict over concurrency {f['low']:g}-"
        f"{f['high']:g}; a fixed sweep of every k up to each candidate's K at concurrency "
        f"{', '.join(str(c) for c in f['sweep_loads'])} would send {f['sweep_requests']:,} "
        f"(the probes send {f['requests'] / max(f['sweep_requests'], 1):.0%} of that)"
    ),
    WarningKind.PREDICT_COST_NOT_LINEAR_IN_K: lambda f: (
        f"the step cost is not linear in k: at k={f['k']} and batch {f['batch']:.3g} a step took "
        f"{f['measured_s'] * 1e3:.3g} ms against the fit's {f['predicted_s'] * 1e3:.3g} ms "
        f"[{f['low_s'] * 1e3:.3g}–{f['high_s'] * 1e3:.3g}] (a probe the fit was not made on): the predictions at the k "
        "between those measured rest on a line the engine does not follow"
    ),
    WarningKind.PREDICT_FEW_PROBES: lambda f: (
        f"no prediction: {f['baseline']} usable baseline and {f['candidate']} candidate probes (a TPOT and, for the "
        "candidate, an acceptance length at a load); the cost model needs two of each"
    ),
    WarningKind.ERROR_GATE: _error_gate,
    WarningKind.RUN_LOST_REQUESTS: lambda f: f"{f['side']} at {f['at']} lost {f['lost']:.0%} of a run's requests",
    WarningKind.RUN_LEVEL_UNIT: lambda f: (
        "the unit is the run: the files keep no per-request data, so each side's figures are its tool's own "
        "aggregates, one value per run"
    ),
    WarningKind.RUN_LEVEL_FIGURES: lambda f: (
        "each figure is its tool's own: vLLM's and SGLang's ITL are the gaps between streamed chunks (a chunk may "
        "carry several tokens, so speculation lengthens them), GuideLLM's is (last token - first token) / "
        "(output tokens - 1)"
    ),
    WarningKind.RUN_LEVEL_SIDE: _run_level_side,
    WarningKind.RUN_LEVEL_ERROR_GATE: lambda f: (
        f"the error gate (--max-error-rate {f['max_error_rate']:.0%}) reads each run's own counts of completed and "
        f"failed requests: {f['counted']} of {f['runs']} run(s) state them"
        + ("; a file that states no failed count (SGLang's) cannot fail it" if f["counted"] < f["runs"] else "")
    ),
    WarningKind.RUN_LEVEL_ROWS_UNMATCHED: lambda f: (
        f"its rows at {', '.join(f['loads'])} have none of the other arm's at that load to compare with: left out"
    ),
    WarningKind.RUN_LEVEL_NO_INTERVAL: lambda f: (
        f"{f['a']} run(s) vs {f['b']}: no per-request data: no interval, no verdict (an interval needs {f['needed']} "
        "runs a side)"
    ),
}


def _few_groups_text(f: Fields) -> str:
    need = f["needed"]
    return (
        f"only {f['groups']} groups of {f['group_size']} prompts sent together ({f['pairs']} pairs); need at least "
        f"{need} groups: use at least {need * f['group_size']} prompts at this load"
    )


def _few_samples_text(f: Fields) -> str:
    size, need = f["group_size"], f["needed"]
    unit = f"groups of {size} requests" if size > 1 else "requests"
    return (
        f"only {f['candidate']} candidate and {f['baseline']} baseline {unit}; need at least {need} of each: send at "
        f"least {need * max(1, size)} requests in each run"
    )


def _not_compared_text(f: Fields) -> str:
    p = f.get("length_p")
    lengths = f"paired length test p = {p:.2g}" if p is not None else "too few for a length test"
    return f"not compared (temperature above 0 or not recorded, and no checks; output lengths alike: {lengths})"


def _correctness_worse_text(f: Fields) -> str:
    return (
        f"pass rate lower by more than the {f['margin'] * 100:g}-point margin ({f['estimate'] * 100:+.1f} points, "
        f"at most {f['high'] * 100:+.1f} at {f['confidence']:.0%} one-sided)"
    )


def _degeneration_counts(f: Fields) -> str:
    """'10 of 24 outputs loop or repeat themselves against 0 of 24 (+41.7 points [+20.1, +60.3] at 95%, McNemar
    p = 0.002)'."""
    points = f"{f['estimate'] * 100:+.1f} points [{f['low'] * 100:+.1f}, {f['high'] * 100:+.1f}]".replace("-", "−")
    return (
        f"{f['candidate']} of {f['of']} outputs loop or repeat themselves against {f['baseline']} of {f['of']} "
        f"({points} at {f['confidence']:.0%}, McNemar p = {f['p_value']:.2g})"
    )


def _degeneration_worse_text(f: Fields) -> str:
    return f"DEGENERATES where the baseline does not: {_degeneration_counts(f)}"


def _degeneration_not_worse_text(f: Fields) -> str:
    if not f["candidate"] and not f["baseline"]:
        return f"no output loops or repeats itself in either arm ({f['of']} prompts)"
    if f["candidate_only"] > f["baseline_only"]:
        return f"degenerates more often, not beyond noise: {_degeneration_counts(f)}"
    return f"degenerates no more often than the baseline: {_degeneration_counts(f)}"


def _check_failed_text(f: Fields) -> str:
    name = f" ({f['prompt_id']})" if f.get("prompt_id") else ""
    why = f": {f['reason']}" if f.get("reason") else ""
    return f"item {f['item']}{name}: check '{f['check']}' failed{why}"


def guardrail_breach_text(f: Fields) -> str:
    """A tolerated breach in brief, for the recommendation's headline: 'TTFT 0.93× slower [0.93–0.94], +4.1 ms a
    request (within the 20.0 ms floor)'."""
    what = METRIC_LABELS.get(f["metric"], f["metric"])
    slower = "slower" if f["answer"] == "worse" else "leaning slower"
    loss = f.get("loss_s")
    by = f", {'+' if loss >= 0 else ''}{seconds(loss)} a request" if loss is not None else ""
    return f"{what} {fine_speedup(f['speedup'])} {slower} {speedup_range(f['low'], f['high'])}{by} ({_held(f)})"


def _held(f: Fields) -> str:
    """What tolerated a breach: the floor, or the SLO the candidate stays within."""
    if f.get("slo_limit_s") is not None:
        what = METRIC_LABELS.get(f["metric"], f["metric"])
        return (
            f"{f['within_slo']:.0%} of its requests within the SLO's {seconds(f['slo_limit_s'])} on {what}, "
            f"{f['target']:.0%} asked"
        )
    return f"within the {seconds(f['floor_s'])} floor"


def guardrail_tolerated_text(f: Fields) -> str:
    """A breach of a time guardrail's margin that does not hold the candidate back: 'TTFT 0.93× slower [0.93–0.94],
    +4.1 ms a request (within the 20.0 ms floor): beyond the ±3% margin, not held against it'."""
    return f"{guardrail_breach_text(f)}: beyond the {margin_pct(f['margin'])} margin, not held against it"


VERDICT_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.GUARDRAIL_TOLERATED: guardrail_tolerated_text,
    WarningKind.METRIC_FEW_PAIRS: lambda f: f"only {f['pairs']} usable pairs; need at least {f['needed']}",
    WarningKind.METRIC_FEW_GROUPS: _few_groups_text,
    WarningKind.METRIC_FEW_SAMPLES: _few_samples_text,
    WarningKind.METRIC_INTERVALS_DISAGREE: lambda f: (
        f"the geometric-mean interval {'excludes' if f['excludes'] else 'includes'} 1 but the signed-rank interval "
        "(the verdict's) does not: borderline, or a few outlying pairs"
    ),
    WarningKind.CORRECTNESS_CHECKS_LOWER: lambda f: (
        f"pass rate lower ({f['candidate_rate']:.0%} vs {f['baseline_rate']:.0%}, McNemar p = {f['p_value']:.2g})"
    ),
    WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES: lambda f: (
        f"SUSPICIOUS: {f['count']} confident divergence(s) at temperature 0 (of {f['of']} prompts)"
    ),
    WarningKind.CORRECTNESS_LENGTHS_DIFFER: lambda f: (
        f"outputs {'longer' if f['longer'] else 'shorter'} (paired length test p = {f['p_value']:.2g})"
    ),
    WarningKind.CORRECTNESS_CHECKS_HIGHER: lambda f: f"pass rate higher (McNemar p = {f['p_value']:.2g})",
    WarningKind.CORRECTNESS_IDENTICAL: lambda f: f"identical outputs for all {f['of']} prompts",
    WarningKind.CORRECTNESS_UNCLASSIFIED: lambda f: (
        f"{f['differ']} of {f['of']} outputs differ at temperature 0 ({f['unclassified']} unclassified: no logprobs)"
    ),
    WarningKind.CORRECTNESS_NEAR_TIES: lambda f: (
        f"no difference ({f['differ']} of {f['of']} outputs differ, all at near-ties)"
    ),
    WarningKind.CORRECTNESS_NOT_COMPARED: _not_compared_text,
    WarningKind.CORRECTNESS_NO_DIFFERENCE: lambda f: "no difference",
    WarningKind.CORRECTNESS_WORSE: _correctness_worse_text,
    WarningKind.CORRECTNESS_NOT_JUDGED: lambda f: (
        f"not judged: {f['failed']} of {f['sent']} prompts have no successful output in both arms (above the "
        f"{f['max_error_rate']:.0%} error gate)"
    ),
    WarningKind.CHECK_FAILED: _check_failed_text,
    WarningKind.DEGENERATION_WORSE: _degeneration_worse_text,
    WarningKind.DEGENERATION_NOT_WORSE: _degeneration_not_worse_text,
}
