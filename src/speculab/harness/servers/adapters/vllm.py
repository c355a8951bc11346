"""vLLM: `--speculative-config JSON` (method ngram | draft_model | eagle | eagle3 | mtp, num_speculative_tokens, ...).

Acceptance from Prometheus counters `vllm:spec_decode_*_total`, diffed around each load level. See docs/engines.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from speculab.config import SpeculationConfig
from speculab.harness.servers.adapters.base import AcceptanceMetrics, PrefixCacheMetrics, refuse_if_speculating


def counters(prefix: str) -> AcceptanceMetrics:
    return AcceptanceMetrics(
        kind="counters",
        drafts=f"{prefix}:spec_decode_num_drafts_total",
        draft_tokens=f"{prefix}:spec_decode_num_draft_tokens_total",
        accepted_tokens=f"{prefix}:spec_decode_num_accepted_tokens_total",
        accepted_per_position=f"{prefix}:spec_decode_num_accepted_tokens_per_pos_total",
    )


@dataclass(frozen=True, slots=True)
class VllmAdapter:
    kind: str = "vllm"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(default_factory=lambda: counters("vllm"))
    prefix_cache: PrefixCacheMetrics | None = field(
        default_factory=lambda: PrefixCacheMetrics("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
    )
    keep_alive: bool = True
    # --speculative-config today, and --per-request-spec-decode-metrics (0.32: each response carries its own
    # acceptance; vLLM refuses it without speculation, so only a candidate can carry it, via engine_args); the rest
    # are the pre-0.8 spellings, so an old baseline's speculation is caught.
    speculation_flags: frozenset[str] = frozenset(
        {
            "--speculative-config",
            "--per-request-spec-decode-metrics",
            "--speculative-model",
            "--num-speculative-tokens",
            "--ngram-prompt-lookup-max",
            "--ngram-prompt-lookup-min",
            "--speculative-draft-tensor-parallel-size",
            "--spec-decoding-acceptance-method",
        }
    )
    speculation_prefixes: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        return [*baseline_cmd, "--speculative-config", spec.speculative_config_json(), *spec.engine_args]
