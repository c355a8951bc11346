"""The harness: replays one workload against the arms of an OpenAI-compatible endpoint and records what it saw.

Data flows top to bottom: workload -> load -> client -> records/results -> analysis -> verdict (the A/B report model,
every number and decision); servers, the commands (measure, experiment, diagnose) and the mock sit on top. It never
imports torch, the engine, or the report package: the report presents the verdict model and what the harness wrote;
the harness never renders.
"""
