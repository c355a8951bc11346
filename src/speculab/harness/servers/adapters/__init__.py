"""One adapter per engine: everything engine-specific (how to launch it and switch speculation on, its context
flag, the methods its release declares, where readiness and acceptance are reported) lives in its adapter.

`adapter_for(kind)` returns the adapter; `engine_kinds()` lists every kind (the one list: the config's accepted names
and the CLI's --engine help derive from it), `askable_engines()` those whose release can be asked what it declares;
`command_diff`/`is_single_change` check that the two arms differ only in speculation (`served`/`served_change`: from
what two servers say they run, where they say it); `detect_engine` guesses the engine behind a URL;
`response_reader(kind)` is what the client is handed to read each response's engine fields.
Flag names and sources: docs/engines.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from speculab.errors import UserError
from speculab.harness.records import ResponseReading
from speculab.harness.servers.adapters import llamacpp, other, sglang, speculab, tgi, trtllm, vllm
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    ByLoad,
    EngineAdapter,
    Served,
    diff_for,
    is_single_change,
    plain_base,
    served,
    served_change,
)
from speculab.harness.servers.adapters.base import said as _said
from speculab.harness.servers.adapters.base import said_change as _said_change
from speculab.harness.servers.adapters.flags import CommandDiff, FlagDifference, command_diff, parse_command
from speculab.protocol.chunks import EngineFields

# The one list of engines: everything else (the config's accepted names, the CLI's --engine help) derives from it.
_ADAPTERS: dict[str, EngineAdapter] = {
    m.ADAPTER.kind: m.ADAPTER for m in (speculab, vllm, sglang, llamacpp, tgi, trtllm, other)
}

# Engines whose metrics any server may expose (an `other` engine built on vLLM, say), in the order a reader tries
# them after the engine's own: for acceptance (servers.acceptance) and prefix-cache hits (servers.prefix_cache)
# alike. Each adapter names what its engine exposes (speculab has no prefix-cache counters: `prefix_cache` None).
FALLBACK_ENGINES = ("vllm", "speculab", "llamacpp", "sglang")


def engine_kinds() -> tuple[str, ...]:
    """Every engine speculab has an adapter for, in the registry's order (`other` last)."""
    return tuple(_ADAPTERS)


def askable_engines() -> tuple[str, ...]:
    """The engines whose installed release speculab can ask which methods it declares."""
    return tuple(k for k, a in _ADAPTERS.items() if a.declares is not None)


def said(server_info: Mapping[str, Any]) -> Served | None:
    """What a recorded server said it runs (`base.said` with this registry; an unknown engine name reads as `other`)."""
    return _said(server_info, _recorded_adapter)


def said_change(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> tuple[CommandDiff, bool] | None:
    """The single-change rule over what two recorded servers said they run (`base.said_change`); None: unverifiable."""
    return _said_change(baseline, candidate, _recorded_adapter)


def forced_by_launch(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """What in a launch command and its environment forces acceptance, in each engine's words (() : nothing). Every
    adapter reads it: a forcing knob means one thing wherever it appears, and a server of kind `other` (the mock, a
    wrapper script) may be any engine."""
    return tuple(dict.fromkeys(w for a in _ADAPTERS.values() for w in a.forced_launch(command, env)))


def forced_by_server(server_info: Mapping[str, Any]) -> tuple[str, ...]:
    """What a recorded server said it runs (`said`: its arguments, its speculative config) that forces acceptance
    (() : nothing, or it said nothing usable)."""
    s = _said(server_info, _recorded_adapter)
    if s is None:
        return ()
    config = ("--speculative-config", json.dumps(dict(s.speculation))) if s.speculation else ()
    return forced_by_launch((*s.command, *config), {})


def lossy_by_launch(command: Sequence[str]) -> tuple[str, ...]:
    """What in a launch command makes acceptance lossy, in each engine's words (() : nothing). Every adapter reads it:
    a knob means one thing wherever it appears, and a server of kind `other` may be any engine."""
    return tuple(dict.fromkeys(w for a in _ADAPTERS.values() for w in a.lossy_launch(command)))


def _recorded_adapter(kind: str) -> EngineAdapter:
    return _ADAPTERS.get(kind, _ADAPTERS["other"])


@dataclass(frozen=True, slots=True)
class EngineResponses:
    """The reader of a run's responses (`client.response.ResponseReader`): the engine's own adapter reads first, then
    every other engine's, as the client always read every engine's fields: a response's fields name their engine
    (unlike metric names, which forks share), and a server of kind `other` may be any of them. The speculation is
    the first adapter's that reports one; what a record keeps, every adapter's. A record, not a closure, so that a
    worker process or a Ray actor gets it with the endpoint."""

    kind: str

    def __call__(self, said: EngineFields) -> ResponseReading:
        own = _recorded_adapter(self.kind)
        speculation, kept = None, {}
        for adapter in (own, *(a for a in _ADAPTERS.values() if a is not own)):
            reading = adapter.read_response(said)
            if reading is not None:
                kept |= reading.kept
                speculation = speculation or reading.speculation
        return ResponseReading(speculation, kept)


def response_reader(kind: str) -> EngineResponses:
    """What reads the responses of an engine of `kind` (an unknown name reads as `other`: every engine's fields)."""
    return EngineResponses(kind)


def adapter_for(kind: str) -> EngineAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise UserError(f"unknown engine {kind!r}; use one of {', '.join(_ADAPTERS)}") from None


# --- which engine is behind a URL, from what it says about itself (`speculab init`, bench, the run) ---


def detect_engine(
    version_json: Mapping[str, Any] | None,
    models_json: Mapping[str, Any] | None,
    metric_names: Iterable[str] = (),
) -> str:
    """Engine kind from /metrics names (each adapter's `metric_prefix`), then /v1/models owned_by (an engine's kind),
    then /version; "other" when nothing matches.

    version_json: GET /version (vLLM: {"version": "0.x"}; speculab: {"name": "speculab", ...}), or None.
    models_json: GET /v1/models, or None. metric_names: names seen on GET /metrics.
    """
    names = list(metric_names)
    # the registry's order: most specific evidence first
    prefixes = [(p, kind) for kind in engine_kinds() if (p := adapter_for(kind).metric_prefix) is not None]
    for prefix, kind in prefixes:
        if any(n.startswith(prefix) for n in names):
            return kind
    owners = [kind for kind in engine_kinds() if kind != "other"]  # /v1/models data[].owned_by: an engine's kind
    for model in (models_json or {}).get("data", []) or []:
        owner = str(model.get("owned_by", "")).lower() if isinstance(model, Mapping) else ""
        if owner in owners:
            return owner
    if version_json:
        name = str(version_json.get("name", version_json.get("engine", ""))).lower()
        for kind in owners:
            if kind in name:
                return kind
        # TGI's /info (sometimes proxied as /version) carries these keys.
        if "model_id" in version_json and "max_total_tokens" in version_json:
            return "tgi"
        if set(version_json) == {"version"}:
            return "vllm"  # vLLM's /version is exactly {"version": ...}
    return "other"


__all__ = [
    "FALLBACK_ENGINES",
    "AcceptanceMetrics",
    "ByLoad",
    "CommandDiff",
    "EngineAdapter",
    "EngineResponses",
    "FlagDifference",
    "Served",
    "adapter_for",
    "askable_engines",
    "command_diff",
    "detect_engine",
    "diff_for",
    "engine_kinds",
    "forced_by_launch",
    "forced_by_server",
    "is_single_change",
    "lossy_by_launch",
    "parse_command",
    "plain_base",
    "response_reader",
    "said",
    "said_change",
    "served",
    "served_change",
]
