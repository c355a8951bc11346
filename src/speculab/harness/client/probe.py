"""Preflight: is the endpoint there, and does it serve the model? Answered before any load is sent.

GET /v1/models (required: every OpenAI-compatible server has it) and /version (vLLM; optional). An unreachable
URL, a rejected key or a model that is not served becomes one `EndpointError` line naming the fix.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from speculab.errors import EndpointError
from speculab.harness.client.endpoint import EndpointConfig


@dataclass(frozen=True, slots=True)
class ServerInfo:
    models: tuple[str, ...]  # ids from /v1/models
    model_cards: tuple[dict[str, Any], ...]  # the raw entries (vLLM adds max_model_len, root, ...)
    version: Any = None  # /version body when present

    def to_dict(self) -> dict[str, Any]:
        return {"models": list(self.models), "model_cards": list(self.model_cards), "version": self.version}


async def probe_endpoint(session: aiohttp.ClientSession, ep: EndpointConfig, timeout_s: float = 10.0) -> ServerInfo:
    """Read /v1/models and /version; raise EndpointError if the endpoint cannot be used."""
    url = ep.base_url + "/v1/models"
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with session.get(url, headers=ep.headers(), timeout=timeout) as resp:
            body = await resp.read()
            status = resp.status
    except asyncio.TimeoutError:
        raise EndpointError(f"{url} did not answer within {timeout_s:g} s; is the server up? check --url") from None
    except aiohttp.ClientError as e:
        raise EndpointError(f"cannot reach {ep.base_url} ({_reason(e)}); is the server running? check --url") from None
    if status in (401, 403):
        raise EndpointError(
            f"{url} rejected the request (HTTP {status}); pass --api-key or set SPECULAB_API_KEY / OPENAI_API_KEY"
        )
    if status != 200:
        raise EndpointError(
            f"{url} answered HTTP {status}; is --url the base of an OpenAI-compatible server (e.g. http://host:8000)?"
        )
    try:
        data = json.loads(body)
        cards = tuple(m for m in data["data"] if isinstance(m, dict))
        models = tuple(str(m["id"]) for m in cards)
    except (ValueError, KeyError, TypeError):
        raise EndpointError(f"{url} did not return an OpenAI model list; check --url") from None
    return ServerInfo(models=models, model_cards=cards, version=await _version(session, ep, timeout))


async def _version(session: aiohttp.ClientSession, ep: EndpointConfig, timeout: aiohttp.ClientTimeout) -> Any:
    try:
        async with session.get(ep.base_url + "/version", headers=ep.headers(), timeout=timeout) as resp:
            if resp.status != 200:
                return None
            text = await resp.text(errors="replace")
    except (asyncio.TimeoutError, aiohttp.ClientError):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()[:200] or None


def choose_model(requested: str | None, info: ServerInfo, base_url: str) -> str:
    """The model to use: the requested one if served; the only served one if none was requested."""
    served = ", ".join(info.models) or "(none)"
    if requested:
        if requested in info.models:
            return requested
        raise EndpointError(f"model {requested!r} is not served at {base_url}; served: {served}. Pass --model NAME")
    if len(info.models) == 1:
        return info.models[0]
    if not info.models:
        raise EndpointError(f"{base_url} serves no models; pass --model NAME")
    raise EndpointError(f"{base_url} serves several models ({served}); pass --model NAME")


def _reason(e: BaseException) -> str:
    if isinstance(e, aiohttp.ClientConnectorError):
        return str(e.os_error.strerror or e.os_error) if e.os_error else "connection failed"
    return type(e).__name__
