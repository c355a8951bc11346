"""The A/B report's tables as plain strings: arms per load, paired comparisons, correctness, what-if, capacity
plans and the setup. Every number is formatted here (`speculab.report.formatting`), with its unit; the template
only lays these rows out.
"""

from __future__ import annotations

import json
import math
from typing import Any

from speculab.harness.verdict.model import (
    E2E,
    FORCED,
    ITL,
    METRIC_LABELS,
    TPOT,
    TTFT,
    ArmLevel,
    CorrectnessComparison,
    LevelReport,
    Report,
    WarningKind,
    WeightedAcceptance,
)
from speculab.report.formatting import (
    MISSING,
    gb,
    interval,
    is_number,
    margin_pct,
    money_interval,
    ms,
    num,
    pvalue,
    signed_bytes,
    speedup,
    speedup_range,
    usd,
)
from speculab.report.html.beyond import beyond_rows
from speculab.report.phrases import (
    NOT_IN_FILE,
    cache_reset_phrase,
    change_note_text,
    checks_phrase,
    decision_of,
    decision_phrase,
    failure_lines,
    gated_verdict,
    launch_phrase,
    note_text,
    pairs_phrase,
    ratio_phrase,
    reason_text,
    samples_phrase,
    warning_text,
)


def arm_labels(report: Report) -> dict[str, str]:
    return {a.name: a.label for a in report.arms}


def arm_rows(report: Report, lv: LevelReport) -> list[dict[str, str]]:
    rows = []
    for arm in report.arms:
        a: ArmLevel | None = lv.arm(arm.name)
        if a is None:
            rows.append({"arm": arm.label, "missing": "not run"})
            continue
        d = a.distributions

        def held(key: str, text: str, a: ArmLevel = a) -> str:
            return NOT_IN_FILE if key in a.not_in_file else text

        load = (
            f"{num(a.achieved_rate_rps, '.3g')} req/s sent"
            if lv.kind in ("rate", "trace")
            else f"{num(a.achieved_concurrency, '.3g')} in flight"
        )
        acc = a.acceptance
        rows.append(
            {
                "arm": arm.label,
                "missing": "",
                "ttft": f"{ms(d[TTFT.name].p50)} / {ms(d[TTFT.name].p99)}",
                "tpot": f"{ms(d[TPOT.name].p50, 2)} / {ms(d[TPOT.name].p99, 2)}",
                "itl": held(ITL.name, f"{ms(d[ITL.name].p50, 2)} / {ms(d[ITL.name].p99, 2)}"),
                "gap": held("chunk_gap_s", f"{ms(d['chunk_gap_s'].p50, 2)} / {ms(d['chunk_gap_s'].p99, 2)}"),
                "e2e": f"{ms(d[E2E.name].p50, 0)} / {ms(d[E2E.name].p99, 0)}",
                "tpc": held("tokens_per_chunk", num(d["tokens_per_chunk"].mean)),
                "tok_s": held("output_tok_s", interval(a.output_tok_s, floor=0.0)),
                "req_s": interval(a.requests_per_s, ",.2f", floor=0.0),
                "cost": money_interval(a.usd_per_mtok),
                "slo": f"{a.slo_attainment:.0%}" if is_number(a.slo_attainment) else "–",
                "load": load + (f" ({a.load_fraction:.0%})" if is_number(a.load_fraction) else ""),
                "errors": f"{a.error} of {a.sent}"
                + (f" ({', '.join(f'{k} {v}' for k, v in a.errors_by_category.items())})" if a.error else ""),
                "stalls": held("stall_count", num(a.stalled_requests, "d")),
                "acceptance": (
                    "–"
                    if acc is None
                    else (
                        f"{num(acc.acceptance_length)} tokens/step, rate {num(acc.acceptance_rate, '.1%')}"
                        + (" (forced, not measured)" if acc.provenance == FORCED else "")
                        if acc.active
                        else "no drafts"
                    )
                ),
                "memory": memory_text(a),
                "prefix": prefix_cache_text(a),
                "repeats": str(a.repeats)
                + (f" ({a.interrupted_repeats} interrupted)" if a.interrupted_repeats else ""),
                "by_repeat": ", ".join(f"r{r} (#{o}) {num(t, ',.1f')}" for r, o, t in a.repeat_tok_s),
            }
        )
    return rows


