"""Does the candidate degenerate where the baseline does not? Per prompt, one output per arm, with the statistics of the
checks (verdict.correctness): each arm's rate (Wilson), the paired difference (Agresti-Min) and McNemar's test on the
prompts where exactly one arm degenerates. At any temperature: above 0 the two outputs of a prompt differ by design,
but a loop is a property of the output, not of its words, so the pair still compares like with like."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from speculab.harness.analysis.degeneration.loops import Degeneration, LoopRules, degeneration_of
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import ALPHA, Interval, mcnemar, paired_difference, wilson_interval

MAX_PROMPTS_SHOWN = 20


@dataclass(frozen=True, slots=True)
class DegeneratePrompt:
    """A prompt whose output degenerates in one arm or both, with both arms' measures."""

    index: int
    prompt_id: str
    baseline: Degeneration
    candidate: Degeneration


@dataclass(frozen=True, slots=True)
class DegenerationComparison:
    """Baseline against candidate on degeneration, over the prompts judged (an output of `min_units` in one arm)."""

    n_compared: int
    unit: str  # "token" (the engine's, from logprobs) | "approx" (words and punctuation) | "mixed" (prompts differ)
    baseline_rate: Interval  # the share of its outputs that degenerate (Wilson)
    candidate_rate: Interval
    difference: Interval  # candidate minus baseline rate, paired per prompt (Agresti-Min), two-sided at 1 - alpha
    candidate_only: int  # McNemar's discordant pairs: the candidate degenerates, the baseline does not
    baseline_only: int
    mcnemar_p: float
    mcnemar_method: str
    worse: bool  # the candidate degenerates where the baseline does not beyond noise: McNemar p < alpha
    verdict: ReportWarning  # DEGENERATION_WORSE | DEGENERATION_NOT_WORSE
    prompts: tuple[DegeneratePrompt, ...]  # degenerate in either arm: the candidate's alone first, at most 20
    n_prompts: int  # degenerate in either arm, all of them
    rules: LoopRules = field(default_factory=LoopRules)


def degeneration_pair(
    base_text: str,
    base_tokens: Sequence[str] | None,
    cand_text: str,
    cand_tokens: Sequence[str] | None,
    rules: LoopRules = LoopRules(),
) -> tuple[Degeneration, Degeneration]:
    """Both arms' outputs of one prompt measured in one unit: the engine's tokens when both have them, else
    approximate units for both (a period in tokens and one in words are not the same number)."""
    both = base_tokens is not None and cand_tokens is not None
    return (
        degeneration_of(base_text, base_tokens if both else None, rules),
        degeneration_of(cand_text, cand_tokens if both else None, rules),
    )


def compare_degeneration(
    pairs: Mapping[int, tuple[Degeneration, Degeneration]],
    prompt_ids: Mapping[int, str],
    alpha: float = ALPHA,
    rules: LoopRules = LoopRules(),
) -> DegenerationComparison | None:
    """The paired comparison over `pairs` (prompt index -> (baseline, candidate)); None when no output was long enough
    to judge. A pair where both outputs are too short carries no evidence and is left out; one short output (it
    stopped by itself) is judged not degenerate."""
    judged = {i: p for i, p in pairs.items() if p[0].judged or p[1].judged}
    if not judged:
        return None
    base = {i: b.degenerate for i, (b, _) in judged.items()}
    cand = {i: c.degenerate for i, (_, c) in judged.items()}
    n, nb, nc = len(judged), sum(base.values()), sum(cand.values())
    # McNemar on "clean" as the pass: its b counts the prompts the baseline kept clean and the candidate did not
    mc = mcnemar({i: not d for i, d in cand.items()}, {i: not d for i, d in base.items()})
    diff = paired_difference(cand, base, 1 - alpha)
    worse = mc.b > mc.c and mc.p_value < alpha
    fields = {
        "candidate": nc,
        "baseline": nb,
        "of": n,
        "candidate_only": mc.b,
        "baseline_only": mc.c,
        "estimate": diff.estimate,
        "low": diff.low,
        "high": diff.high,
        "confidence": 1 - alpha,
        "p_value": mc.p_value,
    }
    kind = WarningKind.DEGENERATION_WORSE if worse else WarningKind.DEGENERATION_NOT_WORSE
    listed = sorted((i for i in judged if base[i] or cand[i]), key=lambda i: (base[i], not cand[i], i))
    units = {d.unit for pair in judged.values() for d in pair}
    return DegenerationComparison(
        n_compared=n,
        unit=units.pop() if len(units) == 1 else "mixed",
        baseline_rate=wilson_interval(nb, n),
        candidate_rate=wilson_interval(nc, n),
        difference=diff,
        candidate_only=mc.b,
        baseline_only=mc.c,
        mcnemar_p=mc.p_value,
        mcnemar_method=mc.method,
        worse=worse,
        verdict=ReportWarning(kind, fields=fields),
        prompts=tuple(DegeneratePrompt(i, prompt_ids.get(i, ""), *judged[i]) for i in listed[:MAX_PROMPTS_SHOWN]),
        n_prompts=len(listed),
        rules=rules,
    )
