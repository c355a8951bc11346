"""Any other OpenAI-compatible server: speculab cannot derive its candidate, so the experiment file gives
`candidate.command`, and the single change cannot be verified (the report says so)."""

from __future__ import annotations

from speculab.harness.servers.adapters.base import EngineAdapter

# Every default: no metrics, no speculation flags, no launch command, a candidate refused (the file gives it).
ADAPTER = EngineAdapter(kind="other", executable="other")
