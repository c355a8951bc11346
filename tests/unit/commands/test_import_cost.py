"""What the commands that offer load import before they send a request: not scipy.stats (~0.5 s) nor matplotlib
(~0.6 s), which only a verdict's tests and a report's figures need. Every `speculab bench` or `diagnose` run, and every
mock a test starts, would pay for them; the verdict's own import of scipy.stats came back once when it moved."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("scipy.stats", "matplotlib")


@pytest.mark.parametrize(
    "module",
    ["speculab.commands.bench.command", "speculab.commands.diagnose.command", "speculab.mock.server", "speculab.cli"],
)
def test_a_command_that_offers_load_imports_no_statistics_or_plotting_library(module: str) -> None:
    code = f"import json, sys, {module}; print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == [], f"{module} imports {done.stdout.strip()} at start"


def test_the_report_draws_its_figures_without_pyplot() -> None:
    """report/html/plots.py builds each Figure on the Agg canvas itself: pyplot's import (~0.2 s) and its global
    figure manager are not needed to draw an SVG, and every `run`, `compare` and `report` would pay for them."""
    code = (
        "import json, sys; from speculab.report.html import plots;"
        "svg = plots.acceptance_bars({'ngram-k4': [0.8, 0.6, 0.4]});"
        "print(json.dumps(['matplotlib.pyplot' in sys.modules, svg.startswith('<svg')]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == [False, True], done.stderr