def prefix_cache_text(a: ArmLevel) -> str:
    pc = a.prefix_cache
    hits = f"{num(pc.hit_rate, '.0%')} of {num(pc.queries, ',.0f')} prompt tokens" if pc is not None else ""
    return "; ".join(t for t in (hits, cache_reset_phrase(a.cache_resets)) if t) or "–"


def _weighted_cells(w: WeightedAcceptance) -> dict[str, str]:
    rw_rate, rw_len = w.rate_request_weighted, w.length_request_weighted
    return {
        "requests": f"{w.drafting_requests} of {w.requests}",
        "rate_tw": interval(w.rate_token_weighted_interval, ".1%", floor=0.0, ceiling=1.0)
        if w.rate_token_weighted_interval is not None
        else num(w.rate_token_weighted, ".1%"),
        "rate_rw": interval(rw_rate, ".1%", floor=0.0, ceiling=1.0) if rw_rate is not None else MISSING,
        "len_tw": interval(w.length_token_weighted_interval, ".2f", floor=1.0)
        if w.length_token_weighted_interval is not None
        else num(w.length_token_weighted),
        "len_rw": interval(rw_len, ".2f", floor=1.0) if rw_len is not None else MISSING,  # a length is >= 1
    }


def request_acceptance_rows(report: Report) -> list[dict[str, Any]]:
    """Per candidate and load: acceptance from the responses' own fields, token- and request-weighted, overall then
    per category; and the per-prompt relation between acceptance length and TPOT speedup."""
    labels = arm_labels(report)
    out = []
    for lv in report.levels:
        for arm in report.arms:
            a = lv.arm(arm.name)
            ra = a.request_acceptance if a is not None else None
            if ra is None:
                continue
            comp = lv.comparison(arm.name)
            rel = comp.acceptance_speedup if comp is not None else None
            relation = "–"
            if rel is not None:
                if is_number(rel.slope):
                    slope = f"{rel.slope:+.2f}× per unit [{rel.slope_low:+.2f}, {rel.slope_high:+.2f}]"
                else:
                    slope = "no line (" + ("fewer than 3 prompts" if rel.n < 3 else "the lengths do not vary") + ")"
                rho = (
                    f"Spearman ρ {rel.spearman_rho:.2f} (p {pvalue(rel.spearman_p)})"
                    if is_number(rel.spearman_rho)
                    else ""
                )
                relation = f"{slope}; {rho}; {rel.n} prompts".replace("; ;", ";")
            rows = [{"category": "all", **_weighted_cells(ra.overall)}]
            rows += [{"category": cat, **_weighted_cells(w)} for cat, w in ra.by_category.items()]
            out.append(
                {
                    "label": labels.get(arm.name, arm.name),
                    "level": lv.label,
                    "source": ra.source,
                    "kind": ra.overall.length_kind,
                    "rows": rows,
                    "relation": relation,
                }
            )
    return out


def memory_text(a: ArmLevel) -> str:
    m = a.memory
    parts = []
    if m.gpu_peak_bytes is not None:
        parts.append(f"GPU {gb(m.gpu_peak_bytes)} ({m.gpu_scope or 'device'})")
    if m.rss_peak_bytes is not None:
        parts.append(f"RSS {gb(m.rss_peak_bytes)}")
    if m.kv_usage_max is not None:
        parts.append(f"KV max {m.kv_usage_max:.0%}")
    return ", ".join(parts) or "–"


