"""The harness: replays one workload against the arms of an OpenAI-compatible endpoint and records what it saw.

Data flows top to bottom: workload -> load -> client -> records/results -> analysis -> verdict (the A/B report model,
every number and decision); servers are the engines under test. It holds the stages only: the commands stand on it
(`speculab.commands`) and the mock beside the engine (`speculab.mock`). It never imports torch, the engine, the mock,
a command or the report package: the report presents the verdict model and what the harness wrote; the harness never
renders.
"""
