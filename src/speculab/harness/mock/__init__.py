"""`speculab mock-server`: a scripted OpenAI-compatible server with known timings, counters and faults.

It shares only the wire format (`speculab.protocol`) with the rest of the harness.
"""