def comparison_rows(report: Report, lv: LevelReport) -> list[dict[str, Any]]:
    labels = arm_labels(report)
    out = []
    absent = {k for a in lv.arms for k in a.not_in_file}  # what either arm's file does not hold
    for comp in lv.comparisons:
        metrics = []
        for m in comp.metrics:
            mdc = f"±{m.min_detectable_change:.1%}" if is_number(m.min_detectable_change) else "–"
            metrics.append(
                {
                    "metric": METRIC_LABELS.get(m.metric, m.metric),
                    "speedup": f"{speedup(m.speedup)} {speedup_range(m.speedup_low, m.speedup_high)}",
                    "median": speedup(1 / m.median_ratio.estimate) if is_number(m.median_ratio.estimate) else MISSING,
                    # the geometric mean, for reading (the verdict follows the Hodges-Lehmann speedup beside it)
                    "geomean": f"{speedup(1 / m.ratio.estimate)} {speedup_range(1 / m.ratio.high, 1 / m.ratio.low)}"
                    if is_number(m.ratio.estimate) and m.ratio.estimate > 0
                    else "–",
                    "p": pvalue(m.wilcoxon_p),
                    "verdict": NOT_IN_FILE if m.metric in absent else m.verdict,
                    "decision": decision_of(m),
                    "margin": margin_pct(m.margin) if m.decision else "–",
                    "phrase": f"{METRIC_LABELS.get(m.metric, m.metric)}: {NOT_IN_FILE}"
                    if m.metric in absent
                    else decision_phrase(m, METRIC_LABELS.get(m.metric, m.metric)),
                    "cls": CLASSES.get(decision_of(m), ""),
                    "mdc": mdc,
                    "pairs": samples_phrase(m)
                    or f"{m.n_pairs}"
                    + (f" in {m.n_units} groups of {m.group_size}" if m.group_size > 1 else "")
                    + (f" ({m.n_dropped} unpaired)" if m.n_dropped else ""),
                    # beside the pairs: why TPOT has fewer than E2E
                    "note": "; ".join(
                        x for x in (note_text(m), pairs_phrase(comp) if m.metric == TPOT.name else "") if x
                    ),
                }
            )
        breakdowns = [
            {"title": title, "rows": [_breakdown_row(m) for m in rows]}
            for title, rows in (
                ("category", comp.by_category),
                ("turn", comp.by_turn),
                ("prompt length", comp.by_prompt_length),
            )
            if rows
        ]
        out.append(
            {
                "breakdowns": breakdowns,
                "diverged": comp.diverged,
                "candidate": labels.get(comp.candidate, comp.candidate),
                "gate": comp.gate,
                "gated": comp.gate != "ok",
                "reason": reason_text(comp.gate_reason) if comp.gate_reason is not None else "",
                "verdict": gated_verdict(comp),
                "decision": comp.decision or gated_verdict(comp),
                "cls": CLASSES.get(comp.decision or comp.verdict, ""),
                "launch": launch_phrase(comp) if comp.decision and comp.gate == "ok" else "",
                "metrics": metrics,
                "throughput": ratio_phrase(comp.throughput_ratio)
                if comp.throughput_ratio is not None
                else (NOT_IN_FILE if "output_tok_s" in absent else "–"),
                "cost": ratio_phrase(comp.cost_ratio) if comp.cost_ratio is not None else "–",
                "memory": f"{signed_bytes(comp.memory_delta_bytes)} ({comp.memory_kind})"
                if comp.memory_delta_bytes is not None
                else "–",
            }
        )
    return out


def _breakdown_row(m: Any) -> dict[str, str]:
    return {
        "label": m.metric,
        "speedup": f"{speedup(m.speedup)} {speedup_range(m.speedup_low, m.speedup_high)}",
        "verdict": decision_of(m),
        "cls": CLASSES.get(decision_of(m), ""),
        "pairs": str(m.n_pairs) + (f" in {m.n_units} groups" if m.group_size > 1 else ""),
    }


def _prompts(s: Any) -> str:
    counts = f"{s.prompts}" if s.paired else f"{s.prompts} (A) vs {s.prompts_candidate} (B), two samples"
    cats = ", ".join(f"{k} {v}" for k, v in s.categories.items())
    return f"{counts} ({cats})" if cats else counts


def _order(s: Any) -> str:
    """How the arms' requests were ordered in time: what cancels drift between them, and what does not."""
    if s.separate_runs:
        return "two separate runs compared afterwards: the arms were not interleaved"
    if s.two_url_mode:
        return "blocks of requests alternate ABBA between the two URLs, and across repeats"
    return "arms alternate ABBA across repeats"


# the four answers' colours (and the older verdicts' in summaries before margins)
CLASSES = {"faster": "good", "slower": "bad", "inconclusive": "gated"}


