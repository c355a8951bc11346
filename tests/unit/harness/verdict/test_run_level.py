"""The run as the unit (summary-only files): figures side by side with one run a side, a Welch t interval over
runs' logs and a decision against the margin with three or more."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from speculab.harness.analysis.comparison.margin import Decision
from speculab.harness.analysis.figures import FIGURES, RUN_FIGURES, TPOT
from speculab.harness.design import LevelSpec
from speculab.harness.imports.summaries.summary import Aggregates, RunSummary
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.verdict.run_level import (
    MIN_RUNS,
    RunLevelReport,
    compare_load,
    geometric_mean,
    margin_for,
    ratio_interval,
    run_level_answers,
)

C4 = LevelSpec("concurrency", 4, ("low", "operating"))


def _run(tpot_s: float, tok_s: float | None = None, run: int = 1) -> RunSummary:
    return RunSummary(
        path=Path("x.json"),
        tool="vllm bench serve",
        level=C4,
        aggregates=Aggregates({"tpot_median_s": tpot_s, "output_tok_s": tok_s}),
        completed=20,
        failed=0,
        run=run,
    )


def test_the_run_level_figures_are_the_figures_tables_rows_with_aggregates():
    """No second table: every figure compared run by run is one the figures table states for summary files, with
    that row's label, unit and direction, in the tools' order (summary.json's and the terminal's)."""
    load = compare_load(C4, [_run(0.030, 100.0)], [_run(0.020, 150.0)], {"tpot_s": 0.07})
    assert [m.name for m in load.metrics] == [r.name for r in RUN_FIGURES]
    assert {r.figure for r in RUN_FIGURES} == {f for f in FIGURES if f.aggregates}
    assert [m.name for m in load.metrics] == [
        "ttft_median_s", "ttft_p99_s", "tpot_median_s", "tpot_p99_s", "itl_median_s", "itl_p99_s",
        "e2e_median_s", "e2e_p99_s", "output_tok_s", "request_rps",
    ]  # fmt: skip
    for m, r in zip(load.metrics, RUN_FIGURES, strict=True):
        assert (m.label, m.unit, m.lower_is_better) == (r.label, r.figure.unit, r.figure.lower_is_better)
    tpot = {m.name: m for m in load.metrics}
    assert tpot["tpot_median_s"].label == "TPOT median" and tpot["tpot_p99_s"].margin == 0.07  # TPOT's margin
    assert tpot["output_tok_s"].label == "output tok/s" and not tpot["output_tok_s"].lower_is_better
    assert TPOT.run_figures[0].name == "tpot_median_s"


def test_an_aggregate_outside_the_table_is_refused():
    with pytest.raises(ValueError, match="tpot_mean_s"):
        Aggregates({"tpot_mean_s": 0.02})


def test_one_run_a_side_is_side_by_side_without_interval_or_verdict():
    load = compare_load(C4, [_run(0.030, 100.0)], [_run(0.020, 150.0)], {})
    tpot = next(m for m in load.metrics if m.name == "tpot_median_s")
    assert not load.has_interval
    assert tpot.a == (0.030,) and tpot.b == (0.020,)
    assert tpot.point == pytest.approx(0.020 / 0.030)
    assert tpot.ratio is None and tpot.decision is None
    ttft = next(m for m in load.metrics if m.name == "ttft_median_s")
    assert ttft.a == () and ttft.a_value is None and ttft.point is None  # not in the files: absent, never filled in


def test_three_runs_a_side_give_an_interval_and_a_decision():
    a = [_run(x, run=i) for i, x in enumerate((0.0300, 0.0302, 0.0298), 1)]
    b = [_run(x, run=i) for i, x in enumerate((0.0200, 0.0201, 0.0199), 1)]
    load = compare_load(C4, a, b, {})
    tpot = next(m for m in load.metrics if m.name == "tpot_median_s")
    assert load.has_interval and load.runs_a == MIN_RUNS
    assert tpot.ratio is not None and tpot.ratio.low < tpot.ratio.estimate < tpot.ratio.high < 1
    assert tpot.decision is Decision.FASTER  # lower time: B faster


def test_runs_within_each_other_are_equivalent_or_inconclusive_never_a_verdict():
    a = [_run(x) for x in (0.0300, 0.0310, 0.0290)]
    b = [_run(x) for x in (0.0305, 0.0295, 0.0300)]
    tpot = next(m for m in compare_load(C4, a, b, {}).metrics if m.name == "tpot_median_s")
    assert tpot.decision in (Decision.EQUIVALENT, Decision.INCONCLUSIVE)


def test_higher_throughput_is_faster():
    a = [_run(0.03, t) for t in (100.0, 101.0, 99.0)]
    b = [_run(0.03, t) for t in (150.0, 151.0, 149.0)]
    tok = next(m for m in compare_load(C4, a, b, {}).metrics if m.name == "output_tok_s")
    assert tok.decision is Decision.FASTER and tok.ratio is not None and tok.ratio.estimate > 1


def test_ratio_interval_needs_min_runs_a_side_and_matches_welch_on_logs():
    assert ratio_interval([1.0, 2.0], [1.0, 2.0, 3.0]) is None
    iv = ratio_interval([1.0, 1.1, 0.9], [2.0, 2.2, 1.8])
    assert iv is not None
    assert iv.estimate == pytest.approx(2.0)  # the logs differ by log 2 exactly
    assert iv.low < 2.0 < iv.high


def test_geometric_mean_and_margins():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([]) is None
    assert margin_for("tpot_s", {"tpot_s": 0.05}) == 0.05
    assert margin_for(None, {"tpot_s": 0.05, "ttft_s": 0.05}) == 0.05  # one margin for every latency: throughput's too
    assert margin_for(None, {"tpot_s": 0.05, "ttft_s": 0.02}) == pytest.approx(0.03)


def test_the_report_is_strict_json(tmp_path: Path):
    import json

    from speculab.harness.results.summary_file import write_summary_file
    from speculab.harness.verdict.run_level import RUN_LEVEL_SCHEMA, RunLevelReport

    load = compare_load(C4, [_run(0.030)], [_run(0.020)], {})
    r = RunLevelReport("a", "b", "t", "t", None, None, 0.95, (load,), (ReportWarning(WarningKind.RUN_LEVEL_UNIT),))
    d = json.loads(write_summary_file(tmp_path, r.to_dict(), indent=1).read_text(encoding="utf-8"))
    assert d["schema"] == RUN_LEVEL_SCHEMA == "speculab.report.run-level/3"
    assert d["warnings"] == [{"kind": "run_level_unit", "subject": "", "load": "", "fields": {}}]  # records, no words
    # the A/B summary's grammar: arms, levels[].arms (each arm's own), levels[].comparisons (B against A)
    assert [a["role"] for a in d["arms"]] == ["baseline", "candidate"] and d["unit"] == "run"
    level = d["levels"][0]
    assert level["key"] == "c4" and level["label"] == "concurrency 4" and level["kind"] == "concurrency"
    a, b = level["arms"]
    assert a["arm"] == "a" and a["runs"] == 1 and a["completed"] == [20] and a["failed"] == [0]
    assert a["error_rate"] == 0.0 and a["figures"]["ttft_median_s"] == {"runs": [], "value": None}
    assert b["figures"]["tpot_median_s"] == {"runs": [0.02], "value": pytest.approx(0.02)}
    (c,) = level["comparisons"]
    assert c["candidate"] == "b" and c["baseline"] == "a"
    tpot = next(m for m in c["metrics"] if m["metric"] == "tpot_median_s")
    assert tpot["point"] == pytest.approx(2 / 3) and tpot["ratio"] is None and tpot["decision"] is None
    assert "distributions" not in a and "n_pairs" not in tpot  # per-request fields absent
    assert not any(isinstance(v, float) and math.isnan(v) for v in b["figures"]["tpot_median_s"]["runs"])


def test_the_saved_report_reads_back_and_is_re_decided_against_a_new_margin(tmp_path: Path):
    """`speculab report DIR` of a run-level comparison: summary.json read back as it was written; `--margin` changes
    the answers and the margins they name, never the runs' figures or intervals."""
    from speculab.harness.results.summary_file import write_summary_file
    from speculab.harness.verdict.run_level import RunLevelReport, redecide, run_level_from_json

    a = [_run(x, run=i) for i, x in enumerate((0.0300, 0.0302, 0.0298), 1)]
    b = [_run(x, run=i) for i, x in enumerate((0.0200, 0.0201, 0.0199), 1)]
    notes = (ReportWarning(WarningKind.RUN_LEVEL_SIDE, "A", fields={"name": "a", "runs": 3, "tool": "t"}),)
    report = RunLevelReport("a", "b", "t", "t", "1", None, 0.95, (compare_load(C4, a, b, {}),), notes)
    back = run_level_from_json(write_summary_file(tmp_path, report.to_dict(), indent=1).read_text(encoding="utf-8"))
    assert back == report
    wide = redecide(back, {"tpot_s": 0.6})  # TPOT 1.5x faster is within a 60 % margin
    tpot = next(m for m in wide.loads[0].metrics if m.name == "tpot_median_s")
    assert tpot.decision is Decision.EQUIVALENT and tpot.margin == 0.6
    assert tpot.ratio == next(m for m in report.loads[0].metrics if m.name == "tpot_median_s").ratio
    assert redecide(wide, {}) == report  # the default margin again: the answers compare gave
    with pytest.raises(ValueError, match="run-level"):
        run_level_from_json('{"schema": "speculab.report/1"}')


