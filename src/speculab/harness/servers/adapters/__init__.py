"""One adapter per engine: how to switch speculation on, where readiness and acceptance are reported.

`adapter_for(kind)` returns the adapter; `command_diff`/`is_single_change` check that the two arms differ only in
speculation; `detect_engine` guesses the engine behind a URL. Flag names and sources: docs/engines.md.
"""

from __future__ import annotations

from speculab.errors import UserError
from speculab.harness.servers.adapters.base import AcceptanceMetrics, EngineAdapter, diff_for, is_single_change
from speculab.harness.servers.adapters.detect import detect_engine
from speculab.harness.servers.adapters.flags import CommandDiff, FlagDifference, command_diff, parse_command
from speculab.harness.servers.adapters.llamacpp import LlamacppAdapter
from speculab.harness.servers.adapters.other import OtherAdapter
from speculab.harness.servers.adapters.sglang import SglangAdapter
from speculab.harness.servers.adapters.speculab import SpeculabAdapter
from speculab.harness.servers.adapters.tgi import TgiAdapter
from speculab.harness.servers.adapters.vllm import VllmAdapter

_ADAPTERS: dict[str, EngineAdapter] = {
    "speculab": SpeculabAdapter(),
    "vllm": VllmAdapter(),
    "sglang": SglangAdapter(),
    "llamacpp": LlamacppAdapter(),
    "tgi": TgiAdapter(),
    "other": OtherAdapter(),
}

# Engines whose metrics any server may expose (an `other` engine built on vLLM, say), in the order a reader tries
# them after the engine's own: for acceptance (servers.acceptance) and prefix-cache hits (servers.prefix_cache)
# alike. Each adapter names what its engine exposes (speculab has no prefix-cache counters: `prefix_cache` None).
FALLBACK_ENGINES = ("vllm", "speculab", "llamacpp", "sglang")


def adapter_for(kind: str) -> EngineAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise UserError(f"unknown engine {kind!r}; use one of {', '.join(_ADAPTERS)}") from None


__all__ = [
    "FALLBACK_ENGINES",
    "AcceptanceMetrics",
    "CommandDiff",
    "EngineAdapter",
    "FlagDifference",
    "adapter_for",
    "command_diff",
    "detect_engine",
    "diff_for",
    "is_single_change",
    "parse_command",
]
