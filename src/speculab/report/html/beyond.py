"""report.html's rows for the correctness checks beyond equality (issue 50): stream against unary and structured
outputs, each check's finding, each arm's pass rate and its failures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from speculab.harness.verdict.correctness import CorrectnessComparison
from speculab.report.phrases import failure_lines, reason_text

_BEYOND = {"stream_unary": "stream against unary", "structured_output": "structured outputs"}


def beyond_rows(k: CorrectnessComparison, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The checks beyond equality: each one's finding, each arm's pass rate, and its failures."""
    out = []
    for check in (k.stream_unary, k.structured_output):
        if check is None:
            continue
        arms = [a for a in (check.baseline, check.candidate) if a is not None]
        out.append(
            {
                "name": _BEYOND[check.check],
                "finding": reason_text(check.finding),
                "rates": [f"{labels.get(a.arm, a.arm)}: {a.passed} of {a.checked}" for a in arms],
                "failures": [
                    (labels.get(a.arm, a.arm), failure_lines(a.failures, a.n_failures)) for a in arms if a.failures
                ],
            }
        )
    return out
