"""`speculab run`'s progress: one bar per arm and level in launch mode, one per level in two-URL mode."""

from __future__ import annotations

from rich.console import Console

from speculab.harness.load.runner import Progress
from speculab.report.console.run_progress import RunProgress


def _progress(finished: int) -> Progress:
    return Progress(finished, finished, 0, 1, 4, 0.0, None, False)


def test_two_url_blocks_fill_one_bar_per_level():
    """Two-URL mode used to print one bar per block: hundreds of lines for a 400-prompt level."""
    console = Console(record=True, width=100, force_terminal=False)
    rp = RunProgress(console)
    done = 0
    for _ in range(50):
        for arm in ("plain", "ngram k=4"):
            rp.level_start(arm, "concurrency 1", 1, 200, done=done)
            rp.progress(_progress(2))
            assert rp._bar is not None and rp._bar.tasks[0].completed == done + 2
            done += 2
    rp.level_end()
    text = console.export_text()
    assert text.count("concurrency 1 (repeat 1)") <= 2, text  # one bar (a final render), not 100
