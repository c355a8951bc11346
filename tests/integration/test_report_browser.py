"""report.html in a real browser: headless Chromium (Debian's `chromium`, which .ci/run installs) lays the page out,
and the test reads what a user would see: the recommendation above the verdict lines, and those on the first screen
and not covered; every plot the report drew, with a non-zero size inside the page's width once its fold is opened;
and a load with no script exception, console error or request beyond the file itself (the report is one self-contained
file). At 1,400 px, with every fold open, nothing scrolls sideways and no table row is a blank band (a row stretched
tall by one squeezed cell while the others stand empty: a note in a narrow column did that, 22,000 px of page).

The page is a saved run re-rendered by this code (tests/unit/report/fixtures/ab_run_v1), and, when
SPECULAB_DEMO_DIR names a `speculab demo` output directory (.ci/run sets it to the demo it just ran), the demo too.
The layout test adds the saved run with what made the demo's page hard to read: arms named by long file names and
a long note on every compared metric.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from fakes.browser import Browser, find_chromium
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.verdict.model import Report
from speculab.report.html.page import view, write_html
from speculab.report.render import render_run_dir

pytestmark = [pytest.mark.browser]

FIXTURE = Path(__file__).parents[1] / "unit" / "report" / "fixtures" / "ab_run_v1"
WIDTH, HEIGHT = 1280, 900

# What the page shows, measured after layout: each verdict box and each plot, with size, position and whether the
# browser draws it (visibility, display, opacity), and whether the verdict is the element a user would see at its
# centre (nothing laid over it).
_MEASURE = """(() => {
  const box = e => {
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    const drawn = s.visibility === 'visible' && s.display !== 'none' && Number(s.opacity) > 0;
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + Math.min(r.height / 2, 8));
    return {w: r.width, h: r.height, left: r.left, right: r.right, top: r.top + scrollY, drawn,
            on_top: hit !== null && e.contains(hit)};
  };
  return {
    verdicts: [...document.querySelectorAll('#verdict .verdict')].map(e => ({text: e.innerText, ...box(e)})),
    recommendation: [...document.querySelectorAll('#recommendation .verdict')]
      .map(e => ({text: e.innerText, ...box(e)})),
    plots: [...document.querySelectorAll('.plot svg')].map(box),
    page_width: document.documentElement.clientWidth,
    scroll_width: document.documentElement.scrollWidth,
  };
})()"""

# What a person opening every fold would see: what can be scrolled sideways (the page, or any element that
# clips its overflow), and the blank bands: a table row over ~6 lines tall in which most cells fill less than a third
# of its height.
_OPEN_FOLDS = "document.querySelectorAll('details').forEach(d => { d.open = true; }); true"
_LAYOUT = """(() => {
  const sideways = [...document.querySelectorAll('body, body *')]
    .filter(e => e.scrollWidth > e.clientWidth + 1 && !['visible', 'hidden', 'clip']
      .includes(getComputedStyle(e).overflowX))
    .map(e => `${e.tagName} ${e.scrollWidth} > ${e.clientWidth}: ${e.innerText.slice(0, 80)}`);
  const filled = c => { const r = document.createRange(); r.selectNodeContents(c);
                        return r.getBoundingClientRect().height; };
  const bands = [...document.querySelectorAll('tr')].filter(tr => {
    const h = tr.getBoundingClientRect().height, cells = [...tr.cells];
    return h > 100 && cells.filter(c => filled(c) < h / 3).length * 2 > cells.length;
  }).map(tr => `${Math.round(tr.getBoundingClientRect().height)} px: ` +
               tr.innerText.replace(/\\s+/g, ' ').slice(0, 80));
  return {sideways, bands, page_width: document.documentElement.clientWidth,
          scroll_width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight};
})()"""


@pytest.fixture(scope="module")
def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        pytest.skip("no headless browser: `apt-get install -y chromium` (Debian's package; .ci/run installs it)")
    return exe


def _sources() -> list[Path]:
    demo = os.environ.get("SPECULAB_DEMO_DIR")
    return [FIXTURE, *([Path(demo)] if demo else [])]


@pytest.mark.parametrize("source", _sources(), ids=lambda p: p.name)
@pytest.mark.slow
def test_the_report_renders_in_chromium_with_its_verdict_and_every_plot_visible(
    chromium: str, source: Path, tmp_path: Path
):
    run = tmp_path / "run"
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("summary.json", "report.html", "logs"))
    report = render_run_dir(run)
    expected = view(report)
    want_verdicts = [*expected["best_lines"], *expected["verdicts"]]
    plots = [*expected["curves"].values(), *(p for lv in expected["levels"] for p in lv["plots"].values())]
    n_plots = sum(1 for p in plots if p)
    assert want_verdicts and n_plots, "the fixture should give a verdict and plots"

    with Browser(chromium, width=WIDTH, height=HEIGHT) as page:
        page.load(run / "report.html")
        seen = page.evaluate(_MEASURE)
        problems = page.problems
        page.evaluate(_OPEN_FOLDS)  # the detail is folded below the answer: a person opens it to see the plots
        seen["plots"] = page.evaluate(_MEASURE)["plots"]

    assert not problems.exceptions, problems.exceptions
    assert not problems.console_errors, problems.console_errors
    assert not problems.requests and not problems.failed, (problems.requests, problems.failed)

    texts = [" ".join(v["text"].split()) for v in seen["verdicts"]]
    assert texts == [" ".join(t.split()) for t in want_verdicts]
    for v in seen["verdicts"]:
        assert v["drawn"] and v["w"] > 0 and v["h"] > 0, v
    # the recommendation (what to ship) comes first, and the verdict it rests on is still on the first screen
    if expected["recommendation"] is not None:
        (rec,) = seen["recommendation"]
        assert " ".join(rec["text"].split()) == " ".join(expected["recommendation"]["headline"].split())
        assert rec["drawn"] and rec["on_top"] and rec["top"] < seen["verdicts"][0]["top"], rec
    first = seen["verdicts"][0]
    assert first["top"] + first["h"] <= HEIGHT and first["on_top"], f"the verdict is not on the first screen: {first}"

    assert len(seen["plots"]) == n_plots, (len(seen["plots"]), n_plots)
    for p in seen["plots"]:
        assert p["drawn"] and p["w"] > 50 and p["h"] > 50, p
        assert p["left"] >= 0 and p["right"] <= seen["page_width"] + 1, p
    assert seen["scroll_width"] <= seen["page_width"], "the page scrolls sideways"


LAYOUT_WIDTH = 1400


def _hard_to_lay_out(report: Report) -> Report:
    """The report as the demo and real files made it: every compared metric with a long note (the demo's "not enough
    paired data" reason), arms named by long file names."""
    note = ReportWarning.from_text(  # a metric's note is a record; an older file's sentence reads back as this one
        "only 2 groups of 4 prompts sent together (7 pairs); need at least 6 groups: use at least 24 prompts at this "
        "load; TPOT pairs 7 of 8: 1 answer was one token, and TPOT needs two"
    )
    names = {a.name: f"Qwen3-4B-Instruct-2507_vllm-0.10.1_{a.name}_concurrency-1-2-4.json" for a in report.arms}
    levels = tuple(
        replace(lv, comparisons=tuple(replace(c, metrics=tuple(replace(m, note=note) for m in c.metrics))
                                      for c in lv.comparisons))
        for lv in report.levels
    )  # fmt: skip
    return replace(
        report,
        arms=tuple(replace(a, label=names[a.name]) for a in report.arms),
        candidates=tuple(replace(c, label=names[c.name]) for c in report.candidates),
        levels=levels,
    )


@pytest.mark.parametrize("hard", [False, True], ids=["as saved", "long names and notes"])
@pytest.mark.parametrize("source", _sources(), ids=lambda p: p.name)
def test_at_1400_px_nothing_scrolls_sideways_and_no_row_is_a_blank_band(
    chromium: str, source: Path, hard: bool, tmp_path: Path
):
    """Issue 36 item 9: the demo's page was 22,200 px tall, its comparison tables scrolled sideways, and a note
    squeezed into the last column stretched each row into a band of empty cells."""
    run = tmp_path / "run"
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("summary.json", "report.html", "logs"))
    report = render_run_dir(run)
    if hard:
        write_html(run, _hard_to_lay_out(report))
    with Browser(chromium, width=LAYOUT_WIDTH, height=HEIGHT) as page:
        page.load(run / "report.html")
        folded = page.evaluate(_LAYOUT)
        page.evaluate(_OPEN_FOLDS)
        opened = page.evaluate(_LAYOUT)
    for seen in (folded, opened):
        assert seen["scroll_width"] <= seen["page_width"], "the page scrolls sideways"
        assert not seen["sideways"], "\n".join(seen["sideways"])
        assert not seen["bands"], "\n".join(seen["bands"])
    # the detail is folded: opening it adds to the page, and the page a person first sees is the shorter one
    assert folded["height"] < opened["height"], (folded["height"], opened["height"])