# the correctness verdicts shown as bad: the checks' pass rate lower, a confident divergence at temperature 0, outputs
# longer or shorter, outputs degenerating where the baseline's do not
_BAD_CORRECTNESS = {
    WarningKind.STREAMING_DEFECT,
    WarningKind.STRUCTURED_OUTPUT,  # the verdict only where lower
    WarningKind.CORRECTNESS_CHECKS_LOWER,
    WarningKind.CORRECTNESS_WORSE,
    WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES,
    WarningKind.CORRECTNESS_LENGTHS_DIFFER,
    WarningKind.DEGENERATION_WORSE,
}


def _degeneration_said(g: Any, n: int) -> str:
    """One output's degeneration in brief: 'loop of period 8 × 8.0, 67% of the output; 55% of its 8-grams repeated',
    'clean'."""
    if not g.degenerate:
        return "clean"
    loop = f"loop of period {g.period} × {g.repeats:.1f}, {g.strength:.0%} of the output" if g.period else "no loop"
    return f"{loop}; {g.repeated_ngrams:.0%} of its {n}-grams repeated"


def degeneration_row(d: Any) -> dict[str, Any] | None:
    """The degeneration check on the correctness card: its verdict, each arm's rate, the prompts that degenerated
    (item, each arm's period, strength and repeated n-grams, the loop's text); None when nothing was long enough."""
    if d is None:
        return None
    unit = {"token": "in tokens", "approx": "in words and punctuation: no logprobs"}.get(d.unit, "in mixed units")
    rates = f"baseline {interval(d.baseline_rate, '.1%')}, candidate {interval(d.candidate_rate, '.1%')}"
    return {
        "verdict": reason_text(d.verdict),
        "bad": d.worse,
        "rates": f"{rates} of {d.n_compared} outputs degenerate ({unit})",
        "prompts": [
            {
                "where": f"item {p.index}" + (f" ({p.prompt_id})" if p.prompt_id else ""),
                "baseline": _degeneration_said(p.baseline, d.rules.ngram),
                "candidate": _degeneration_said(p.candidate, d.rules.ngram),
                "cycle": p.candidate.cycle or p.baseline.cycle,
                "candidate_only": p.candidate.degenerate and not p.baseline.degenerate,
            }
            for p in d.prompts
        ],
        "more": d.n_prompts - len(d.prompts),
    }


def _correctness_bad(k: CorrectnessComparison) -> bool:
    if k.non_inferiority == "worse":
        return True
    if k.verdict.kind is WarningKind.NOTE:  # a summary that saved the verdict's sentence: its words tell
        return reason_text(k.verdict).startswith(("SUSPICIOUS", "pass rate lower", "outputs"))
    return k.verdict.kind in _BAD_CORRECTNESS


def correctness_rows(report: Report) -> list[dict[str, Any]]:
    out = []
    listed: set[tuple[str, ...]] = set()  # the baseline's failures are the same for every candidate: listed once
    for c in report.candidates:
        k = c.correctness
        if k is None:
            out.append({"label": c.label, "absent": True})
            continue
        checks = []
        for side in (k.baseline_checks, k.candidate_checks):
            if side is not None:
                failures = failure_lines(side.failures, side.n_failures)
                if side is k.baseline_checks:
                    key = tuple(failures)
                    failures = [] if key in listed else failures
                    listed.add(key)
                checks.append(
                    {
                        "arm": arm_labels(report).get(side.arm, side.arm),
                        "rate": f"{side.passed} of {side.checked} "
                        f"({interval(side.pass_rate, '.1%').replace(' (no interval: n = 1)', '')})",
                        "failures": failures,
                    }
                )
        out.append(
            {
                "label": c.label,
                "absent": False,
                "verdict": reason_text(k.verdict),
                "bad": _correctness_bad(k),
                "temperature": "not recorded" if k.temperature is None else f"{k.temperature:g}",
                "reference": k.reference,
                "identical": f"{k.identical} of {k.n_compared} ({interval(k.identical_rate, '.1%')})",
                "self": f"{k.baseline_self_identical_rate:.1%}" if is_number(k.baseline_self_identical_rate) else "–",
                "counts": f"{k.n_divergent} divergent: {k.n_confident} confident, {k.n_near_tie} near-tie, "
                f"{k.n_unclassified} unclassified",
                "temp0": k.temperature == 0,
                "divergences": [
                    {
                        "where": f"item {d.index}" + (f" ({d.prompt_id})" if d.prompt_id else ""),
                        "position": f"{d.unit} {d.position}",
                        "kind": d.kind,
                        "gap": f"{d.logprob_gap:.3f} nats" if is_number(d.logprob_gap) else "–",
                        "tokens": f"{d.baseline_token!r} → {d.candidate_token!r}",
                        "context": d.context,
                        "baseline": d.baseline_text,
                        "candidate": d.candidate_text,
                    }
                    for d in k.divergences
                ],
                "checks": checks,
                "degeneration": degeneration_row(k.degeneration),
                "mcnemar": (
                    f"b = {k.mcnemar_b} (baseline passed, candidate failed), c = {k.mcnemar_c}; "
                    f"p = {pvalue(k.mcnemar_p)} ({k.mcnemar_method})"
                    if k.mcnemar_p is not None
                    else "–"
                ),
                "non_inferiority": checks_phrase(k, arm_labels(report)),
                "beyond": beyond_rows(k, arm_labels(report)),
                "lengths": f"median {num(k.length_baseline.p50, ',.0f')} vs {num(k.length_candidate.p50, ',.0f')} "
                f"{k.length_unit}; mean {num(k.length_baseline.mean, ',.1f')} vs "
                f"{num(k.length_candidate.mean, ',.1f')}; paired Wilcoxon p = {pvalue(k.length_wilcoxon_p)}",
            }
        )
    return out


