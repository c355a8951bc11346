"""Any other OpenAI-compatible server: speculab cannot derive its candidate, so the experiment file gives
`candidate.command`, and the single change cannot be verified (the report says so)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    ByLoad,
    CacheReset,
    HelpRelease,
    KnownMethods,
    PrefixCacheMetrics,
    PythonRelease,
)


@dataclass(frozen=True, slots=True)
class OtherAdapter:
    kind: str = "other"
    health_path: str = "/health"
    metric_prefix: str | None = None
    acceptance: AcceptanceMetrics = field(default_factory=lambda: AcceptanceMetrics(kind="none"))
    prefix_cache: PrefixCacheMetrics | None = None
    cache_reset: CacheReset | None = None
    request_fields: Mapping[str, Any] = field(default_factory=dict)
    keep_alive: bool = True
    speculation_flags: frozenset[str] = frozenset()
    speculation_prefixes: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    plain_values: Mapping[str, str] = field(default_factory=dict)
    context_flags: tuple[str, ...] = ()
    starter_grid: str | None = None  # a two-URL starter: the candidate is the user's own server
    starter_note: str | None = None
    ngram_lookup: bool = False
    json_config: bool = False
    experiment_names: Mapping[str, str] | None = None
    fixed_k: Mapping[str, int] = field(default_factory=dict)
    heads_from_target: frozenset[str] = frozenset()
    draft_vocab_prefix: str | None = None
    lookup_keys_checked: bool = False
    executable: str = "other"
    declares: PythonRelease | HelpRelease | None = None  # speculab cannot ask it what it declares
    known_methods: KnownMethods | None = None
    server_lists_methods: bool = False
    says_config: bool = False

    def candidate_command(self, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
        raise UserError("engine `other`: speculab cannot derive the candidate; give candidate.command in the file")

    def launch_command(self, model: str, port: int, context: int | None) -> list[str] | None:
        return None

    def by_load(self, b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
        return None
