"""The figures table: every number two arms (per prompt) or two sets of runs (run by run) are compared on, named once.

Each `Figure` row holds its name (the key in summary.json, `--margin`, `decide_on`), the report's label, its unit,
its direction, how one request's value is read, its `margin:` key and default margin, what summary-only files state
of it (`aggregates`: its median and p99, or the run's own rate) and whether it is the headline. Everything else
derives from the rows: the verdict's compared metrics (`COMPARED_METRICS`), the run-level comparison's figures and
the summary readers' keys (`RUN_FIGURES`), the default deciding metric (`HEADLINE`) and the report's views (which
name rows, never retype them). config/ keeps its own copy of the margin keys (it may not import the harness);
tests/unit/harness/analysis/test_metric_table.py holds them equal.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN

# What a summary-only file states of a figure (`Figure.aggregates`): a statistic over the run's requests, or, for a
# figure that is itself one number per run (a rate over the run's window), that number.
MEDIAN, P99, RUN_VALUE = "median", "p99", "run"


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure: its one home. Add a row to `FIGURES` and the verdict, the margins, the run-level comparison, the
    summary readers' fields and the report's tables follow."""

    name: str  # the key everywhere: `Ratio.metric`, summary.json's `margin`, `decide_on`, `ReportOptions.margin`
    label: str  # what the report calls it
    unit: str  # of one value (files hold seconds; the report converts for display)
    lower_is_better: bool  # True: a lower value is better (speedup = baseline / candidate)
    # one successful request's value (None: not defined for it), read from its `metrics.RequestMetrics` (typed Any:
    # metrics.py names its distributions by this table, so this module may not import it back, even for a type;
    # tests run every extractor on a real one); None for a figure that only a whole run has
    extract: Callable[[Any], float | None] | None = None
    margin_key: str | None = None  # its key under `margin:` (and `--margin`); None: not compared per prompt
    default_margin: float = DEFAULT_MARGIN  # relative, when neither the run nor the options give one
    # a guardrail's absolute floor (seconds, `guardrail_floor:`) when neither the run nor the options give one: a loss
    # on this figure smaller than this, per request, is shown but never holds a candidate back (docs/recommendation.md)
    default_floor_s: float = 0.0
    aggregates: tuple[str, ...] = ()  # what summary-only files state of it (MEDIAN, P99, RUN_VALUE): `RunFigure`s
    # its place among a run-level comparison's figures: the tools' own order (vLLM's `--percentile-metrics`
    # ttft,tpot,itl,e2el, then the rates), which that comparison's summary.json and terminal keep; the verdict's
    # order is the table's
    summary_order: int = 0
    headline: bool = False  # the one figure the verdict leads with, and the deciding metric unless `decide_on:`

    @property
    def run_figures(self) -> tuple[RunFigure, ...]:
        """What summary-only files state of this figure, one `RunFigure` per entry of `aggregates`."""
        return tuple(RunFigure.of_figure(self, statistic) for statistic in self.aggregates)


@dataclass(frozen=True, slots=True)
class RunFigure:
    """One number of a whole run as a summary-only file states it: a statistic of a `Figure` over the run's requests
    (`tpot_median_s`, "TPOT median"), or the figure itself where it is one number per run (`output_tok_s`)."""

    name: str  # the summary readers' key (`imports.summaries.Aggregates`), run-level summary.json's `metrics[].name`
    label: str
    figure: Figure
    statistic: str  # MEDIAN, P99 or RUN_VALUE

    @classmethod
    def of_figure(cls, figure: Figure, statistic: str) -> RunFigure:
        if statistic == RUN_VALUE:
            return cls(figure.name, figure.label, figure, statistic)
        stem, unit = figure.name.rsplit("_", 1)  # units stay last in names: tpot_s -> tpot_median_s
        return cls(f"{stem}_{statistic}_{unit}", f"{figure.label} {statistic}", figure, statistic)

    @property
    def unit(self) -> str:
        return self.figure.unit

    @property
    def lower_is_better(self) -> bool:
        return self.figure.lower_is_better

    @property
    def margin_name(self) -> str | None:
        """Whose `--margin` it is decided against: its figure's; None for a figure not compared per prompt (a rate:
        run_level.margin_for gives it the one margin given to every latency)."""
        return self.figure.name if self.figure.margin_key is not None else None


