"""HTML (self-contained, escaped), console verdict, inputs on disk, and `speculab report DIR`."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.cli import main
from speculab.harness.design import LevelSpec
from speculab.harness.results.ab_dir import RUN_FILE, load_inputs, repeat_dir, save_inputs
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import Report, ReportOptions
from speculab.report.console.ab import ab_renderable
from speculab.report.html.page import render_html
from speculab.report.phrases import verdict_line, warning_text

FAST = ReportOptions(n_resamples=400)
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def evil_report() -> Report:
    """A candidate whose output contains markup, diverging confidently at temperature 0 (so it is shown)."""
    base = ArmEffect(logprobs=True, tie_at={1: (2, 3.0)})
    cand = ArmEffect(tpot_factor={"c1": 0.5}, acceptance_length=2.5, logprobs=True, diverge={1: (2, 3.0)})
    inputs = make_inputs(n_prompts=12, repeats=1, baseline=base, candidates={"ngram-k4": cand})
    runs = []
    for run in inputs.runs:
        if run.arm == "ngram-k4":
            recs = tuple(
                replace(r, output_text=r.output_text.replace(" DIFFERENT", EVIL)) if r.index == 1 else r
                for r in run.records
            )
            run = replace(run, records=recs)
        runs.append(run)
    return build_report(inputs.with_runs(runs), FAST)


@pytest.fixture(scope="module")
def html(evil_report: Report) -> str:
    return render_html(evil_report)


def test_model_output_is_escaped(html: str):
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html  # shown, as text


def test_html_is_self_contained(html: str):
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "@import" not in html and "<link" not in html and "<script" not in html.lower()
    assert html.count("<svg") >= 6  # CDFs, histograms, memory, curves, acceptance, cost


def test_html_sections_and_units(html: str, evil_report: Report):
    for section in ("verdict", "setup", "loads", "per-load", "acceptance", "correctness", "cost", "whatif", "methods"):
        assert f'id="{section}"' in html
    assert 'id="diagnosis"' not in html  # only when a diagnosis is present
    assert verdict_line(evil_report, evil_report.candidates[0]).split(";")[0].replace('"', "&#34;") in html
    assert " ms / " in html and "tok/s" in html and "vllm:spec_decode_* counters" in html and "confident" in html


def test_diagnosis_slot_renders_when_present():

    small = build_report(make_inputs(n_prompts=6, repeats=1, levels=(LevelSpec("concurrency", 1, ("low",)),)), FAST)
    diag = {"findings": [{"finding": "decode dominates", "next": "evaluate speculation"}], "decode_share": 0.8}
    html = render_html(replace(small, diagnosis=diag))
    assert 'id="diagnosis"' in html and "decode dominates" in html and "decode_share" in html


def test_console_verdict_first_then_tables_then_warnings(evil_report: Report):
    console = Console(width=200, record=True, color_system=None)
    console.print(ab_renderable(evil_report, Path("/out")))
    text = console.export_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # the recommendation block right after the heading (what to ship), then the verdict (its evidence)
    assert lines[1].startswith("recommendation: ship ngram k=4")
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("  rule: ")) + 1
    assert lines[rule].startswith("  floors: ")  # what a time guardrail's breach must also be to count
    # with SLOs set, each arm's highest load within them first, one line per arm (report.slo_capacity)
    assert lines[rule + 1].startswith("highest load within the SLO (")
    assert [ln.split(":")[0] for ln in lines[rule + 2 : rule + 4]] == ["  plain", "  ngram k=4"]
    assert re.match(r"ngram k=4: TPOT 1\.9\d× faster \[", lines[rule + 4])
    assert "concurrency 1 · p50 and p99 · TPOT, TTFT in ms" in text and "speedup" in text
    assert text.index("ngram k=4: TPOT") < text.index("p50 and p99 · TPOT, TTFT in ms") < text.index("warning:")
    assert "correctness: SUSPICIOUS: 1 confident divergence(s)" in " ".join(text.split())  # wherever the line wraps
    assert "/out/report.html" in text


def test_console_bench_table_still_works():
    from speculab.report.console.bench import bench_table

    summary = {"metrics": {"ttft_s": {"n": 3, "mean": 0.1, "p50": 0.1, "p90": 0.1, "p99": 0.1, "max": 0.1}}}
    console = Console(width=120, record=True, color_system=None)
    console.print(bench_table(summary))
    assert "100.0" in console.export_text()


def test_inputs_round_trip_on_disk_and_partial_repeat(tmp_path: Path):
    inputs = make_inputs(n_prompts=8, repeats=2)
    save_inputs(tmp_path, inputs)
    back = load_inputs(tmp_path)
    assert back.setup == inputs.setup and back.arms == inputs.arms and back.changes == inputs.changes
    assert sorted((r.arm, r.level, r.repeat) for r in back.runs) == sorted(
        (r.arm, r.level, r.repeat) for r in inputs.runs
    )
    orig = {(r.arm, r.level, r.repeat): r for r in inputs.runs}
    for r in back.runs:
        assert r == orig[(r.arm, r.level, r.repeat)]
    # a crash: one repeat lost its run.json and the torn last line of its requests.jsonl
    d = repeat_dir(tmp_path, "ngram-k4", "c16", 2)
    (d / RUN_FILE).unlink()
    req = d / "requests.jsonl"
    req.write_text(req.read_text()[:-40])
    partial = load_inputs(tmp_path)
    run = next(r for r in partial.runs if (r.arm, r.level, r.repeat) == ("ngram-k4", "c16", 2))
    assert run.interrupted and run.acceptance is None and len(run.records) == 7
    report = build_report(partial, FAST)
    assert any("interrupted" in warning_text(m) for m in report.missing)


def test_cli_report_rerenders_a_saved_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    inputs = make_inputs(n_prompts=8, repeats=1, skip=(("ngram-k4", "c16"),))
    save_inputs(tmp_path, inputs)
    with pytest.raises(SystemExit) as e:
        main(["report", str(tmp_path)])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "ngram k=4: TPOT" in out and "missing:" in out and "no runs" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["schema"] == "speculab.report.summary/2"
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert Report.from_json((tmp_path / "summary.json").read_text()).missing


def test_cli_report_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    for arg in (tmp_path / "nope", tmp_path):
        with pytest.raises(SystemExit) as e:
            main(["report", str(arg)])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    (tmp_path / "inputs.json").write_text("{}")
    with pytest.raises(SystemExit):
        main(["report", str(tmp_path)])
    assert "unreadable" in capsys.readouterr().err


def test_partial_run_renders_with_missing_rows():

    levels = (LevelSpec("concurrency", 1, ("low",)), LevelSpec("concurrency", 4, ("operating",)))
    r = build_report(make_inputs(n_prompts=8, repeats=1, levels=levels, skip=(("ngram-k4", "c4"),), slo=False), FAST)
    html = render_html(r)
    assert "not run" in html and "missing: ngram k=4 at concurrency 4: no runs" in html
    assert "No capacity plan" in html


@pytest.mark.parametrize("skip_candidate", [False, True])
def test_single_level_and_baseline_only_runs_render(skip_candidate: bool):

    level = (LevelSpec("rate", 4, ("low", "operating")),)
    skip = (("ngram-k4", "r4"),) if skip_candidate else ()
    r = build_report(make_inputs(n_prompts=8, repeats=1, levels=level, skip=skip, slo=False), FAST)
    html = render_html(r)
    assert "No crossover" in html and html.count("<svg") >= 2
    if skip_candidate:
        # an arm that never ran gets no reason but that (issue 36), not "no verdict" nor "acceptance unknown"
        assert verdict_line(r, r.candidates[0]) == "ngram k=4: not run"
        assert "nothing to compare" in html


def test_plots_with_nothing_labelled_print_no_warnings():
    """A memory plot without KV gauges, or histograms without token counts, must not make matplotlib warn into the
    user's terminal ("No artists with labels found to put in legend", issue 17)."""
    import warnings

    from speculab.report.html import plots

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svg = plots.memory_over_time({"baseline": ([0.0, 1.0], [1e9, 1.1e9], [None, None])}, "RSS")
        svg += plots.histograms({"baseline": [10.0, 12.0]}, {})
    assert "<svg" in svg and [str(w.message) for w in caught] == []


