"""One check in both arms on the same prompts: each arm's pass rate (Wilson) with its first failures as records, and
McNemar's test on the prompts that pass in one arm only, as the workload's own checks are judged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from speculab.harness.results.warnings import ReportWarning
from speculab.harness.stats import Interval, mcnemar, wilson_interval

MAX_FAILURES_SHOWN = 10
Judged = tuple[dict[int, bool], list[ReportWarning]]  # prompt index -> passed; a record for each that did not


@dataclass(frozen=True, slots=True)
class ArmChecks:
    arm: str
    checked: int  # prompts with checks and a successful reference output
    passed: int
    pass_rate: Interval  # Wilson
    failures: tuple[ReportWarning, ...]  # the first MAX_FAILURES_SHOWN failures (CHECK_FAILED, STREAM_DIFFERS, ...)
    n_failures: int = 0  # every failed check (0 in a summary before it was counted): the list says how many more


def arm_checks(arm: str, passes: Mapping[int, bool], fails: Sequence[ReportWarning], n_failed: int) -> ArmChecks | None:
    """One arm's pass rate over the prompts judged, with the failures to show; None when none was judged."""
    if not passes:
        return None
    n, k = len(passes), sum(passes.values())
    return ArmChecks(arm, n, k, wilson_interval(k, n), tuple(fails), n_failed)


@dataclass(frozen=True, slots=True)
class PairedCheck:
    """A check beyond equality on the same prompts in both arms: each arm's pass rate and McNemar on the pairs."""

    check: str  # "stream_unary" | "structured_output"
    baseline: ArmChecks | None  # None: not judged (`finding` says why)
    candidate: ArmChecks | None
    finding: ReportWarning  # STREAMING_DEFECT, STRUCTURED_OUTPUT, STREAM_UNARY_* (the report words it)
    mcnemar_b: int | None = None  # baseline passed, candidate failed
    mcnemar_c: int | None = None  # candidate passed, baseline failed
    mcnemar_p: float | None = None
    worse: bool = False  # the candidate fails where the baseline passes: a stream defect, or validity lower at alpha


def pair(check: str, arms: tuple[str, str], judged: Sequence[Judged], finding: ReportWarning) -> PairedCheck:
    """Both arms' per-prompt results, (baseline, candidate) in `arms` and `judged` alike, as a PairedCheck."""
    (bp, bfails), (cp, cfails) = judged
    base = arm_checks(arms[0], bp, bfails[:MAX_FAILURES_SHOWN], len(bfails))
    cand = arm_checks(arms[1], cp, cfails[:MAX_FAILURES_SHOWN], len(cfails))
    mc = mcnemar(cp, bp) if bp and cp else None
    counts = (mc.b, mc.c, mc.p_value) if mc is not None else (None, None, None)
    return PairedCheck(check, base, cand, finding, *counts)
