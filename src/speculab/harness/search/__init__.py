"""The load search: where a speculation effect stops paying, found by placing load levels adaptively (issue 39).

Pure: a monotone fit of the per-unit log effects against load with a bootstrap interval (`fit`), and where to
probe next, when to stop and what a probe costs (`policy`); on the same fit, an arm's highest load within its SLO
(`goodput`). It knows nothing of requests, runs or the clock; the
caller passes the measured effects and the RNG. Only the run and the verdict import it."""

from speculab.harness.search.fit import (
    CROSSES,
    FASTER_THROUGHOUT,
    RISES,
    SLOWER_THROUGHOUT,
    UNDETERMINED,
    CrossoverFit,
    Probe,
    fit_crossover,
)
from speculab.harness.search.policy import (
    STOP_BUDGET,
    STOP_FASTER,
    STOP_RISES,
    STOP_SLOWER,
    STOP_TOLERANCE,
    SearchBudget,
    SearchOutcome,
    SearchSpec,
    next_loads,
    probe_prompts,
    run_search,
    search_budget,
    stop_reason,
)

__all__ = [
    "CROSSES",
    "FASTER_THROUGHOUT",
    "RISES",
    "SLOWER_THROUGHOUT",
    "STOP_BUDGET",
    "STOP_FASTER",
    "STOP_RISES",
    "STOP_SLOWER",
    "STOP_TOLERANCE",
    "UNDETERMINED",
    "CrossoverFit",
    "Probe",
    "SearchBudget",
    "SearchOutcome",
    "SearchSpec",
    "fit_crossover",
    "next_loads",
    "probe_prompts",
    "run_search",
    "search_budget",
    "stop_reason",
]
