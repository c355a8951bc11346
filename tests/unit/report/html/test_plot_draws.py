"""A report figure is drawn once: `tight_layout` leaves a placeholder layout engine that would make savefig draw the
whole figure a second time without output first (a saved run's render: 2.01 s of CPU with that pass, 1.43 s
without), and the SVG is the same bytes without that pass. The same numbers drawn again in one process are not drawn
again (`plots.drawn_once`): the same bytes, from the first drawing."""

from __future__ import annotations

import threading

import pytest
from matplotlib.figure import Figure

from speculab.report.html import plots


def _figure() -> Figure:
    fig, ax = plots._subplots(figsize=(4.6, 2.9))
    ax.plot([1, 2, 4, 8], [3.0, 2.5, 2.0, 1.0], marker="o", label="ngram k=4")
    ax.set_xlabel("concurrency")
    ax.set_ylabel("TPOT (ms)")
    plots._legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def _counting_draws(fig: Figure) -> list[int]:
    draws = [0]
    draw = fig.draw

    def counted(renderer):
        draws[0] += 1
        return draw(renderer)

    fig.draw = counted  # type: ignore[method-assign]
    return draws


def test_a_laid_out_figure_is_drawn_once_when_saved():
    fig = _figure()
    draws = _counting_draws(fig)
    svg = plots.to_svg(fig)
    assert svg.startswith("<svg") and draws == [1]


def test_the_svg_is_the_bytes_the_extra_pass_would_have_drawn():
    fig = _figure()  # the placeholder engine kept: matplotlib's own path, two draws
    draws = _counting_draws(fig)
    assert fig.get_layout_engine() is not None
    fig.set_layout_engine = lambda *a, **k: None  # type: ignore[method-assign]
    twice = plots.to_svg(fig)
    assert draws == [2]
    assert plots.to_svg(_figure()) == twice


@pytest.fixture
def nothing_drawn(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(plots, "_DRAWN", type(plots._DRAWN)())


def _counted(calls: list[tuple]):
    @plots.drawn_once
    def figure(*args, **kwargs) -> str:
        calls.append((args, kwargs))
        return f"<svg>{len(calls)}</svg>"

    return figure


def test_the_same_numbers_are_drawn_once_and_other_numbers_again(nothing_drawn):
    calls: list[tuple] = []
    figure = _counted(calls)
    first = figure({"ngram-k4": [1.0, 2.0]}, xlabel="concurrency")
    assert figure({"ngram-k4": [1.0, 2.0]}, xlabel="concurrency") == first and len(calls) == 1
    assert figure({"ngram-k4": [1.0, 2.5]}, xlabel="concurrency") != first
    assert figure({"ngram-k4": [1.0, 2.0]}, xlabel="rate") != first
    assert figure({"ngram-k4": [1.0, -0.0]}, xlabel="concurrency") != figure(
        {"ngram-k4": [1.0, 0.0]}, xlabel="concurrency"
    )
    assert len(calls) == 5


def test_a_real_figure_drawn_again_is_the_first_drawings_bytes(nothing_drawn):
    loads, bands = [1.0, 4.0, 16.0], {"baseline": ([3.0, 3.5, 5.0], [2.9, 3.3, 4.6], [3.1, 3.7, 5.4])}
    first = plots.band_vs_load(loads, bands, xlabel="concurrency", ylabel="mean TPOT (ms)", log_x=False)
    assert len(plots._DRAWN) == 1
    assert plots.band_vs_load(loads, bands, xlabel="concurrency", ylabel="mean TPOT (ms)", log_x=False) is first
    plots._DRAWN.clear()
    assert plots.band_vs_load(loads, bands, xlabel="concurrency", ylabel="mean TPOT (ms)", log_x=False) == first


def test_only_the_latest_figures_are_kept_and_what_pickle_cannot_take_is_drawn_each_time(nothing_drawn):
    calls: list[tuple] = []
    figure = _counted(calls)
    for i in range(plots._DRAWN_MAX + 5):
        figure([float(i)])
    assert len(plots._DRAWN) == plots._DRAWN_MAX
    figure([float(plots._DRAWN_MAX + 4)])  # the newest is kept
    figure([0.0])  # the oldest was let go: drawn again
    assert len(calls) == plots._DRAWN_MAX + 6
    lock = threading.Lock()  # a lock does not pickle
    figure(lock), figure(lock)
    assert len(calls) == plots._DRAWN_MAX + 8 and len(plots._DRAWN) == plots._DRAWN_MAX
