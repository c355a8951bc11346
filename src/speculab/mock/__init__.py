"""`speculab mock-server`: a scripted OpenAI-compatible server with known timings, counters and faults.

It stands beside the engine, outside the harness: it shares the wire format (`speculab.protocol`) with the
harness's client and the serving base (`speculab.serving`: connection bounds, pacing) with the engine.
"""
