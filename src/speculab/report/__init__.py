"""The report: what the harness recorded, turned into numbers with intervals (`model`), then shown (`console`, `html`).

It reads results (`speculab.harness.results`) and the harness's pure analysis; it never sends a request, and nothing
in the harness imports it.
"""