def test_the_memory_figure_is_drawn_only_where_a_reading_exists():
    """Samples with every reading missing (a URL whose process is out of sight, no KV gauge: the mock, two-URL runs)
    draw no memory figure: it was two empty panels. One arm's RSS is enough for the figure."""
    from speculab.harness.records import MemorySample

    inputs = make_inputs(n_prompts=8, repeats=1)

    def memory(rss: bool):
        return inputs.with_runs(
            [
                replace(r, memory=tuple(MemorySample(m.t_s, rss_bytes=1e9 if rss else None) for m in r.memory))
                for r in inputs.runs
            ]
        )

    assert all(r.memory for r in inputs.runs)  # every run has its samples' times
    blank = render_html(build_report(memory(rss=False), FAST))
    read = render_html(build_report(memory(rss=True), FAST))
    assert ", memory" not in blank and "KV cache usage" not in blank
    assert read.count(", memory") == len(inputs.setup.levels) == read.count("RSS (GB)") > 0


def test_recommendation_block_comes_first_with_the_pareto_picture_and_the_flags(tmp_path: Path):
    from speculab.report.html.page import write_html
    from speculab.report.phrases import recommendation_lines

    # without guardrails the fake's 12 prompts ship n-gram at concurrency 1 (the rest is undecided)
    report = build_report(make_inputs(n_prompts=12, repeats=2), replace(FAST, guardrails=()))
    out = tmp_path / "run"
    page = write_html(out, report).read_text(encoding="utf-8")
    block = page[page.index('id="recommendation"') : page.index('id="verdict"')]
    assert page.index('id="recommendation"') < page.index('id="verdict"')  # the first block
    head = recommendation_lines(report)[0].removeprefix("recommendation: ")
    assert head.replace('"', "&#34;") in block
    assert "The config to ship" not in block  # no flags file yet
    # the Pareto picture is with the curves across loads (the verdict stays on the first screen), linked from here
    assert 'href="#pareto"' in block and "<svg" not in block
    loads = page[page.index('id="loads"') : page.index('id="per-load"')]
    pareto = loads[loads.index('id="pareto"') :]
    assert "<svg" in pareto and "per-user speed" in pareto and "tok/s per GPU" in pareto
    assert "recommended at this load" in pareto
    (out / "recommended-flags.txt").write_text('--speculative-config \'{"method":"ngram"}\'\n', encoding="utf-8")
    page = write_html(out, report).read_text(encoding="utf-8")
    assert "The config to ship" in page and "--speculative-config" in page
    # a report from before the recommendation existed has no block (and no link to one)
    old = render_html(replace(report, recommendation=None))
    assert 'id="recommendation"' not in old and 'href="#recommendation"' not in old


