"""Which engine is behind a URL, from what it says about itself (for `speculab init`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


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
    from speculab.harness.servers.adapters import adapter_for, engine_kinds  # the registry imports this module

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