def what_if_rows(report: Report) -> list[dict[str, Any]]:
    out = []
    for c in report.candidates:
        for w in c.what_if:
            out.append(
                {
                    "label": c.label,
                    "level": w.level_label,
                    "profile": f"{w.profile_source}; per position "
                    + ", ".join(f"{p:.2f}" for p in w.per_position)
                    + f"; fitted i.i.d. α = {w.alpha:.3f}",
                    "cost": f"c = {w.step_cost:.3f} target steps per drafted token ({w.step_cost_source})",
                    "observed": f"observed {speedup(w.observed_speedup or math.nan)} at k = {w.observed_k}",
                    "recommended": str(w.recommended_k) if w.recommended_k else "none (no k is predicted to pay)",
                    "rows": [
                        {
                            "k": str(r.k),
                            "tokens": f"{r.expected_tokens:.2f}",
                            "speedup": speedup(r.speedup),
                            "model": r.model,
                            "best": r.k == w.recommended_k,
                        }
                        for r in w.rows
                    ],
                    "notes": [warning_text(n) for n in w.notes],
                }
            )
    return out


def plan_rows(report: Report) -> list[dict[str, str]]:
    out = []
    for c in report.candidates:
        p = c.plan
        if p is None:
            continue

        def side(s: Any) -> str:
            if s.replicas is None:
                return "no measured load met the SLO: capacity unknown"
            return (
                f"goodput {num(s.goodput_rps_per_replica, ',.2f')} req/s per replica → {s.replicas} replicas, "
                f"{s.gpus} GPUs, {usd(s.usd_per_month, 0)}/month"
            )

        diff = "–"
        if p.monthly_difference_usd is not None:
            sign = "saves" if p.monthly_difference_usd < 0 else "costs"
            gpus = f"{p.gpu_difference:+d}".replace("-", "−")
            diff = f"{c.label} {sign} {usd(abs(p.monthly_difference_usd), 0)}/month ({gpus} GPUs)"
        out.append(
            {
                "label": c.label,
                "target": f"{p.target_rate_rps:g} req/s (loads on the {p.axis} axis; {p.hours_per_month:g} h/month)",
                "baseline": side(p.baseline),
                "candidate": side(p.candidate),
                "difference": diff,
            }
        )
    return out


def _leaves(x: Any, path: str = "") -> dict[str, Any]:
    """A JSON value as {key path: scalar}: `models[0].created` -> 1796227251."""
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in _leaves(val, f"{path}.{key}" if path else key).items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in _leaves(val, f"{path}[{i}]").items()}
    return {path: x}