def test_the_config_to_ship_is_the_models_written_beside_summary_json_by_its_exporter(tmp_path: Path):
    """`speculab run` renders once: the page shows the model's flags (no file read) and the exporter writes both
    files from it, as they were spelt."""
    from speculab.harness.verdict.model import ShippedConfig
    from speculab.report.html.page import write_html
    from speculab.report.shipped import write_shipped
    from speculab.report.summary import write_summary

    flags = '# speculab · form: single · add to the baseline command:\n--speculative-config \'{"method":"ngram"}\'\n'
    shipped = ShippedConfig("speculab", "", "single", ("--speculative-config", '{"method":"ngram"}'), flags, "a: 1\n")
    report = replace(build_report(make_inputs(n_prompts=12, repeats=2), FAST), shipped=shipped)
    out = tmp_path / "run"
    (out / "recommended-flags.txt").parent.mkdir(parents=True)
    (out / "recommended-flags.txt").write_text("stale: a file from before\n", encoding="utf-8")  # not read
    page = write_html(out, report).read_text(encoding="utf-8")
    assert "The config to ship" in page and "--speculative-config" in page and "stale" not in page
    write_shipped(out, report)
    assert (out / "recommended-flags.txt").read_text(encoding="utf-8") == flags
    assert (out / "recommended.yaml").read_text(encoding="utf-8") == "a: 1\n"
    assert Report.from_json(write_summary(out, report).read_text(encoding="utf-8")).shipped == shipped
    assert write_shipped(tmp_path / "none", replace(report, shipped=None)) is None
