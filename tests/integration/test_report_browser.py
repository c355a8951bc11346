"""report.html in a real browser: headless Chromium (Debian's `chromium`, which .ci/run installs) lays the page out,
and the test reads what a user would see: the recommendation above the verdict lines, and those on the first screen
and not covered; every plot the report drew, with a non-zero size inside the page's width; and a load with no
script exception, console error or request beyond the file itself (the report is one self-contained file).

The page is a saved run re-rendered by this code (tests/unit/report/fixtures/ab_run_v1), and, when
SPECULAB_DEMO_DIR names a `speculab demo` output directory (.ci/run sets it to the demo it just ran), the demo too.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fakes.browser import Browser, find_chromium
from speculab.report.html.page import view
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
