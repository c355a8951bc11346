"""speculab's own engine: the same `--speculative-config` JSON and counter semantics as vLLM, prefix `speculab:`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from speculab.config import SpeculationConfig
from speculab.harness.servers.adapters.base import AcceptanceMetrics, PrefixCacheMetrics, refuse_if_speculating
from speculab.harness.servers.adapters.vllm import counters


@dataclass(frozen=True, slots=True)
class SpeculabAdapter:
    kind: str = "speculab"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(default_factory=lambda: counters("speculab"))
    prefix_cache: PrefixCacheMetrics | None = None
    keep_alive: bool = True
    speculation_flags: frozenset[str] = frozenset({"--speculative-config"})
    speculation_prefixes: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        return [*baseline_cmd, "--speculative-config", spec.speculative_config_json(), *spec.engine_args]
