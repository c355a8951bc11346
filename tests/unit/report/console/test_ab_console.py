"""The A/B verdict in an 80-column terminal: arm names on one line, no header cut, failed requests still shown."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from tests.fakes.ab_inputs import ArmEffect, make_inputs

from speculab.harness.design import LevelSpec
from speculab.harness.records import ErrorCategory, ErrorInfo
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.model import ReportOptions
from speculab.report.console.ab import ab_renderable
from speculab.report.console.bench import ms_cell
from speculab.report.formatting import num, speedup, speedup_range
from speculab.report.html.page import render_html
from speculab.report.phrases import warning_lines


def _render(width: int, *, failing: bool) -> str:
    cands = {"ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}), "draft_model-k4": ArmEffect(tpot_factor={"c1": 0.8})}
    inputs = make_inputs(n_prompts=12, repeats=1, candidates=cands)
    if failing:
        dead = ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500)
        runs = tuple(
            replace(r, records=tuple(x if x.index % 3 else replace(x, error=dead) for x in r.records))
            if r.arm == "draft_model-k4"
            else r
            for r in inputs.runs
        )
        inputs = inputs.with_runs(runs)
    console = Console(width=width, record=True, force_terminal=False)
    console.print(ab_renderable(build_report(inputs, ReportOptions(n_resamples=200))))
    return console.export_text()


def test_the_tables_fit_80_columns_without_wrapping_or_cutting():
    """Issue 17: at 80 columns arm names wrapped ("ngram" / "k=4") and headers were cut ("acc.l…")."""
    for failing in (False, True):
        text = _render(80, failing=failing)
        arms = ("plain ", "ngram k=4 ", "draft_model k=4 ")
        # per load: the latency table's header and 3 arms, the verdict table's header and 2 candidates
        rows = [ln for ln in text.splitlines() if ln.startswith(("arm ", "candidate ", *arms))]
        assert len(rows) == 3 * (4 + 3), text  # at each of the 3 loads: nothing wrapped
        assert all(len(ln) <= 80 for ln in text.splitlines())
        assert "…" not in "\n".join(rows)
        assert all("acc.len" in ln for ln in rows if ln.startswith("candidate ")), text
    assert "failed requests: draft_model k=4 4 of 12" in _render(80, failing=True)


def _report(*, names: dict[str, str] | None = None):
    """Two candidates over one load; `names`: arm -> the label to show instead (a result file's name)."""
    cands = {"ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}), "draft_model-k4": ArmEffect(tpot_factor={"c1": 0.8})}
    report = build_report(make_inputs(n_prompts=12, repeats=1, candidates=cands), ReportOptions(n_resamples=200))
    if names:
        report = replace(
            report,
            arms=tuple(replace(a, label=names[a.name]) for a in report.arms),
            candidates=tuple(replace(c, label=names[c.name]) for c in report.candidates),
        )
    return report


def _cells(report, level) -> dict[str, list[str]]:
    """What each arm's row must show, formatted as the table formats it: p50 and p99 of TPOT, TTFT (ms), E2E (s),
    output tok/s; and each candidate's TPOT speedup with its interval."""
    out = {}
    for arm in report.arms:
        d = level.arm(arm.name).distributions
        want = [ms_cell(d[k].p50) for k in ("tpot_s", "ttft_s")] + [ms_cell(d[k].p99) for k in ("tpot_s", "ttft_s")]
        want += [num(d["e2e_s"].p50), num(d["e2e_s"].p99), num(level.arm(arm.name).output_tok_s.estimate, ",.1f")]
        comp = level.comparison(arm.name)
        if comp is not None:
            tp = comp.metric("tpot_s")
            want.append(f"{speedup(tp.speedup)} {speedup_range(tp.speedup_low, tp.speedup_high)}")
        out[arm.name] = want
    return out


def test_the_latency_table_shows_p50_and_p99():
    """Issue 36 item 8: the terminal showed p50 only, so a bimodal TPOT (two arms with the same median) looked
    alike; each latency metric now has its p99 beside its p50."""
    report = _report()
    console = Console(width=80, record=True, force_terminal=False)
    console.print(ab_renderable(report))
    text = console.export_text()
    assert "p50 and p99" in text
    for lv in report.levels:
        block = text.split(f"{lv.label} · p50 and p99")[1].split("\n\n")[0]
        rows = {a.name: next(ln for ln in block.splitlines() if ln.startswith(a.label + " ")) for a in report.arms}
        for a in report.arms:
            d = lv.arm(a.name).distributions
            p50, p99 = ms_cell(d["tpot_s"].p50), ms_cell(d["tpot_s"].p99)
            assert rows[a.name].split()[-7:-5] == [p50, p99], (rows[a.name], p50, p99)


LONG = {
    "baseline": "Qwen3-4B-Instruct-2507_vllm-0.10.1_plain_concurrency-1-4-16.json",
    "ngram-k4": "Qwen3-4B-Instruct-2507_vllm-0.10.1_ngram-k4_concurrency-1-4-16.json",
    "draft_model-k4": "Qwen3-4B-Instruct-2507_vllm-0.10.1_draft_model-k4_concurrency-1-4-16.json",
}


def test_at_80_columns_long_arm_names_are_shortened_and_every_number_kept(monkeypatch):
    """Issue 37 item 9: arms named by their result files left every number cell of the 80-column table as "…". The
    names are shortened (what tells them apart kept), the numbers never. COLUMNS=80, the console the CLI prints to."""
    monkeypatch.setenv("COLUMNS", "80")
    report = _report(names=LONG)
    console = Console(soft_wrap=True, record=True, force_terminal=False)
    assert console.width == 80
    console.print(ab_renderable(report))
    text = console.export_text()
    lines = text.splitlines()
    # the tables' lines (prose is soft-wrapped by the terminal, as the CLI prints it)
    tables = [ln for ln in lines if ln.startswith(("Qwen", "arm ", "candidate ", "load ", "─")) and ": " not in ln]
    assert len(tables) >= 3 * 9 and all(len(ln) <= 80 for ln in tables), "\n".join(tables)
    for lv in report.levels:
        block = text.split(f"{lv.label} · p50 and p99")[1].split("\n\n")[0]
        for arm, cells in _cells(report, lv).items():
            # the row holding this arm's numbers: found by them, and named by the part of its name that differs
            core = {"baseline": "plain", "ngram-k4": "ngram", "draft_model-k4": "draft_model"}[arm]
            rows = [ln for ln in block.splitlines() if core in ln.split("  ")[0] and "…" in ln.split("  ")[0]]
            shown = " ".join(rows)
            assert all(c in shown for c in cells), (arm, cells, rows)
    table_rows = [ln for ln in tables if ln.startswith("Qwen")]
    assert table_rows and all("…" not in ln.split("  ", 1)[1] for ln in table_rows), table_rows  # no number cut


ONE_LOAD = (LevelSpec("concurrency", 1, ("low", "operating")),)


def _one_token(r, i: int):
    """Record `r` answering prompt i with a single token (TPOT undefined), and prompts from 4 on 200 tokens long."""
    rec = replace(r, prompt_tokens=200) if r.index >= 4 else r
    if r.index != i:
        return rec
    first = rec.chunks[0]
    return replace(rec, chunks=(replace(first, n_tokens=1),), completion_tokens=1)  # same end: the load holds


def test_fewer_tpot_pairs_than_e2e_pairs_say_why_and_breakdowns_say_they_are_exploratory():
    """Issue 24: the demo showed 21 TPOT pairs and 24 E2E pairs for 24 prompts without saying why, and a subset's
    interval beside the overall answer with no word on multiplicity."""
    cands = {"ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}), "draft_model-k4": ArmEffect(tpot_factor={"c1": 0.8})}
    inputs = make_inputs(n_prompts=12, repeats=1, candidates=cands, levels=ONE_LOAD)
    short = {0, 5, 9}
    runs = []
    for run in inputs.runs:
        recs = run.records
        for i in short:
            recs = tuple(_one_token(r, i) if r.index == i else r for r in recs)
        runs.append(replace(run, records=tuple(_one_token(r, -1) for r in recs)))
    report = build_report(inputs.with_runs(tuple(runs)), ReportOptions(n_resamples=200))
    comp = report.levels[0].comparisons[0]
    assert comp.single_token == 3 and comp.metric("tpot_s").n_pairs == 9 and comp.metric("e2e_s").n_pairs == 12
    console = Console(width=200, record=True, force_terminal=False)
    console.print(ab_renderable(report))
    text = console.export_text()
    # once per load (both candidates have the same counts), not once per candidate
    assert text.count("TPOT pairs 9 of 12: 3 answers were one token, and TPOT needs two") == 1, text
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if "breakdowns (exploratory:" in ln)
    assert "not adjusted for multiplicity" in lines[head] and "by prompt length" in lines[head + 1], text
    assert text.count("exploratory") == 1
    assert "TPOT pairs 9 of 12: 3 answers were one token, and TPOT needs two" in render_html(report)  # beside the pairs


def test_a_baseline_that_gates_every_candidate_is_one_warning_naming_them_all():
    """Issue 24: the same "no verdict" line, printed once per candidate under the table and again as a warning, with
    no candidate named."""
    cands = {"ngram-k4": ArmEffect(tpot_factor={"c1": 0.5}), "draft_model-k4": ArmEffect(tpot_factor={"c1": 0.8})}
    inputs = make_inputs(n_prompts=12, repeats=1, candidates=cands, levels=ONE_LOAD)
    dead = ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500)
    runs = tuple(
        replace(r, records=tuple(x if x.index % 3 else replace(x, error=dead) for x in r.records))
        if r.arm == "baseline"
        else r
        for r in inputs.runs
    )
    report = build_report(inputs.with_runs(runs), ReportOptions(n_resamples=200))
    gated = [w for w in warning_lines(report.warnings) if "no verdict" in w]
    assert len(gated) == 1 and gated[0].startswith("ngram k=4, draft_model k=4 at concurrency 1: no verdict"), gated
    console = Console(width=300, record=True, force_terminal=False)
    console.print(ab_renderable(report))
    text = console.export_text()
    why = gated[0].split("no verdict — ")[1]
    assert why.startswith("baseline") and " ".join(text.split()).count(" ".join(why.split())) == 1, text
