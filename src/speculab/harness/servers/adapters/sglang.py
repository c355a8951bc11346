"""SGLang: `--speculative-algorithm NGRAM | STANDALONE | EAGLE | EAGLE3` and its `--speculative-*` companions.

Acceptance: gauges `sglang:spec_accept_length` / `sglang:spec_accept_rate` (a recent-window average, not a counter),
and per response `meta_info.spec_verify_ct` (verification steps): acceptance length = completion_tokens / steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from speculab.config import KNOWN_METHODS, SpeculationConfig
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    PrefixCacheMetrics,
    refuse_if_speculating,
    unsupported,
)

_TREE_ALGOS = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3"}


@dataclass(frozen=True, slots=True)
class SglangAdapter:
    kind: str = "sglang"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(
        default_factory=lambda: AcceptanceMetrics(
            kind="gauges",
            accept_length_gauge="sglang:spec_accept_length",
            accept_rate_gauge="sglang:spec_accept_rate",
            response_fields={"verify_steps": "meta_info.spec_verify_ct", "tokens": "meta_info.completion_tokens"},
        )
    )
    # cached prompt tokens / all prompt tokens (names from SGLang's metrics tests; not seen from a server here)
    prefix_cache: PrefixCacheMetrics | None = field(
        default_factory=lambda: PrefixCacheMetrics("sglang:cached_tokens_total", "sglang:prompt_tokens_total")
    )
    keep_alive: bool = True
    speculation_flags: frozenset[str] = frozenset({"--speculative-algo"})  # short alias seen in older scripts
    speculation_prefixes: tuple[str, ...] = ("--speculative-",)
    aliases: dict[str, str] = field(default_factory=dict)

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        k = spec.num_speculative_tokens
        if spec.method == "ngram":
            extra = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(k)]
            if spec.prompt_lookup_max is not None:
                extra += ["--speculative-ngram-max-match-window-size", str(spec.prompt_lookup_max)]
            if spec.prompt_lookup_min is not None:
                extra += ["--speculative-ngram-min-match-window-size", str(spec.prompt_lookup_min)]
        elif spec.method in _TREE_ALGOS or spec.method not in KNOWN_METHODS:
            # A chain (topk 1) of k draft steps; SGLang counts the verified positions including the root: k + 1. A
            # name of SGLang's own (`NEXTN`, checked against its --speculative-algorithm choices at plan time)
            # drafts the same way, with a draft path only when one is given.
            algo = _TREE_ALGOS.get(spec.method, spec.method)
            path = (
                ["--speculative-draft-model-path", str(spec.model)] if spec.model or spec.method in _TREE_ALGOS else []
            )
            extra = [
                "--speculative-algorithm", algo, *path,
                "--speculative-num-steps", str(k),
                "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", str(k + 1),
            ]  # fmt: skip
        else:
            raise unsupported(self.kind, spec, "ngram, draft_model, eagle, eagle3, or a --speculative-algorithm name")
        return [*baseline_cmd, *extra, *spec.engine_args]
