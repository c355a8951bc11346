"""What the user asked of a verdict, from their flags: the report's options (`--margin`, `--decide-on`,
`--guardrail-floor`, the error rate, the python checks, the seed) and `--fail-on`'s answers; each mistake one line
naming the flag, before anything runs (a misspelt answer must not let a CI gate pass)."""

from __future__ import annotations

from speculab.config.experiment import decide_on_metric, guardrail_floors, margins
from speculab.errors import UserError, did_you_mean
from speculab.harness.gates.answers import FAIL_ON_ANSWERS
from speculab.harness.verdict.correctness import CorrectnessOptions
from speculab.harness.verdict.model import ReportOptions


def parse_margin(text: str | None) -> dict[str, float] | None:
    """`--margin 3%` (or per metric) -> the margins; None: not given (the run's own, else the default)."""
    try:
        return margins(text) if text is not None else None
    except ValueError as e:
        raise UserError(f"--margin: {e}") from None


def parse_guardrail_floor(text: str | None) -> dict[str, float] | None:
    """`--guardrail-floor 20ms` (every time metric) or `ttft=20ms,e2e=50ms` -> the floors, seconds; None: not given
    (the run's own, else the defaults)."""
    try:
        return guardrail_floors(text) if text is not None else None
    except ValueError as e:
        raise UserError(f"--guardrail-floor: {e}") from None


def parse_decide_on(text: str | None) -> str | None:
    """`--decide-on e2e` -> the metric's name (e2e_s); None: not given."""
    try:
        return decide_on_metric(text) if text is not None else None
    except ValueError as e:
        raise UserError(f"--decide-on: {e}") from None


def report_options(
    *,
    allow_python_checks: bool,
    max_error_rate: float | None = None,
    seed: int = 0,
    margin: str | None = None,
    decide_on: str | None = None,
    guardrail_floor: str | None = None,
) -> ReportOptions:
    """The verdict's options from the flags; an unset error rate keeps the report's default."""
    correctness = CorrectnessOptions(allow_python_checks=allow_python_checks)
    rate = {} if max_error_rate is None else {"max_error_rate": max_error_rate}
    return ReportOptions(
        seed=seed,
        correctness=correctness,
        margin=parse_margin(margin),
        decide_on=parse_decide_on(decide_on),
        guardrail_floor=parse_guardrail_floor(guardrail_floor),
        **rate,
    )


def parse_fail_on(text: str | None) -> tuple[str, ...]:
    """`--fail-on slower,worse` -> the answers that fail the gate; () when not given."""
    asked = tuple(a.strip() for a in (text or "").split(",") if a.strip())
    for a in asked:
        if a not in FAIL_ON_ANSWERS:
            choices = ", ".join(FAIL_ON_ANSWERS)
            raise UserError(f"--fail-on: no answer {a!r} (one or more of {choices}){did_you_mean(a, FAIL_ON_ANSWERS)}")
    if text is not None and not asked:
        raise UserError(f"--fail-on: name one or more of {', '.join(FAIL_ON_ANSWERS)}, comma-separated")
    return asked
