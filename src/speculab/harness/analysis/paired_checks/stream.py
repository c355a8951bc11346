"""Stream against unary: at temperature 0 an arm's streamed text of a prompt must be the text it answers the same
request with unary. A difference is a streaming-path defect of that arm (vllm#30204: tokens dropped only when
streaming), not the arms' outputs differing. Text the stream lacks or repeats is what a streaming path does wrong;
other text in its place may be numerics (a batch of another size), so only the former makes a candidate worse."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from speculab.harness.analysis.paired_checks.paired import ArmChecks, Judged, PairedCheck, pair
from speculab.harness.records import RequestSpec
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.workload.items import approx_tokens

DEFECTS = ("dropped", "duplicated")  # what a streaming path does wrong


def stream_difference(streamed: str, unary: str) -> dict[str, Any] | None:
    """Where a request's streamed text differs from its unary text (None: identical), as a record's fields: the first
    differing character, and what lies between the common head and tail (approximate tokens: words and punctuation):
    text the stream lacks (dropped), text it has more of (duplicated), or other text in its place (replaced)."""
    if streamed == unary:
        return None
    head = _common(streamed, unary)
    tail = _common(streamed[head:][::-1], unary[head:][::-1])
    extra, missing = streamed[head : len(streamed) - tail], unary[head : len(unary) - tail]
    kind = "replaced" if extra and missing else ("dropped" if missing else "duplicated")
    counts = {"dropped_tokens": approx_tokens(missing), "duplicated_tokens": approx_tokens(extra)}
    return {"position": head, "kind": kind, **counts}


def _common(a: str, b: str) -> int:
    """The length of a's and b's common head."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def stream_results(answers: Iterable[tuple[RequestSpec, str, str]]) -> Judged:
    """Each prompt's streamed text against its unary text, (item, streamed, unary): a STREAM_DIFFERS record (item,
    prompt_id and `stream_difference`'s fields) for each that differs."""
    passes: dict[int, bool] = {}
    fails: list[ReportWarning] = []
    for item, streamed, unary in sorted(answers, key=lambda a: a[0].index):
        diff = stream_difference(streamed, unary)
        passes[item.index] = diff is None
        if diff is not None:
            fields = {"item": item.index, "prompt_id": item.prompt_id, **diff}
            fails.append(ReportWarning(WarningKind.STREAM_DIFFERS, fields=fields))
    return passes, fails


def stream_unary(arms: tuple[str, str], judged: Sequence[Judged]) -> PairedCheck:
    """Both arms' stream against unary results (baseline first) paired: the candidate worse where its stream drops or
    duplicates text on a prompt the baseline streams as it answers unary; its finding the candidate's defect, else the
    baseline's, else that every prompt streamed as it was answered unary."""
    (bp, _), (cp, cfails) = judged
    alike = ReportWarning(WarningKind.STREAM_UNARY_ALIKE, fields={"of": len(bp.keys() & cp.keys())})
    check = pair("stream_unary", arms, judged, alike)
    worse = any(bp.get(f.fields["item"]) and f.fields["kind"] in DEFECTS for f in cfails)
    return replace(check, finding=(stream_defects(check) or [alike])[0], worse=worse)


def stream_defects(check: PairedCheck | None) -> list[ReportWarning]:
    """Each arm's STREAMING_DEFECT, the candidate's first: side, how many of its prompts streamed otherwise than
    unary (of how many), and the first of them (a drop or duplication before other text)."""
    sides: tuple[tuple[str, ArmChecks | None], ...] = (
        (("candidate", check.candidate), ("baseline", check.baseline)) if check is not None else ()
    )
    out = []
    for side, arm in sides:
        if arm is not None and arm.failures:
            first = min(arm.failures, key=lambda f: (f.fields["kind"] not in DEFECTS, f.fields["item"]))
            fields = {"side": side, "count": arm.checked - arm.passed, "of": arm.checked, "first": dict(first.fields)}
            out.append(ReportWarning(WarningKind.STREAMING_DEFECT, fields=fields))
    return out