def _report(load) -> RunLevelReport:
    return RunLevelReport("plain", "spec", "vllm bench serve", "vllm bench serve", None, None, 0.95, (load,), ())


def test_run_level_answers_are_the_deciding_median_and_each_runs_lost_requests():
    a = [_run(x, run=i) for i, x in enumerate((0.0300, 0.0302, 0.0298), 1)]
    b = [_run(x, run=i) for i, x in enumerate((0.0200, 0.0201, 0.0199), 1)]
    b[1] = RunSummary(b[1].path, b[1].tool, C4, b[1].aggregates, completed=15, failed=5, run=2)  # 25 % lost
    answers = run_level_answers(_report(compare_load(C4, a, b, {})), "tpot_s", max_error_rate=0.05)
    assert answers[0] == ("faster", "spec at concurrency 4")
    assert answers[1] == (
        "errors",
        ReportWarning(WarningKind.RUN_LOST_REQUESTS, fields={"side": "spec", "at": "concurrency 4", "lost": 0.25}),
    )
    assert len(answers) == 2  # the baseline lost nothing
    # under a looser gate the lost requests pass; a figure the files do not hold (TTFT) has no verdict
    assert run_level_answers(_report(compare_load(C4, a, b, {})), "ttft_s", max_error_rate=0.5) == (
        ("no-verdict", "spec at concurrency 4"),
    )
    one = compare_load(C4, a[:1], b[:1], {})  # one run a side: no interval
    assert run_level_answers(_report(one), "tpot_s", 0.05)[0][0] == "no-verdict"


