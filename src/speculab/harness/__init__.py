"""The harness: replays one workload against the arms of an OpenAI-compatible endpoint and records what it saw.

Data flows top to bottom: workload -> load -> client -> records/results -> analysis; servers, the commands
(measure, experiment, diagnose) and the mock sit on top. It never imports torch, the engine, or the report package: the
report reads what the harness wrote; the harness never renders.
"""
