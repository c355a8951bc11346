"""Structured outputs: each arm's outputs against their items' `response_format` (`workload.checks.structured_output`:
the whole output one JSON value valid against the schema), paired per prompt. An engine that silently ignores the
format under speculation (lmdeploy#4559) answers in prose: its validity rate falls where the baseline's does not."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from speculab.harness.analysis.paired_checks.paired import Judged, PairedCheck, pair
from speculab.harness.records import RequestSpec
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.workload.checks import structured_output


def structured_results(answers: Iterable[tuple[RequestSpec, str]]) -> Judged:
    """Each output against its item's `response_format`, (item, output), items without one left out: a
    STRUCTURED_INVALID record (item, prompt_id, reason) for each that is not valid."""
    passes: dict[int, bool] = {}
    fails: list[ReportWarning] = []
    for item, text in answers:
        result = structured_output(text, item.response_format) if item.response_format else None
        if result is None:
            continue
        passes[item.index] = result.passed
        if not result.passed:
            fields = {"item": item.index, "prompt_id": item.prompt_id, "reason": result.reason}
            fails.append(ReportWarning(WarningKind.STRUCTURED_INVALID, fields=fields))
    return passes, fails


def structured_outputs(arms: tuple[str, str], judged: Sequence[Judged], alpha: float) -> PairedCheck | None:
    """Both arms' validity (baseline first) paired, a STRUCTURED_OUTPUT record: the candidate worse (`lower`) where
    McNemar finds its rate lower at `alpha`; None when no prompt was judged in both."""
    check = pair("structured_output", arms, judged, ReportWarning(WarningKind.STRUCTURED_OUTPUT))
    b, c, p = check.baseline, check.candidate, check.mcnemar_p
    if b is None or c is None or p is None:
        return None
    worse = p < alpha and (check.mcnemar_b or 0) > (check.mcnemar_c or 0)
    fields = {"candidate_rate": c.pass_rate.estimate, "baseline_rate": b.pass_rate.estimate, "of": b.checked}
    finding = ReportWarning(WarningKind.STRUCTURED_OUTPUT, fields={**fields, "p_value": p, "lower": worse})
    return replace(check, finding=finding, worse=worse)
