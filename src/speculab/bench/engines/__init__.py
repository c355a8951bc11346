"""One adapter per engine: how to switch speculation on, where readiness and acceptance are reported.

`adapter_for(kind)` returns the adapter; `command_diff`/`is_single_change` check that the two arms differ only in
speculation; `detect_engine` guesses the engine behind a URL. Flag names and sources: docs/engines.md.
"""

from __future__ import annotations

from speculab.bench.engines.base import AcceptanceMetrics, EngineAdapter, diff_for, is_single_change
from speculab.bench.engines.detect import detect_engine
from speculab.bench.engines.flags import CommandDiff, FlagDifference, command_diff, parse_command
from speculab.bench.engines.llamacpp import LlamacppAdapter
from speculab.bench.engines.other import OtherAdapter
from speculab.bench.engines.sglang import SglangAdapter
from speculab.bench.engines.speculab import SpeculabAdapter
from speculab.bench.engines.tgi import TgiAdapter
from speculab.bench.engines.vllm import VllmAdapter
from speculab.errors import UserError

_ADAPTERS: dict[str, EngineAdapter] = {
    "speculab": SpeculabAdapter(),
    "vllm": VllmAdapter(),
    "sglang": SglangAdapter(),
    "llamacpp": LlamacppAdapter(),
    "tgi": TgiAdapter(),
    "other": OtherAdapter(),
}


def adapter_for(kind: str) -> EngineAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise UserError(f"unknown engine {kind!r}; use one of {', '.join(_ADAPTERS)}") from None


__all__ = [
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