def _mean_itl_s(m: Any) -> float | None:
    """A request's mean per-token ITL after the first token; None when its per-token counts are unknown."""
    return statistics.fmean(m.itl_s) if m.itl_s else None


_LATENCY = (MEDIAN, P99)

# TPOT is the headline (speculation's promise is fewer seconds per output token); ITL is each request's mean
# per-token gap after the first token. The rates are a run's own: summary-only files state them, no request has one.
#
# The guardrails' floors: a wait a user sees once per request (the first token, the whole answer) holds a candidate
# back only when it grows by more than 20 ms: about one frame of a 60 Hz screen (16.7 ms), a fifth of the 0.1 s
# within which a response still feels instant (Nielsen, "Usability Engineering", 1993): a change a user finds by
# measuring, not by waiting. It is above the few milliseconds a draft's first step or a proposer's setup adds to the
# first token (issue 50: 4 ms more held back a candidate 2.34x faster end to end). The relative margin still applies
# above it: the bar is max(margin, floor). A per-token figure has no floor: its loss is paid once per token, so no
# amount is small in itself (1 ms a token is a second over a 1,000-token answer); its sum is E2E, which has one. A
# user with a stricter need sets `guardrail_floor:` (0 for the margin alone) or an SLO (`slos:`).
FLOOR_PER_REQUEST_S = 0.020
TPOT = Figure(
    "tpot_s", "TPOT", "s", True, lambda m: m.tpot_s, "tpot", aggregates=_LATENCY, summary_order=2, headline=True
)
E2E = Figure("e2e_s", "E2E", "s", True, lambda m: m.e2e_s, "e2e", aggregates=_LATENCY, summary_order=4,
             default_floor_s=FLOOR_PER_REQUEST_S)  # fmt: skip
TTFT = Figure("ttft_s", "TTFT", "s", True, lambda m: m.ttft_s, "ttft", aggregates=_LATENCY, summary_order=1,
              default_floor_s=FLOOR_PER_REQUEST_S)  # fmt: skip
ITL = Figure("itl_s", "ITL", "s", True, _mean_itl_s, "itl", aggregates=_LATENCY, summary_order=3)
OUTPUT_TOK_S = Figure("output_tok_s", "output tok/s", "tok/s", False, aggregates=(RUN_VALUE,), summary_order=5)
REQUEST_RPS = Figure("request_rps", "requests/s", "req/s", False, aggregates=(RUN_VALUE,), summary_order=6)

# The table, in the order the verdict makes and the report shows the compared metrics (the headline first).
FIGURES = (TPOT, E2E, TTFT, ITL, OUTPUT_TOK_S, REQUEST_RPS)

# The one headline row (a test holds that there is exactly one, first among the compared metrics).
HEADLINE = next(f for f in FIGURES if f.headline)

# The metrics an A/B verdict compares per prompt: the rows a request has a value of.
COMPARED_METRICS = tuple(f for f in FIGURES if f.extract is not None)

# Each compared metric's default guardrail floor, seconds (0: its margin alone).
DEFAULT_FLOORS_S = {c.name: c.default_floor_s for c in COMPARED_METRICS}

# The run-level comparison's figures (summary-only files), in its order; the summary readers read exactly these.
RUN_FIGURES = tuple(r for f in sorted(FIGURES, key=lambda f: f.summary_order) for r in f.run_figures)


def compared_metric(name: str) -> Figure:
    """The compared metric named `name`; KeyError for a name the table does not compare per prompt."""
    for c in COMPARED_METRICS:
        if c.name == name:
            return c
    raise KeyError(name)


def run_figure(name: str) -> RunFigure | None:
    """The run-level figure named `name` (`tpot_median_s`); None for one the table does not hold."""
    return next((r for r in RUN_FIGURES if r.name == name), None)


def run_figure_of(figure: str, statistic: str) -> RunFigure | None:
    """The run-level figure stating `statistic` of the figure named `figure` (`tpot_s`, MEDIAN); None where the table
    has none."""
    return next((r for r in RUN_FIGURES if r.figure.name == figure and r.statistic == statistic), None)
