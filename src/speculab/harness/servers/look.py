"""A look at a running server before anything is sent: its /v1/models (required), /version and /metrics (optional),
and the engine they say it is. Used by `speculab init` (a starter file) and `speculab methods --url` (what can run)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp

from speculab.errors import EndpointError
from speculab.harness.client.body import MAX_PROBE_BYTES, read_body
from speculab.harness.client.endpoint import normalize_base_url
from speculab.harness.client.probe import is_model_id
from speculab.harness.client.request import make_session
from speculab.harness.servers.adapters import detect_engine
from speculab.harness.servers.scrape import scrape_metrics
from speculab.protocol.chunks import loads_untrusted


@dataclass(frozen=True, slots=True)
class ServerLook:
    """What a server said of itself: its base URL, the engine detected, its model cards, /version, metric names."""

    url: str
    engine: str
    models: tuple[dict[str, Any], ...]
    version: Any
    metric_names: tuple[str, ...]


async def _get_json(session: aiohttp.ClientSession, url: str) -> Any:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return None
            return loads_untrusted((await read_body(resp, MAX_PROBE_BYTES)).decode("utf-8", errors="replace"))
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):  # MalformedChunk and BodyTooLarge among them
        return None


async def look_at_server(url: str) -> ServerLook:
    """GET /v1/models (required), /version and /metrics (optional); detect the engine."""
    base = normalize_base_url(url)
    async with make_session() as session:
        try:
            async with session.get(base + "/v1/models", timeout=aiohttp.ClientTimeout(total=10)) as resp:
                status = resp.status
                body = await read_body(resp, MAX_PROBE_BYTES, truncate=True)
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            raise EndpointError(
                f"cannot reach {base} ({type(e).__name__}); is the server running? check --url"
            ) from None
        if status != 200:
            raise EndpointError(
                f"{base}/v1/models answered HTTP {status}; give the base URL of an OpenAI-compatible server"
            )
        try:
            data = loads_untrusted(body.decode("utf-8", errors="replace")).get("data", [])
            models = tuple(m for m in data if isinstance(m, dict) and is_model_id(m.get("id")))
        except (ValueError, AttributeError, TypeError):
            raise EndpointError(f"{base}/v1/models is not an OpenAI model list; check --url") from None
        version = await _get_json(session, base + "/version")
        snap = await scrape_metrics(session, base)
    names = tuple(sorted(snap.names())) if snap is not None else ()
    version_map = version if isinstance(version, dict) else None
    engine = detect_engine(version_map, {"data": list(models)}, names)
    return ServerLook(base, engine, models, version, names)
