"""What summary.json says of a phased load (`phases`, `timeline`): frozen records, read by the report from the model
(`verdict.model` re-exports them); built by `verdict.phases.views`."""

from __future__ import annotations

from dataclasses import dataclass

from speculab.harness.verdict.choices import CandidateAnswer


@dataclass(frozen=True, slots=True)
class PhaseArm:
    """One arm in one window of a phased load: its tail (p99, seconds; None where no request gave one) and stalls."""

    arm: str
    sent: int
    error: int
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    e2e_p99_s: float | None
    stalled_requests: int | None


@dataclass(frozen=True, slots=True)
class PhaseMetric:
    """One candidate's verdict on one compared metric in one window (the window's level comparison, in brief): the
    four answers' decision against the margin, and the speedup with its interval (NaN where there is none)."""

    candidate: str
    metric: str
    decision: str  # faster | equivalent | slower | inconclusive | not enough paired data, or the gate that withheld it
    speedup: float
    speedup_low: float
    speedup_high: float
    n_pairs: int


@dataclass(frozen=True, slots=True)
class PhaseWindowView:
    """One window of a phased load (a phase's steady part, or the transition into it), judged as a load level is:
    `key` is its level in `Report.levels` (the full comparisons); here, each candidate's decision on the deciding
    metric and every guardrail's, the recommendation's answers, and each arm's tail and stalls."""

    key: str
    label: str
    start_s: float  # seconds into the schedule
    end_s: float
    metrics: tuple[PhaseMetric, ...]  # per candidate: the deciding metric first, then the time guardrails
    answers: tuple[CandidateAnswer, ...]  # every candidate's ship / plain / undecided here, its guardrails' answers
    arms: tuple[PhaseArm, ...]


@dataclass(frozen=True, slots=True)
class PhaseView:
    """One phase of a phased load (`loads: {phases: [...]}`): its load and place in the schedule, its steady window,
    and the transition window that opens it (None for the first phase, or one whose load did not change)."""

    number: int  # 1-based
    kind: str  # concurrency | rate
    value: float
    label: str
    start_s: float
    end_s: float
    steady: PhaseWindowView | None
    transition: PhaseWindowView | None = None


@dataclass(frozen=True, slots=True)
class CounterPoint:
    """One arm's speculation between two /metrics samples of a phased load (its engine's counters diffed): the
    acceptance (accepted / drafted tokens) and the mean k of its decode steps (k=0: speculation skipped); None
    where the engine does not count it. `t_s`: the interval's end, seconds into the schedule."""

    arm: str
    t_s: float
    acceptance: float | None
    k: float | None


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """One request of a phased load's first repeat, at its send time into the schedule: the chart's material."""

    arm: str
    t_s: float
    tpot_s: float | None
    e2e_s: float | None
    acceptance: float | None = None  # accepted / drafted tokens of its response, where the engine reports it