def _server_info(text: str, first: Any, arm: Any) -> dict[str, str]:
    """What a server said about itself (/version, /v1/models): the first arm's whole, each other arm's only where it
    differs from the first's (launches of one engine and model repeat the same JSON but for a `created` time).
    `server_info`: the JSON to show (collapsed); `server_info_title`: its summary line, or the whole note."""
    whole = {"server_info": text, "server_info_title": "what the server says about itself (/version, /v1/models)"}
    if not text:
        return {"server_info": "", "server_info_title": ""}
    if arm.name == first.name or not first.server_info_json:
        return whole
    try:
        mine, theirs = _leaves(json.loads(text)), _leaves(json.loads(first.server_info_json))
    except ValueError:
        return whole
    diff = [
        f"{k}: {json.dumps(mine.get(k, '(absent)'))} ({first.label}: {json.dumps(theirs.get(k, '(absent)'))})"
        for k in sorted(mine.keys() | theirs.keys())
        if mine.get(k, ...) != theirs.get(k, ...)
    ]
    if not diff:
        return {"server_info": "", "server_info_title": f"the same as {first.label}'s"}
    n = len(diff)
    title = f"as {first.label}'s, except {n} field{'s' if n != 1 else ''}: {', '.join(d.split(':')[0] for d in diff)}"
    return {"server_info": "\n".join(diff), "server_info_title": title}


def setup_rows(report: Report) -> dict[str, Any]:
    s = report.setup
    slo = ", ".join(
        f"{name} ≤ {ms(v)}" for name, v in (("TTFT", s.slo_ttft_s), ("TPOT", s.slo_tpot_s), ("E2E", s.slo_e2e_s)) if v
    )
    temp = "not recorded" if s.temperature is None else f"{s.temperature:g}"
    sampling = f"temperature {temp}, top_p {s.top_p:g}" + (f", top_k {s.top_k}" if s.top_k else "")
    sampling += f", seed {s.seed}, max_tokens {s.max_tokens}"
    if s.min_tokens is not None:
        sampling += f", min_tokens {s.min_tokens}"
    if s.ignore_eos:
        sampling += ", ignore_eos"
    if s.temperature is None and not s.max_tokens:  # `compare` of two other tools' files that record no sampling
        sampling = "not recorded in the files (temperature, top_p, seed, max_tokens unknown)"
    arms = []
    for a in report.arms:
        cs = []
        if a.cold_start_ready_s is not None:
            cs.append(f"ready {num(a.cold_start_ready_s, ',.1f', 's')}")
        if a.cold_start_first_token_s is not None:
            cs.append(f"first token {num(a.cold_start_first_token_s, ',.1f', 's')}")
        arms.append(
            {
                "label": a.label,
                "engine": a.engine,
                "url": a.url,
                "command": " ".join(a.command) if a.command else "(running server: command unknown)",
                "speculation": f"{a.method} k={a.num_speculative_tokens}" if a.method else "none",
                "price": f"{usd(a.usd_per_hour)}/GPU-hour × {a.gpus} GPU" if a.usd_per_hour is not None else "–",
                "cold": ", ".join(cs) or "–",
                **_server_info(a.server_info_json, report.arms[0], a),
            }
        )
    changes = [
        {
            "label": c.label,
            "status": {True: "verified: only speculation differs", False: "NOT a single change", None: "not verified"}[
                c.single_change
            ],
            "bad": c.single_change is not True,
            "lines": list(c.diff_lines),
            "note": change_note_text(c.change_note),
        }
        for c in report.candidates
    ]
    return {
        "rows": [
            ("workload", f"{s.workload_name} — {s.workload_source}"),
            ("prompts", _prompts(s)),
            ("API", s.api),
            ("sampling", sampling),
            ("loads", "; ".join(s.levels)),
            ("repeats", f"{s.repeats} ({_order(s)})"),
            ("SLOs", (slo + f", attainment ≥ {s.slo_attainment:.0%}") if slo else "none set"),
            ("mode", "two URLs (the single change cannot be verified)" if s.two_url_mode else "launch / commands"),
            *(
                ()
                if s.paired
                else [
                    (
                        "pairing",
                        "unpaired: the arms sent different prompts; every metric compares "
                        "the two runs' distributions (two samples), nothing per prompt",
                    )
                ]
            ),
            ("time", f"{s.started_utc or '?'} → {s.finished_utc or '?'}"),
            ("versions", ", ".join(f"{k} {v}" for k, v in s.versions.items()) or "–"),
        ],
        "arms": arms,
        "changes": changes,
    }
