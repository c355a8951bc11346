"""Text Generation Inference: `--speculate N` (n-gram speculation unless the model ships Medusa heads).

Acceptance: the Prometheus histogram `tgi_request_skipped_tokens` (speculated tokens accepted per request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from speculab.config import SpeculationConfig
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    PrefixCacheMetrics,
    refuse_if_speculating,
    unsupported,
)


@dataclass(frozen=True, slots=True)
class TgiAdapter:
    kind: str = "tgi"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(
        default_factory=lambda: AcceptanceMetrics(kind="histogram", accepted_tokens="tgi_request_skipped_tokens")
    )
    prefix_cache: PrefixCacheMetrics | None = None
    keep_alive: bool = True
    speculation_flags: frozenset[str] = frozenset({"--speculate"})
    speculation_prefixes: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        if spec.method != "ngram":
            raise unsupported(self.kind, spec, "ngram (via --speculate)")
        return [*baseline_cmd, "--speculate", str(spec.num_speculative_tokens), *spec.engine_args]
