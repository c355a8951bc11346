"""Names shortened to fit a terminal table or a legend: within the width, apart from each other, what differs kept."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from speculab.report.console.fit import FittedTable
from speculab.report.names import ELLIPSIS, shorten, shorten_apart

FILES = [
    "Qwen3-4B-Instruct-2507_vllm-0.10.1_plain_concurrency-1-4-16.json",
    "Qwen3-4B-Instruct-2507_vllm-0.10.1_ngram-k4_concurrency-1-4-16.json",
    "Qwen3-4B-Instruct-2507_vllm-0.10.1_draft_model-k4_concurrency-1-4-16.json",
]


def test_a_name_that_fits_is_left_alone():
    assert shorten("ngram k=4", 9) == "ngram k=4"
    assert shorten_apart(["plain", "ngram k=4"], 9) == {"plain": "plain", "ngram k=4": "ngram k=4"}


def test_shortened_names_fit_their_width_keep_their_ends_and_stay_apart():
    for width in range(20, 80):
        short = shorten_apart(FILES, width)
        assert all(len(s) <= width for s in short.values()), (width, short)
        assert len(set(short.values())) == len(FILES), (width, short)  # still tells the arms apart
        for name, s in short.items():
            core = name.split("vllm-0.10.1_")[1].split("_concurrency")[0]
            assert core in s and s[0] == name[0], (width, s)  # what differs kept whole, the start shown
            assert s == name or ELLIPSIS in s


def test_too_narrow_for_what_differs_falls_back_to_the_middle_cut():
    assert shorten("abcdefghij", 5) == "ab…ij" and len(shorten(FILES[0], 8)) == 8
    assert all(len(s) <= 10 for s in shorten_apart(FILES, 10).values())


def test_a_fitted_table_keeps_its_numbers_and_shortens_its_names():
    def build(short):
        t = Table()
        t.add_column("arm", no_wrap=True)
        t.add_column("TPOT", no_wrap=True, justify="right")
        for i, name in enumerate(FILES):
            t.add_row(short(name), f"{10.25 + i:.2f}")
        return t

    for width in (40, 60, 200):
        console = Console(width=width, record=True, force_terminal=False)
        console.print(FittedTable(build, FILES, "title"))
        text = console.export_text()
        assert all(f"{10.25 + i:.2f}" in text for i in range(len(FILES))), text
        assert all(len(ln) <= width for ln in text.splitlines()), text
        assert (ELLIPSIS in text) == (width < 200), text  # shortened only when it would not fit
