"""The report: the verdict (`speculab.harness.verdict`) shown in the terminal, as report.html and as summary.json.

Presentation only: it formats numbers and makes sentences (`phrases`); it never decides. It reads the verdict model
and what the results package saved; nothing in the harness imports it.
"""
