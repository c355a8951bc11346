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
from speculab.harness.client.body import MAX_PROBE_BYTES, BodyTooLarge, read_body
from speculab.harness.client.endpoint import EndpointConfig
from speculab.protocol.chunks import MalformedChunk, loads_untrusted


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
            status = resp.status
            body = await read_body(resp, MAX_PROBE_BYTES, truncate=status != 200)
    except BodyTooLarge as e:
        raise EndpointError(f"{url} sent a {e}, not an OpenAI model list; check --url") from None
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
        data = loads_untrusted(body.decode("utf-8", errors="replace"))
        cards = tuple(_small(m) for m in data["data"] if isinstance(m, dict) and is_model_id(m.get("id")))
        models = tuple(m["id"] for m in cards)
    except (MalformedChunk, KeyError, TypeError):
        raise EndpointError(f"{url} did not return an OpenAI model list; check --url") from None
    return ServerInfo(models=models, model_cards=cards, version=await _version(session, ep, timeout))


# What a run keeps of the server's own description (manifest.json): a model card or /version body past this is not
# one (a proxy's page, a runaway list) and is kept as the start of its text.
MAX_KEPT_JSON = 4096


def is_model_id(v: Any) -> bool:
    """A model id speculab can name in a message, a file or a command: a short string on one line. Others in a
    server's list are left out (a newline in one made a one-line error two lines)."""
    return isinstance(v, str) and 0 < len(v) <= 500 and v.isprintable()


def _small(obj: Any) -> Any:
    """`obj` when its JSON is at most MAX_KEPT_JSON characters; else the start of its text (or, for a model card,
    its id and short scalar fields)."""
    text = json.dumps(obj, ensure_ascii=False)
    if len(text) <= MAX_KEPT_JSON:
        return obj
    if isinstance(obj, dict) and isinstance(obj.get("id"), str):
        return {
            k: v for k, v in obj.items() if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) < 500)
        }
    return text[:200]


async def _version(session: aiohttp.ClientSession, ep: EndpointConfig, timeout: aiohttp.ClientTimeout) -> Any:
    try:
        async with session.get(ep.base_url + "/version", headers=ep.headers(), timeout=timeout) as resp:
            if resp.status != 200:
                return None
            text = (await read_body(resp, MAX_PROBE_BYTES, truncate=True)).decode("utf-8", errors="replace")
    except (asyncio.TimeoutError, aiohttp.ClientError):
        return None
    try:
        return _small(loads_untrusted(text))
    except MalformedChunk:
        return text.strip()[:200].encode("utf-8", "replace").decode("utf-8") or None


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