def test_the_error_gate_reads_each_runs_own_counts():
    """Issue 51: a run whose file says every request failed fails the gate (the command exits 4 with this record); a
    run whose file states no failed count (SGLang's) cannot fail it."""
    from speculab.harness.verdict.run_level import run_level_error_gate

    a = [_run(0.030)]
    dead = RunSummary(Path("dead.json"), "vllm bench serve", C4, Aggregates({}), completed=0, failed=640)
    why = run_level_error_gate(_report(compare_load(C4, a, [dead], {})), 0.02)
    assert why is not None and why.kind is WarningKind.ERROR_GATE
    assert (why.subject, why.load) == ("spec", "concurrency 4")
    assert why.fields == {"failed": 640, "counted": 640, "error_rate": 1.0, "by_category": {}, "max_error_rate": 0.02}
    assert run_level_error_gate(_report(compare_load(C4, a, [dead], {})), 1.0) is None
    unstated = RunSummary(Path("s.jsonl"), "sglang bench_serving", C4, Aggregates({}), completed=0, failed=None)
    assert run_level_error_gate(_report(compare_load(C4, a, [unstated], {})), 0.02) is None


def test_the_acceptance_a_file_states_is_on_its_arm_and_reads_back(tmp_path: Path):
    """#51: the acceptance a file states is on the arm in summary.json (`levels[].arms[].acceptance`, each with its
    run), not only in the side's note; an arm whose files state none has no such key; `speculab report` reads it
    back."""
    from speculab.harness.imports.summaries.summary import LENGTH, PER_REQUEST_MEAN, POOLED, RATE, StatedAcceptance
    from speculab.harness.results.summary_file import write_summary_file
    from speculab.harness.verdict.run_level import run_level_from_json

    length = StatedAcceptance(LENGTH, 2.83, PER_REQUEST_MEAN, "decoding_stats.acceptance_length_percentiles.average")
    rate = StatedAcceptance(RATE, 0.687, POOLED, "spec_decode_acceptance_rate")
    a = [_run(0.03)]
    b = [replace(_run(0.02), acceptance=(length, rate))]
    report = RunLevelReport("a", "b", "t", "t", None, None, 0.95, (compare_load(C4, a, b, {}),), ())
    plain, spec = report.to_dict()["levels"][0]["arms"]
    assert "acceptance" not in plain
    assert spec["acceptance"] == [
        {"kind": "length", "value": 2.83, "weighting": "per_request_mean", "run": 1}
        | {"source": "decoding_stats.acceptance_length_percentiles.average"},
        {"kind": "rate", "value": 0.687, "weighting": "pooled", "source": "spec_decode_acceptance_rate", "run": 1},
    ]
    back = run_level_from_json(write_summary_file(tmp_path, report.to_dict(), indent=1).read_text(encoding="utf-8"))
    assert back == report and back.loads[0].acceptance_b == ((1, length), (1, rate))
