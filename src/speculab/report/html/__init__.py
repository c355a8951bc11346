"""The HTML pages: the self-contained A/B report.html (autoescaped jinja2, inline SVG plots) and diagnosis.html.

It formats results (through `speculab.report.formatting`) and computes nothing; model output is escaped.
"""
