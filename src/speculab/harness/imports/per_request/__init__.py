"""Readers of the per-request files of tools whose every request keeps its own times (inference-perf's lifecycle
reports, GenAI-Perf's and perf_analyzer's profile export), with the stage summaries beside them where the tool writes
them; each claims a file by that tool's own marks, and knows nothing of compare's pairing, the verdict or the
report."""
