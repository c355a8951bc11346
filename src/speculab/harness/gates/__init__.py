"""The gates a finished result passes or fails, and what the user asked of its verdict: the margin and the deciding
metric (`--margin`, `--decide-on`), `--fail-on`'s answers (exit 5) and the error gate (exit 4).

Shared by the commands that decide (run, demo, compare) and by `speculab report`; a gate raises the exit's error only
after everything is written. It reads the verdict's answers; it never renders.
"""
