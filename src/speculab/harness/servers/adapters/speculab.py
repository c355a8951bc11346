"""speculab's own engine: the same `--speculative-config` JSON and counter semantics as vLLM, prefix `speculab:`."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from speculab.config import SpeculationConfig
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    ByLoad,
    CacheReset,
    HelpRelease,
    KnownMethods,
    PrefixCacheMetrics,
    PythonRelease,
    refuse_if_speculating,
)
from speculab.harness.servers.adapters.vllm import DRAFT_LINE, NGRAM_GRID, counters

KIND = "speculab"
_RELEASE = PythonRelease(
    KIND,
    (KIND,),
    (("engine/speculative/config.py", "METHODS"),),
    (("engine/speculative/config.py", "values _KEYS"),),
)


def serve_command(python: str, model: str, port: int) -> list[str]:
    """`python -m speculab serve MODEL --port PORT` with the given interpreter (`speculab init`, `speculab demo`)."""
    return [python, "-m", "speculab", "serve", model, "--port", str(port)]


@dataclass(frozen=True, slots=True)
class SpeculabAdapter:
    kind: str = KIND
    health_path: str = "/health"
    metric_prefix: str | None = "speculab:"
    acceptance: AcceptanceMetrics = field(default_factory=lambda: counters(KIND))
    prefix_cache: PrefixCacheMetrics | None = None
    cache_reset: CacheReset | None = field(default_factory=lambda: CacheReset(("/reset_prefix_cache",)))
    request_fields: Mapping[str, Any] = field(default_factory=dict)
    keep_alive: bool = True
    speculation_flags: frozenset[str] = frozenset({"--speculative-config"})
    speculation_prefixes: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    plain_values: Mapping[str, str] = field(default_factory=dict)
    context_flags: tuple[str, ...] = ("--max-model-len",)
    starter_grid: str | None = (
        f"{NGRAM_GRID}{DRAFT_LINE}"
        "  # - {method: eagle, num_speculative_tokens: 4, model: /path/to/eagle-head}"
        "   # an EAGLE-1 head for the target\n"
    )
    starter_note: str | None = None
    ngram_lookup: bool = True
    json_config: bool = True
    experiment_names: Mapping[str, str] | None = None
    fixed_k: Mapping[str, int] = field(default_factory=dict)
    heads_from_target: frozenset[str] = frozenset()
    draft_vocab_prefix: str | None = None
    lookup_keys_checked: bool = False
    executable: str = sys.executable
    declares: PythonRelease | HelpRelease | None = _RELEASE
    known_methods: KnownMethods | None = None
    server_lists_methods: bool = True  # its /version says `speculative_methods`
    says_config: bool = True  # its /version says speculative_config and server_args (engine/server/routes.py)

    def candidate_command(self, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        return [*baseline_cmd, "--speculative-config", speculation.speculative_config_json(), *speculation.engine_args]

    def launch_command(self, model: str, port: int, context: int | None) -> list[str] | None:
        ctx = ["--max-model-len", str(context)] if context is not None else []
        return [*serve_command("python", model, port), *ctx]

    def by_load(self, b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
        """Drafts off above the lowest band's edge, or adaptive k when only k changes (its engine picks k per step)."""
        if b.form == "off-above":
            sp = replace(b.first, options={**b.first.options, "disable_by_batch_size": b.off_above})
            return sp, "off-above", (f"drafts off in steps with more than {b.off_above} decode rows",)
        if b.same:
            sp = replace(b.first, num_speculative_tokens=b.top_k, options={**b.first.options, "adaptive": True})
            note = f"adaptive k up to {b.top_k}: speculab's engine picks k per step (engine/speculative/adaptive.py)"
            return sp, "adaptive", (note,)
        return None
