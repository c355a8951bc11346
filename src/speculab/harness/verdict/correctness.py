"""Is the candidate still correct? Checks per item, and output equivalence against the baseline.

Pure functions over `ABRun`. Each prompt is judged on one output per arm: the first measured load that ran
in both arms, lowest repeat (its *reference* output). At temperature 0 speculation should not change the output at
all (exact rejection sampling), so a divergence is either a numerics artefact (the target's top two tokens nearly
tied, where batching or kernel differences flip the argmax) or a real problem. We classify with the target's own
logprobs at the first diverging token when they were recorded. At temperature > 0 strings differ by design; only
distributions (check pass rates, output lengths) are compared, and differing strings are never a failure. At any
temperature each output is measured for loops and repeated text (`analysis.degeneration`), paired per prompt.

Beyond equality (issue 50; `PairedCheck`, paired per prompt as the checks are): stream against unary (a difference at
temperature 0 is a streaming-path defect of that arm, not "outputs differ"), and structured outputs' validity. A
candidate whose acceptance is lossy by design is judged by its checks only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from speculab.harness.analysis.degeneration.paired import (
    DegenerationComparison,
    compare_degeneration,
    degeneration_pair,
)
from speculab.harness.analysis.paired_checks.paired import MAX_FAILURES_SHOWN, ArmChecks, PairedCheck, arm_checks
from speculab.harness.analysis.paired_checks.stream import stream_defects, stream_results, stream_unary
from speculab.harness.analysis.paired_checks.structured import structured_outputs, structured_results
from speculab.harness.design import BASELINE
from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import (
    ALPHA,
    Distribution,
    Interval,
    describe,
    mcnemar,
    paired_difference,
    wilson_interval,
)
from speculab.harness.workload.checks import PYTHON_OPT_IN, CheckSpecError, evaluate

EXCERPT_BEFORE = 60
EXCERPT_AFTER = 80
MAX_DIVERGENCES_SHOWN = 20


# The checks' non-inferiority margin, in pass-rate points (0.05 = 5 points): the candidate is "not worse" when the
# one-sided (1 - alpha) bound of its pass rate minus the baseline's, paired per prompt, is above -margin. Five
# points is a common non-inferiority margin for accuracy; set `margin: {correctness: ...}` for your application.
DEFAULT_NON_INFERIORITY_MARGIN = 0.05


@dataclass(frozen=True, slots=True)
class CorrectnessOptions:
    near_tie_logprob_gap: float = 0.1  # nats; top-1 minus top-2 logprob below this = a near-tie
    alpha: float = ALPHA  # significance for McNemar and the length test; one-sided level of the non-inferiority test
    margin: float = DEFAULT_NON_INFERIORITY_MARGIN  # pass-rate points (fraction) the candidate may be lower by
    # Run `python` checks (code a workload file names): only when the user opted in for this command, never
    # because a results directory says so (--allow-python-checks; `python_checks: true` for `speculab run`).
    allow_python_checks: bool = False


@dataclass(frozen=True, slots=True)
class Divergence:
    index: int
    prompt_id: str
    position: int  # first differing token (unit "token") or character (unit "char")
    unit: str
    kind: str  # "near-tie" | "confident" | "unclassified"
    logprob_gap: float | None  # target's top-1 minus top-2 logprob at the divergence, nats
    baseline_token: str
    candidate_token: str
    context: str  # common text just before the divergence (escaped when rendered)
    baseline_text: str  # baseline's text from the divergence on (clipped)
    candidate_text: str


@dataclass(frozen=True, slots=True)
class CorrectnessComparison:
    candidate: str
    temperature: float | None  # None: not recorded, compared as above 0
    reference: str  # which load/repeat the reference outputs came from
    n_compared: int  # prompts with a successful reference output in both arms
    identical: int
    identical_rate: Interval  # Wilson
    baseline_self_identical_rate: float | None  # baseline outputs across its loads/repeats identical to its reference
    divergences: tuple[Divergence, ...]  # at temperature 0 only; confident ones first, at most 20
    n_divergent: int
    n_near_tie: int
    n_confident: int
    n_unclassified: int
    baseline_checks: ArmChecks | None
    candidate_checks: ArmChecks | None
    mcnemar_b: int | None  # baseline passed, candidate failed
    mcnemar_c: int | None  # candidate passed, baseline failed
    mcnemar_p: float | None
    mcnemar_method: str
    length_baseline: Distribution  # output tokens (or characters when no token counts), reference outputs
    length_candidate: Distribution
    length_unit: str
    length_wilcoxon_p: float | None  # paired per prompt
    verdict: ReportWarning  # the worst finding (a CORRECTNESS_* record; a summary before records: its sentence)
    warnings: tuple[ReportWarning, ...]  # subject "": the report names the candidate
    # Non-inferiority of the checks (`non_inferiority`): the pass-rate difference candidate - baseline, paired per
    # prompt, with its (1 - 2 alpha) interval, so each side is a one-sided test at alpha; None without checks
    pass_rate_difference: Interval | None = None
    non_inferiority_margin: float = DEFAULT_NON_INFERIORITY_MARGIN
    non_inferiority: str = ""  # "not worse" | "worse" | "inconclusive" | "" (no checks)
    # Prompts whose checks failed in both arms: they fail on the model, not on speculation. With no discordant pair
    # (`mcnemar_b` = `mcnemar_c` = 0) the arms agree on every check, and that is the finding to report, whatever
    # the non-inferiority test's width says (18 of 18 failing in both is no "inconclusive difference").
    checks_fail_both: int = 0
    # The headline's correctness answer (`--fail-on worse`): the checks' pass rate lower (non-inferiority or
    # McNemar), a confident divergence at temperature 0, where speculation must not change the text, or degeneration
    # where the baseline has none (`degeneration.worse`); False when not judged (above the error gate)
    worse: bool = False
    # Loops and repeated text per prompt, baseline against candidate, at any temperature (`degeneration_of`); when the
    # candidate degenerates where the baseline does not beyond noise, `worse` and the verdict say so. None: no output
    # long enough to judge
    degeneration: DegenerationComparison | None = None
    # beyond equality (issue 50); None where not run (no unary sample sent, no item with a response_format)
    stream_unary: PairedCheck | None = None
    structured_output: PairedCheck | None = None
    # what makes the candidate's acceptance lossy (`ArmInfo.lossy_acceptance`): no divergence is held against it
    lossy_acceptance: tuple[str, ...] = ()


def _sent_indices(runs: Sequence[Any]) -> set[int]:
    """Prompts sent (warmup excluded), whatever came back."""
    return {r.index for run in runs for r in run.records if not r.warmup}


def _reference_records(runs_by_level: Sequence[Sequence[Any]]) -> dict[int, RequestRecord]:
    out: dict[int, RequestRecord] = {}
    for runs in runs_by_level:
        for run in sorted(runs, key=lambda r: r.repeat):
            for r in run.records:
                if not r.warmup and r.ok and r.index not in out:
                    out[r.index] = r
        if out:
            return out
    return out


def _tokens(r: RequestRecord) -> list[str] | None:
    if not r.logprobs:
        return None
    toks = [e.get("token") for e in r.logprobs]
    return toks if all(isinstance(t, str) for t in toks) else None


def _first_diff(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _top_gap(entry: Mapping[str, Any]) -> float | None:
    top = entry.get("top") or {}
    vals = sorted((float(v) for v in top.values() if isinstance(v, (int, float)) and math.isfinite(v)), reverse=True)
    if len(vals) >= 2:
        return vals[0] - vals[1]
    return None


def divergence(index: int, prompt_id: str, base: RequestRecord, cand: RequestRecord, gap_limit: float) -> Divergence:
    """Where two outputs first differ, and whether the target was nearly indifferent there."""
    bt, ct = _tokens(base), _tokens(cand)
    if bt is not None and ct is not None:
        pos = _first_diff(bt, ct)
        char = len("".join(bt[:pos]))
        gap = None
        for rec in (base, cand):  # the target's distribution; both arms run the same target on the same prefix
            if rec.logprobs and pos < len(rec.logprobs):
                gap = _top_gap(rec.logprobs[pos])
                if gap is not None:
                    break
        kind = "unclassified" if gap is None else ("near-tie" if gap < gap_limit else "confident")
        btok = bt[pos] if pos < len(bt) else "(end)"
        ctok = ct[pos] if pos < len(ct) else "(end)"
        unit = "token"
    else:
        pos = char = _first_diff(base.output_text, cand.output_text)
        gap, kind, unit = None, "unclassified", "char"
        btok = base.output_text[pos : pos + 1] or "(end)"
        ctok = cand.output_text[pos : pos + 1] or "(end)"
    text = base.output_text
    return Divergence(
        index=index,
        prompt_id=prompt_id,
        position=pos,
        unit=unit,
        kind=kind,
        logprob_gap=gap,
        baseline_token=btok,
        candidate_token=ctok,
        context=text[max(0, char - EXCERPT_BEFORE) : char],
        baseline_text=base.output_text[char : char + EXCERPT_AFTER],
        candidate_text=cand.output_text[char : char + EXCERPT_AFTER],
    )


def _check_pass(
    items: Mapping[int, RequestSpec],
    refs: Mapping[int, RequestRecord],
    warnings: list[ReportWarning],
    allow_python: bool,
) -> tuple[dict[int, bool], list[ReportWarning], int, int]:
    """Prompt index -> all checks that ran passed, for prompts with checks that ran; the first failure
    descriptions; how many checks failed in all; and how many python checks were not run (no opt-in)."""
    out: dict[int, bool] = {}
    fails: list[ReportWarning] = []
    n_failed = not_run = 0
    for i, rec in sorted(refs.items()):
        item = items.get(i)
        if item is None or not item.checks:
            continue
        try:
            results = evaluate(item.checks, rec.output_text, item, allow_python=allow_python)
        except CheckSpecError as e:
            warnings.append(ReportWarning(WarningKind.CHECK_ERROR, fields={"item": i, "error": str(e)}))
            continue
        not_run += sum(1 for r in results if not r.ran)
        results = [r for r in results if r.ran]
        if not results:
            continue
        out[i] = all(r.passed for r in results)
        for r in results:
            n_failed += not r.passed
            if not r.passed and len(fails) < MAX_FAILURES_SHOWN:
                fields = {"item": i, "prompt_id": item.prompt_id or "", "check": r.name, "reason": r.reason or ""}
                fails.append(ReportWarning(WarningKind.CHECK_FAILED, fields=fields))
    return out, fails, n_failed, not_run


def _length(r: RequestRecord, unit: str) -> float:
    return float(r.completion_tokens) if unit == "tokens" else float(len(r.output_text))


def compare_correctness(
    inputs: Any, candidate: str, opts: CorrectnessOptions, max_error_rate: float = 1.0
) -> CorrectnessComparison | None:
    """Checks, McNemar, output equivalence, degeneration and length distributions for one candidate vs the baseline.
    Judged only when at most `max_error_rate` of the prompts sent to both arms lack a successful output in one of them
    (the report's error gate): a candidate that failed most requests is not "correct" on the few that came back."""
    if not inputs.setup.paired:
        return None  # the arms answered different prompts: no output has a partner to compare with
    refs = _references(inputs, candidate)
    if refs is None:
        return None
    if not any(r.output_text for r in (*refs.base.values(), *refs.cand.values())):
        return None  # no output text in either arm (an AIPerf export keeps none): two empty strings prove nothing
    setup = inputs.setup
    warnings: list[ReportWarning] = []
    items = {it.index: it for it in setup.items}
    temp0 = setup.temperature == 0
    same_context, identical, divs = _equivalence(refs, items, temp0, opts, warnings)
    self_rate = _baseline_self_rate(inputs, refs.base)
    bchecks, cchecks, mc, diff, fail_both = _checks(refs, items, candidate, opts, warnings)
    inferiority = non_inferiority(diff, opts.margin)
    unit, bl, cl, length_p = _lengths(refs)
    degeneration = _degeneration(refs, items, opts.alpha)
    n_conf, n_tie, n_unc = (sum(1 for d in divs if d.kind == k) for k in ("confident", "near-tie", "unclassified"))
    n_differ = len(same_context) - len(identical)
    verdict = _verdict(temp0, n_conf, n_tie, n_unc, n_differ, len(same_context), mc, bchecks, cchecks, length_p,
                       bl, cl, opts, self_rate)  # fmt: skip
    if inferiority == "worse" and diff is not None:
        fields = {"margin": opts.margin, "estimate": diff.estimate, "high": diff.high, "confidence": 1 - opts.alpha}
        verdict = ReportWarning(WarningKind.CORRECTNESS_WORSE, fields=fields)
    lossy = next((a.lossy_acceptance for a in inputs.arms if a.name == candidate), ())
    worse = inferiority == "worse" or (temp0 and n_conf > 0 and not lossy)  # lossy: divergence expected
    worse = worse or (mc is not None and mc.p_value < opts.alpha and mc.b > mc.c)
    verdict, worse = _with_degeneration(verdict, worse, degeneration)
    stream, structured = _stream_unary(inputs, candidate, items), _structured(refs, items, candidate, opts.alpha)
    verdict, worse = _beyond_equality(verdict, worse, (stream, structured), lossy)
    if refs.sent and refs.n_failed / len(refs.sent) > max_error_rate:
        worse = False
        fields = {"failed": refs.n_failed, "sent": len(refs.sent), "max_error_rate": max_error_rate}
        verdict = ReportWarning(WarningKind.CORRECTNESS_NOT_JUDGED, fields=fields)
    if lossy:  # what equality would say does not apply: the lossy mode is the note
        warnings.append(ReportWarning(WarningKind.LOSSY_ACCEPTANCE, fields={"by": list(lossy), "checked": bool(mc)}))
    else:
        _temperature0_warnings(temp0, divs, n_unc, self_rate, warnings)
    warnings += stream_defects(stream)
    return CorrectnessComparison(
        candidate=candidate,
        temperature=setup.temperature,
        reference=f"{refs.level_label}, first repeat",
        n_compared=len(same_context),
        identical=len(identical),
        identical_rate=wilson_interval(len(identical), len(same_context)),
        baseline_self_identical_rate=self_rate,
        divergences=tuple(divs[:MAX_DIVERGENCES_SHOWN]),
        n_divergent=len(divs) if temp0 else len(same_context) - len(identical),
        n_near_tie=n_tie,
        n_confident=n_conf,
        n_unclassified=n_unc,
        baseline_checks=bchecks,
        candidate_checks=cchecks,
        mcnemar_b=mc.b if mc else None,
        mcnemar_c=mc.c if mc else None,
        mcnemar_p=mc.p_value if mc else None,
        mcnemar_method=mc.method if mc else "",
        length_baseline=describe(bl),
        length_candidate=describe(cl),
        length_unit=unit,
        length_wilcoxon_p=length_p,
        verdict=verdict,
        warnings=tuple(warnings),
        worse=worse,
        pass_rate_difference=diff,
        non_inferiority_margin=opts.margin,
        non_inferiority=inferiority,
        checks_fail_both=fail_both,
        degeneration=degeneration,
        stream_unary=stream,
        structured_output=structured,
        lossy_acceptance=tuple(lossy),
    )


def _with_degeneration(verdict: ReportWarning, worse: bool, degeneration: DegenerationComparison | None
                       ) -> tuple[ReportWarning, bool]:  # fmt: skip
    """A candidate that loops where the baseline does not is worse; the verdict says so unless it already names a
    worse finding (`_WORSE_THAN_DEGENERATION`)."""
    if degeneration is None or not degeneration.worse:
        return verdict, worse
    return (verdict if verdict.kind in _WORSE_THAN_DEGENERATION else degeneration.verdict), True


# the verdicts the correctness verdict keeps before degeneration: a lower pass rate says what went wrong in the
# user's own terms, a confident divergence at temperature 0 where it began
_WORSE_THAN_DEGENERATION = {
    WarningKind.CORRECTNESS_CHECKS_LOWER,
    WarningKind.CORRECTNESS_WORSE,
    WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES,
}


def _degeneration(refs: _References, items: Mapping[int, RequestSpec], alpha: float) -> DegenerationComparison | None:
    """Each prompt's reference outputs measured for loops and repeated text (in the engine's tokens where both arms
    recorded logprobs), and the paired comparison."""
    pairs = {}
    for i in refs.common:
        b, c = refs.base[i], refs.cand[i]
        pairs[i] = degeneration_pair(b.output_text, _tokens(b), c.output_text, _tokens(c))
    ids = {i: items[i].prompt_id or "" for i in refs.common if i in items}
    return compare_degeneration(pairs, ids, alpha)


def non_inferiority(diff: Interval | None, margin: float) -> str:
    """ "not worse" when the whole interval of candidate - baseline is above -margin, "worse" when it is all below,
    else "inconclusive"; "" without checks."""
    if diff is None or diff.n == 0 or not (math.isfinite(diff.low) and math.isfinite(diff.high)):
        return ""
    if diff.low > -margin:
        return "not worse"
    if diff.high < -margin:
        return "worse"
    return "inconclusive"


@dataclass(frozen=True, slots=True)
class _References:
    """Each prompt's reference output per arm: the first measured load both arms ran, lowest repeat."""

    level_label: str
    base: dict[int, RequestRecord]
    cand: dict[int, RequestRecord]
    common: list[int]  # prompts with a successful reference output in both arms
    sent: set[int]  # prompts sent to both arms at that load
    n_failed: int  # of those, without a successful output in one arm


def _references(inputs: Any, candidate: str) -> _References | None:
    levels = [
        lv for lv in inputs.setup.levels if inputs.runs_for("baseline", lv.key) and inputs.runs_for(candidate, lv.key)
    ]
    if not levels:
        return None
    lv = levels[0]
    base_runs, cand_runs = inputs.runs_for("baseline", lv.key), inputs.runs_for(candidate, lv.key)
    base_refs, cand_refs = _reference_records([base_runs]), _reference_records([cand_runs])
    common = sorted(set(base_refs) & set(cand_refs))
    if not common:
        return None
    sent = _sent_indices(base_runs) & _sent_indices(cand_runs)
    return _References(lv.label, base_refs, cand_refs, common, sent, len(sent - set(common)))


def _equivalence(
    refs: _References,
    items: Mapping[int, RequestSpec],
    temp0: bool,
    opts: CorrectnessOptions,
    warnings: list[ReportWarning],
) -> tuple[list[int], list[int], list[Divergence]]:
    """(prompts with the same context in both arms, of which identical outputs, the divergences at temperature 0:
    the most worrying first)."""
    # a conversation turn behind earlier answers that differed sent another context: its output is no evidence
    # about this turn (the first differing answer is, and is compared where it happened)
    same_context = [i for i in refs.common if refs.base[i].context_sha256 == refs.cand[i].context_sha256]
    if len(same_context) < len(refs.common):
        n = len(refs.common) - len(same_context)
        warnings.append(ReportWarning(WarningKind.CONTEXT_DIFFERS, fields={"count": n}))
    identical = [i for i in same_context if refs.base[i].output_text == refs.cand[i].output_text]
    divs: list[Divergence] = []
    if temp0:
        for i in same_context:
            if refs.base[i].output_text != refs.cand[i].output_text:
                pid = items[i].prompt_id if i in items else ""
                divs.append(divergence(i, pid, refs.base[i], refs.cand[i], opts.near_tie_logprob_gap))
    divs.sort(key=lambda d: ({"confident": 0, "unclassified": 1, "near-tie": 2}[d.kind], d.index))
    return same_context, identical, divs


def _baseline_self_rate(inputs: Any, base_refs: Mapping[int, RequestRecord]) -> float | None:
    """Does the baseline even agree with itself across loads and repeats? (batch-dependent numerics at T=0)"""
    self_same = self_n = 0
    for level in inputs.setup.levels:
        for run in inputs.runs_for("baseline", level.key):
            for r in run.records:
                if r.ok and not r.warmup and r.index in base_refs and r is not base_refs[r.index]:
                    self_n += 1
                    self_same += r.output_text == base_refs[r.index].output_text
    return self_same / self_n if self_n else None


def _checks(
    refs: _References,
    items: Mapping[int, RequestSpec],
    candidate: str,
    opts: CorrectnessOptions,
    warnings: list[ReportWarning],
) -> tuple[ArmChecks | None, ArmChecks | None, Any, Interval | None, int]:
    """Each arm's check pass rate on its reference outputs, McNemar's test on the pairs, the paired pass-rate
    difference for the non-inferiority test (None without checks), and the prompts failing in both arms."""
    bp, bfails, b_failed, skipped = _check_pass(items, refs.base, warnings, opts.allow_python_checks)
    cp, cfails, c_failed, _ = _check_pass(items, refs.cand, warnings, opts.allow_python_checks)
    n_python = sum(1 for i in refs.common if i in items for c in items[i].checks if c.get("type") == "python")
    if skipped:
        warnings.append(
            ReportWarning(WarningKind.PYTHON_CHECKS_SKIPPED, fields={"count": skipped, "flag": PYTHON_OPT_IN})
        )
    elif n_python:
        warnings.append(ReportWarning(WarningKind.PYTHON_CHECKS_RAN, fields={"count": n_python, "flag": PYTHON_OPT_IN}))
    mc = mcnemar(cp, bp) if bp and cp else None
    diff = paired_difference(cp, bp, 1 - 2 * opts.alpha) if bp and cp else None
    fail_both = sum(1 for i in bp.keys() & cp.keys() if not bp[i] and not cp[i])
    return (
        arm_checks("baseline", bp, bfails, b_failed),
        arm_checks(candidate, cp, cfails, c_failed),
        mc,
        diff,
        fail_both,
    )


def _lengths(refs: _References) -> tuple[str, list[float], list[float], float | None]:
    """(unit, baseline lengths, candidate lengths, the paired Wilcoxon p; None below 6 pairs)."""
    common = refs.common
    unit = (
        "tokens" if all(refs.base[i].completion_tokens and refs.cand[i].completion_tokens for i in common) else "chars"
    )
    bl = [_length(refs.base[i], unit) for i in common]
    cl = [_length(refs.cand[i], unit) for i in common]
    diffs = [c - b for b, c in zip(bl, cl, strict=True)]
    length_p = None
    if len(common) >= 6 and any(d != 0 for d in diffs):
        # here, not at the top: scipy.stats takes ~0.5 s to import, and bench and diagnose import this module
        from scipy import stats as scipy_stats

        length_p = float(scipy_stats.wilcoxon(diffs, zero_method="wilcox").pvalue)
    elif len(common) >= 6:
        length_p = 1.0
    return unit, bl, cl, length_p


def _temperature0_warnings(
    temp0: bool, divs: Sequence[Divergence], n_unc: int, self_rate: float | None, warnings: list[ReportWarning]
) -> None:
    if temp0 and divs and n_unc == len(divs):
        warnings.append(ReportWarning(WarningKind.UNCLASSIFIED_DIVERGENCES, fields={"count": len(divs)}))
    if temp0 and self_rate is not None and self_rate < 1.0:
        warnings.append(ReportWarning(WarningKind.BASELINE_SELF_DIFFERS, fields={"rate": 1 - self_rate}))


def _verdict(
    temp0: bool,
    n_conf: int,
    n_tie: int,
    n_unc: int,
    n_div: int,
    n: int,
    mc: Any,
    bchecks: Any,
    cchecks: Any,
    length_p: float | None,
    bl: list[float],
    cl: list[float],
    opts: CorrectnessOptions,
    self_rate: float | None,
) -> ReportWarning:
    """The one finding to lead with, the worst first, as a record (`report.phrases` words it)."""
    if mc is not None and mc.p_value < opts.alpha and mc.b > mc.c:
        fields = {
            "candidate_rate": cchecks.pass_rate.estimate,
            "baseline_rate": bchecks.pass_rate.estimate,
            "p_value": mc.p_value,
        }
        return ReportWarning(WarningKind.CORRECTNESS_CHECKS_LOWER, fields=fields)
    if temp0 and n_conf:
        return ReportWarning(WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES, fields={"count": n_conf, "of": n})
    if length_p is not None and length_p < opts.alpha:
        longer = statistics.median(cl) > statistics.median(bl)
        return ReportWarning(WarningKind.CORRECTNESS_LENGTHS_DIFFER, fields={"longer": longer, "p_value": length_p})
    if mc is not None and mc.p_value < opts.alpha and mc.c > mc.b:
        return ReportWarning(WarningKind.CORRECTNESS_CHECKS_HIGHER, fields={"p_value": mc.p_value})
    if temp0:
        if n_div == 0:
            return ReportWarning(WarningKind.CORRECTNESS_IDENTICAL, fields={"of": n})
        if n_unc:
            return ReportWarning(
                WarningKind.CORRECTNESS_UNCLASSIFIED, fields={"differ": n_div, "of": n, "unclassified": n_unc}
            )
        return ReportWarning(WarningKind.CORRECTNESS_NEAR_TIES, fields={"differ": n_div, "of": n})
    if n and n_div == 0:  # strings may differ by design above temperature 0; these did not
        return ReportWarning(WarningKind.CORRECTNESS_IDENTICAL, fields={"of": n})
    if bchecks is None or cchecks is None:
        # above temperature 0 (or where it is not recorded) strings differ by design, and no check judged them: the
        # outputs were not compared, so nothing says they agree (two target models' outputs read "no difference")
        return ReportWarning(WarningKind.CORRECTNESS_NOT_COMPARED, fields={"length_p": length_p})
    return ReportWarning(WarningKind.CORRECTNESS_NO_DIFFERENCE)


# --- beyond equality (issue 50 item 3) ------------------------------------------------------------------------------

_EQUALITY_VERDICTS = {  # what only says how the outputs compare with the baseline's: nothing, for a lossy candidate
    WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES,
    WarningKind.CORRECTNESS_UNCLASSIFIED,
    WarningKind.CORRECTNESS_NEAR_TIES,
    WarningKind.CORRECTNESS_IDENTICAL,
    WarningKind.CORRECTNESS_NOT_COMPARED,
    WarningKind.CORRECTNESS_NO_DIFFERENCE,
}


def _beyond_equality(
    verdict: ReportWarning, worse: bool, beyond: tuple[PairedCheck | None, ...], lossy: tuple[str, ...]
) -> tuple[ReportWarning, bool]:
    """The verdict and the headline's answer with the checks beyond equality: a stream defect first (a fault of the
    serving path, not a matter of degree), then equality's and the checks' worst, then structured outputs less often
    valid; for a lossy candidate, equality's verdicts give way to the lossy mode's record."""
    found = next((c for c in beyond if c is not None and c.worse), None)
    if found is not None and (found.check == "stream_unary" or not worse):
        return found.finding, True
    if not worse and lossy and verdict.kind in _EQUALITY_VERDICTS:
        checked = verdict.kind is WarningKind.CORRECTNESS_NO_DIFFERENCE
        return ReportWarning(WarningKind.LOSSY_ACCEPTANCE, fields={"by": list(lossy), "checked": checked}), False
    return verdict, worse


def _stream_unary(inputs: Any, candidate: str, items: Mapping[int, RequestSpec]) -> PairedCheck | None:
    """Stream against unary in both arms at temperature 0 (above it a stream may differ by design: not judged, and no
    sample is sent), each prompt's streamed text the first load's, lowest repeat; None where no arm sent a sample
    (older runs, `stream_unary: 0`)."""
    setup, sent = inputs.setup, inputs.unary.get(BASELINE) or inputs.unary.get(candidate)
    if setup.temperature != 0 and (sent or setup.stream_unary):
        why = ReportWarning(WarningKind.STREAM_UNARY_NOT_JUDGED, fields={"temperature": setup.temperature})
        return PairedCheck("stream_unary", None, None, why)
    if not sent:
        return None
    judged = []
    for arm in (BASELINE, candidate):
        streamed = _reference_records([inputs.runs_for(arm, lv.key) for lv in setup.levels])
        pairs = [(u, s) for u in inputs.unary.get(arm, ()) if (s := streamed.get(u.index)) and s.stream and u.ok]
        judged.append(stream_results((items[u.index], s.output_text, u.output_text) for u, s in pairs))
    return stream_unary((BASELINE, candidate), judged)


def _structured(
    refs: _References, items: Mapping[int, RequestSpec], candidate: str, alpha: float
) -> PairedCheck | None:
    """Each arm's reference outputs against their items' `response_format`, paired per prompt."""
    outputs = [[(items[i], r[i].output_text) for i in refs.common if i in items] for r in (refs.base, refs.cand)]
    return structured_outputs((BASELINE, candidate), [structured_results(o) for o in outputs], alpha)
