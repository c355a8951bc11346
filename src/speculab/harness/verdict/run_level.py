"""The run as the unit: two sides of summary-only runs (their tools' own aggregates, no request) compared metric by
metric at each load; pure. One run a side: the figures side by side, no interval, no verdict. `MIN_RUNS` or more a
side: each metric's B/A ratio with a Welch t interval over the runs' log values (runs are independent; their
variance is what separates two launches of one setup) and its decision against the margin (docs/imports.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from speculab.harness.analysis.comparison.margin import DEFAULT_MARGIN, Decision, decide
from speculab.harness.analysis.figures import MEDIAN, RUN_FIGURES, RunFigure, run_figure, run_figure_of
from speculab.harness.analysis.metrics import error_gate
from speculab.harness.design import LevelSpec
from speculab.harness.imports.summaries.summary import RunSummary, StatedAcceptance
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import Interval
from speculab.harness.stats.intervals import CONFIDENCE, welch_diff
from speculab.harness.verdict.model import Answer

# /3: the A/B summary's grammar (#51 item 6): `arms`, `levels[].arms` (each arm's runs, counts and figures) and
# `levels[].comparisons` (B against A), the notes as `warnings`; /2 wrote `loads[].metrics` and `notes` (records;
# #48 item 3), /1 the notes as sentences: both read back and say the same
RUN_LEVEL_SCHEMA = "speculab.report.run-level/3"
_LOADS_LAYOUT = ("speculab.report.run-level/1", "speculab.report.run-level/2")
READABLE_RUN_LEVEL_SCHEMAS = (*_LOADS_LAYOUT, RUN_LEVEL_SCHEMA)
# runs a side for an interval: with 2, Welch's t has about 1 degree of freedom (an interval x12.7 wide)
MIN_RUNS = 3


@dataclass(frozen=True, slots=True)
class RunMetric:
    """One figure at one load: each side's runs' values (() where the files do not hold it) and, with `MIN_RUNS` a
    side, the B/A ratio of their geometric means with its interval and the decision on the speedup scale."""

    name: str
    label: str
    unit: str
    lower_is_better: bool
    a: tuple[float, ...]
    b: tuple[float, ...]
    margin: float
    # each side's value: its runs' geometric mean (one run: its value); None where the files do not hold it
    a_value: float | None = None
    b_value: float | None = None
    point: float | None = None  # b_value / a_value, the figures' ratio (with or without an interval)
    ratio: Interval | None = None  # B / A; None: fewer than MIN_RUNS runs a side, or the figure is not in the files
    decision: Decision | None = None


@dataclass(frozen=True, slots=True)
class RunLevelLoad:
    """One load: how many runs each side has, their request counts, and every figure."""

    level: LevelSpec
    runs_a: int
    runs_b: int
    completed_a: tuple[int | None, ...]
    completed_b: tuple[int | None, ...]
    failed_a: tuple[int | None, ...]
    failed_b: tuple[int | None, ...]
    metrics: tuple[RunMetric, ...]
    # the acceptance each side's files state at this load, by run (1-based, in the side's order), as its tool
    # computed it: shown on the arm (`levels[].arms[].acceptance`), compared by nothing; () where none states any
    acceptance_a: tuple[tuple[int, StatedAcceptance], ...] = ()
    acceptance_b: tuple[tuple[int, StatedAcceptance], ...] = ()

    @property
    def has_interval(self) -> bool:
        return self.runs_a >= MIN_RUNS and self.runs_b >= MIN_RUNS


@dataclass(frozen=True, slots=True)
class RunLevelReport:
    """A comparison whose unit is the run: A (baseline) and B (candidate) as their files name them, load by load."""

    a_name: str
    b_name: str
    a_tool: str
    b_tool: str
    a_version: str | None
    b_version: str | None
    confidence: float
    loads: tuple[RunLevelLoad, ...]
    notes: tuple[ReportWarning, ...]  # what the reader must know of the comparison (RUN_LEVEL_* kinds; the model check)
    unit: str = "run"

    def to_dict(self) -> dict[str, Any]:
        """summary.json of a run-level comparison as plain JSON data (written by `commands.compare.run_level.save`),
        in the A/B summary's grammar (docs/results.md): `arms` (A the baseline, B the candidate, with the tool that
        summarised each), `levels[]` with `arms[]` (each arm's runs: the counts and figures its files state) and
        `comparisons[]` (B against A, figure by figure), `warnings` (the notes, records); the fields only requests
        give (distributions, pairs, per-prompt views) are absent."""
        arms = (
            (self.a_name, "baseline", self.a_tool, self.a_version),
            (self.b_name, "candidate", self.b_tool, self.b_version),
        )
        return {
            "schema": RUN_LEVEL_SCHEMA,
            "title": f"{self.a_name} vs {self.b_name}",
            "unit": self.unit,
            "confidence": self.confidence,
            "arms": [{"name": n, "label": n, "role": role, "tool": tool, "version": v} for n, role, tool, v in arms],
            "levels": [self._level_dict(x) for x in self.loads],
            "warnings": json_safe(self.notes),
        }

    def _level_dict(self, x: RunLevelLoad) -> dict[str, Any]:
        lv = x.level
        spec = {"kind": lv.kind, "value": lv.value, "roles": list(lv.roles), "arrival": lv.arrival}
        spec |= {"max_concurrency": lv.max_concurrency}
        sides = (
            (self.a_name, x.runs_a, x.completed_a, x.failed_a, 0, x.acceptance_a),
            (self.b_name, x.runs_b, x.completed_b, x.failed_b, 1, x.acceptance_b),
        )
        metrics = [
            {"metric": m.name, "label": m.label, "unit": m.unit, "lower_is_better": m.lower_is_better}
            | {"margin": m.margin, "point": m.point, "ratio": json_safe(m.ratio), "decision": json_safe(m.decision)}
            for m in x.metrics
        ]
        return {
            "key": lv.key,
            "label": lv.label,
            **spec,
            "arms": [
                _arm_dict(name, runs, done, failed, x.metrics, i, acc) for name, runs, done, failed, i, acc in sides
            ],
            "comparisons": [{"candidate": self.b_name, "baseline": self.a_name, "metrics": metrics}],
        }


def _arm_dict(
    name: str,
    runs: int,
    done: Sequence[int | None],
    failed: Sequence[int | None],
    metrics: Sequence[RunMetric],
    i: int,
    acceptance: Sequence[tuple[int, StatedAcceptance]] = (),
) -> dict[str, Any]:
    """One arm at one load: its runs, the counts each file states (None: not stated), their error rate (over the runs
    that state both; None where none does), each figure's run values and typical value (`value`: their geometric
    mean; [] and None where the files do not hold it) and the acceptance its files state (`acceptance`, each with
    its run; absent where none states any: a baseline's files, or a tool that keeps none)."""
    stated = [(c, f) for c, f in zip(done, failed, strict=True) if c is not None and f is not None]
    counted = sum(c + f for c, f in stated)
    figures = {m.name: {"runs": list(m.b if i else m.a), "value": m.b_value if i else m.a_value} for m in metrics}
    return {
        "arm": name,
        "runs": runs,
        "completed": list(done),
        "failed": list(failed),
        "error_rate": sum(f for _, f in stated) / counted if counted else None,
        "figures": json_safe(figures),
    } | ({"acceptance": [a.to_dict() | {"run": run} for run, a in acceptance]} if acceptance else {})


def ratio_interval(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """B/A of two sides' run values: exp of the difference of their mean logs, with a Welch t interval; None with
    fewer than `MIN_RUNS` positive values a side."""
    la = [math.log(x) for x in a if x > 0]
    lb = [math.log(x) for x in b if x > 0]
    if len(la) < MIN_RUNS or len(lb) < MIN_RUNS:
        return None
    d, low, high = welch_diff(lb, la, confidence)
    return Interval(math.exp(d), math.exp(low), math.exp(high), confidence, "welch-t-log-runs", len(la) + len(lb))


def geometric_mean(values: Sequence[float]) -> float | None:
    """The runs' typical value (ratios of geometric means are the interval's centre); None with no positive value."""
    logs = [math.log(x) for x in values if x > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def margin_for(key: str | None, margins: Mapping[str, float]) -> float:
    """A figure's margin: its latency's (`--margin`), else, for a throughput, the one margin given to every latency,
    else the default."""
    if key is not None:
        return margins.get(key, DEFAULT_MARGIN)
    given = set(margins.values())
    return given.pop() if len(given) == 1 else DEFAULT_MARGIN


def _decision(ratio: Interval | None, lower_is_better: bool, margin: float) -> Decision | None:
    """The answer over runs against the margin; None without an interval (fewer than `MIN_RUNS` runs a side)."""
    if ratio is None:
        return None
    # the speedup scale (> 1 = better): a lower time is a speedup of A / B
    low, high = (1 / ratio.high, 1 / ratio.low) if lower_is_better else (ratio.low, ratio.high)
    return decide(low, high, margin)


def _metric(
    fig: RunFigure, a: Sequence[RunSummary], b: Sequence[RunSummary], margins: Mapping[str, float]
) -> RunMetric:
    va = tuple(v for r in a if (v := r.aggregates.get(fig.name)) is not None)
    vb = tuple(v for r in b if (v := r.aggregates.get(fig.name)) is not None)
    margin = margin_for(fig.margin_name, margins)
    ratio = ratio_interval(va, vb)
    decision = _decision(ratio, fig.lower_is_better, margin)
    ga, gb = geometric_mean(va), geometric_mean(vb)
    point = gb / ga if ga is not None and gb is not None else None
    return RunMetric(fig.name, fig.label, fig.unit, fig.lower_is_better, va, vb, margin, ga, gb, point, ratio, decision)


def compare_load(
    level: LevelSpec, a: Sequence[RunSummary], b: Sequence[RunSummary], margins: Mapping[str, float]
) -> RunLevelLoad:
    """Every run-level figure of the figures table (`RUN_FIGURES`) of one load's runs, A's against B's."""
    return RunLevelLoad(
        level=level,
        runs_a=len(a),
        runs_b=len(b),
        completed_a=tuple(r.completed for r in a),
        completed_b=tuple(r.completed for r in b),
        failed_a=tuple(r.failed for r in a),
        failed_b=tuple(r.failed for r in b),
        metrics=tuple(_metric(fig, a, b, margins) for fig in RUN_FIGURES),
        acceptance_a=tuple((i, x) for i, r in enumerate(a, 1) for x in r.acceptance),
        acceptance_b=tuple((i, x) for i, r in enumerate(b, 1) for x in r.acceptance),
    )


def redecide(report: RunLevelReport, margins: Mapping[str, float]) -> RunLevelReport:
    """The same comparison with each figure decided against `margins` (`--margin` on `speculab report`): the
    intervals over runs do not depend on the margin, so only the answers and the margins they name change."""
    loads = []
    for x in report.loads:
        metrics = []
        for m in x.metrics:
            fig = run_figure(m.name)  # None: a figure a newer table dropped (its margin stays)
            margin = margin_for(fig.margin_name, margins) if fig is not None else m.margin
            metrics.append(replace(m, margin=margin, decision=_decision(m.ratio, m.lower_is_better, margin)))
        loads.append(replace(x, metrics=tuple(metrics)))
    return replace(report, loads=tuple(loads))


def run_level_from_json(text: str) -> RunLevelReport:
    """A run-level summary.json (`RUN_LEVEL_SCHEMA`, or the `loads[]` layout of /1 and /2) read back; ValueError when
    it is not one."""
    d = json.loads(text)
    if not isinstance(d, dict) or d.get("schema") not in READABLE_RUN_LEVEL_SCHEMAS:
        raise ValueError(f"not a {RUN_LEVEL_SCHEMA} summary")
    try:
        if d["schema"] == RUN_LEVEL_SCHEMA:
            return _from_levels(d)
        return RunLevelReport(
            **{k: d[k] for k in ("a_name", "b_name", "a_tool", "b_tool", "a_version", "b_version", "confidence")},
            loads=tuple(_load_from(x) for x in d["loads"]),
            notes=tuple(ReportWarning.from_dict(n) for n in d["notes"]),  # a /1 file's sentences: notes
            unit=d.get("unit", "run"),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"a {RUN_LEVEL_SCHEMA} summary with a missing or malformed field ({e})") from None


def _from_levels(d: Mapping[str, Any]) -> RunLevelReport:
    """A /3 summary (the A/B grammar) read back."""
    a, b = d["arms"]
    return RunLevelReport(
        a_name=a["name"],
        b_name=b["name"],
        a_tool=a["tool"],
        b_tool=b["tool"],
        a_version=a.get("version"),
        b_version=b.get("version"),
        confidence=d["confidence"],
        loads=tuple(_level_from(x) for x in d["levels"]),
        notes=tuple(ReportWarning.from_dict(n) for n in d["warnings"]),
        unit=d.get("unit", "run"),
    )


def _level_from(d: Mapping[str, Any]) -> RunLevelLoad:
    level = LevelSpec(d["kind"], d["value"], tuple(d.get("roles") or ()), d.get("arrival"), d.get("max_concurrency"))
    a, b = d["arms"]
    (comparison,) = d["comparisons"]
    metrics = []
    for m in comparison["metrics"]:
        fa, fb = a["figures"][m["metric"]], b["figures"][m["metric"]]
        # the record's fields as /2 kept them together: the comparison's, and each arm's values of the figure
        sides = {"a": fa["runs"], "b": fb["runs"], "a_value": fa["value"], "b_value": fb["value"]}
        metrics.append(_metric_from(m | sides | {"name": m["metric"]}))
    counts = {f"{k}_{side}": tuple(arm[k]) for side, arm in (("a", a), ("b", b)) for k in ("completed", "failed")}
    stated = {f"acceptance_{side}": _acceptance_from(arm) for side, arm in (("a", a), ("b", b))}
    return RunLevelLoad(level, a["runs"], b["runs"], **counts, metrics=tuple(metrics), **stated)


def _acceptance_from(arm: Mapping[str, Any]) -> tuple[tuple[int, StatedAcceptance], ...]:
    """An arm's `acceptance[]` read back (absent: none stated, as in files written before the key)."""
    return tuple(
        (x["run"], StatedAcceptance(x["kind"], x["value"], x["weighting"], x["source"]))
        for x in arm.get("acceptance") or ()
    )


def _load_from(d: Mapping[str, Any]) -> RunLevelLoad:
    lv = d["level"]
    level = LevelSpec(
        lv["kind"], lv["value"], tuple(lv.get("roles") or ()), lv.get("arrival"), lv.get("max_concurrency")
    )
    counts = {k: tuple(d[k]) for k in ("completed_a", "completed_b", "failed_a", "failed_b")}
    return RunLevelLoad(level, d["runs_a"], d["runs_b"], **counts, metrics=tuple(_metric_from(m) for m in d["metrics"]))


def _metric_from(d: Mapping[str, Any]) -> RunMetric:
    r = d.get("ratio")
    ratio = None if r is None else Interval(*(r[k] for k in ("estimate", "low", "high", "confidence", "method", "n")))
    decision = None if d.get("decision") is None else Decision(d["decision"])
    return RunMetric(
        d["name"],
        d["label"],
        d["unit"],
        d["lower_is_better"],
        tuple(d["a"]),
        tuple(d["b"]),
        d["margin"],
        d.get("a_value"),
        d.get("b_value"),
        d.get("point"),
        ratio,
        decision,
    )


# --fail-on answers a run-level comparison can give: no outputs are in summary files, so "worse" (correctness) cannot
RUN_LEVEL_UNANSWERABLE = ("worse",)


def run_level_error_gate(report: RunLevelReport, max_error_rate: float) -> ReportWarning | None:
    """The first run (A's then B's, load by load) whose file's own counts (failed of completed + failed) fail the
    error gate, as the gate's record about that side and load (the command exits 4 with it); None when every run that
    states its counts passes (a file that states no failed count cannot fail it: SGLang's)."""
    for x in report.loads:
        for side, done, failed in (
            (report.a_name, x.completed_a, x.failed_a),
            (report.b_name, x.completed_b, x.failed_b),
        ):
            for c, f in zip(done, failed, strict=True):
                if c is None or f is None:
                    continue
                why = error_gate(f, c + f, {}, max_error_rate)
                if why is not None:
                    return replace(why, subject=side, load=x.level.label)
    return None


def run_level_answers(report: RunLevelReport, decide_on: str, max_error_rate: float) -> tuple[Answer, ...]:
    """The headline answers of a run-level comparison as (answer, where), as `gates.answers.headline_answers` gives
    them for an A/B run: the deciding metric's median figure at each load ("no-verdict" without an interval or
    without the figure in the files), and "errors" where a run on either side lost more than `max_error_rate` of its
    requests (where: a RUN_LOST_REQUESTS record; runs whose files do not count their requests cannot be gated and
    give no answer)."""
    median = run_figure_of(decide_on, MEDIAN)
    out: list[Answer] = []
    for x in report.loads:
        m = next((m for m in x.metrics if median is not None and m.name == median.name), None)
        d = m.decision if m is not None else None
        answer = d.value if d is not None and d is not Decision.INSUFFICIENT else "no-verdict"
        out.append((answer, f"{report.b_name} at {x.level.label}"))
        for side, done, failed in (
            (report.a_name, x.completed_a, x.failed_a),
            (report.b_name, x.completed_b, x.failed_b),
        ):
            rates = [f / (c + f) for c, f in zip(done, failed, strict=True) if c is not None and f and c + f > 0]
            if rates and max(rates) > max_error_rate:
                lost = {"side": side, "at": x.level.label, "lost": max(rates)}
                out.append(("errors", ReportWarning(WarningKind.RUN_LOST_REQUESTS, fields=lost)))
    return tuple(out)
