"""The servers under test: one adapter per engine, acceptance, /metrics scraping, launched processes, memory.

It knows nothing about workloads or reports.
"""
