"""A plot's legend with arms named by long result files: shortened so it stays inside the plot, the arms apart."""

from __future__ import annotations

from speculab.report.html import plots
from speculab.report.names import shorten_apart

NAMES = [
    "Qwen3-4B-Instruct-2507_vllm-0.10.1_ngram-k4_concurrency-1-4-16.json",
    "Qwen3-4B-Instruct-2507_vllm-0.10.1_draft_model-k4_concurrency-1-4-16.json",
]


def test_long_arm_names_are_shortened_in_the_legend():
    svg = plots.acceptance_bars({n: [0.8, 0.6, 0.4] for n in NAMES})
    short = shorten_apart(NAMES, plots.LEGEND_NAME)
    for name in NAMES:
        assert f">{name}</text>" not in svg  # the plots keep text as text (svg.fonttype none)
        assert f">{short[name]}</text>" in svg and len(short[name]) <= plots.LEGEND_NAME
    assert len(set(short.values())) == len(NAMES)


def test_short_names_are_left_as_they_are():
    svg = plots.acceptance_bars({"ngram k=4": [0.8], "draft k=4": [0.5]})
    assert ">ngram k=4</text>" in svg and ">draft k=4</text>" in svg
