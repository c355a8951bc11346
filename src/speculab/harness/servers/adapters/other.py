"""Any other OpenAI-compatible server: speculab cannot derive its candidate, so the experiment file gives
`candidate.command`, and the single change cannot be verified (the report says so)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters.base import AcceptanceMetrics, PrefixCacheMetrics


@dataclass(frozen=True, slots=True)
class OtherAdapter:
    kind: str = "other"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(default_factory=lambda: AcceptanceMetrics(kind="none"))
    prefix_cache: PrefixCacheMetrics | None = None
    keep_alive: bool = True
    speculation_flags: frozenset[str] = frozenset()
    speculation_prefixes: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        raise UserError("engine `other`: speculab cannot derive the candidate; give candidate.command in the file")
