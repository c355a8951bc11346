"""The terminal: bench summaries, the A/B verdict and tables, run progress and the diagnosis, with rich.

It formats results (through `speculab.report.formatting`) and computes nothing; text from servers is escaped.
"""
