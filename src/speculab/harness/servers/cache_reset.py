"""Emptying a server's caches before a block, through its adapter's endpoints (`CacheReset`): without it an arm's
second block of the same prompts, and every repeat in two-URL mode, is served from a cache the blocks before warmed.

It only asks; what came of it is a `CacheResetOutcome` per block, kept with the repeat (run.json `cache_resets`). A
server that refuses is not an error: the block runs on a warm cache and the run says so.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp

from speculab.harness.client.body import MAX_ERROR_BODY_BYTES, BodyTooLarge, read_body
from speculab.harness.records import CacheResetOutcome
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters.base import CacheReset
from speculab.protocol.chunks import error_from_body, one_line


async def reset_caches(
    session: aiohttp.ClientSession,
    base_url: str,
    reset: CacheReset | None,
    block: int,
    *,
    mode: str = "between-blocks",  # `cache: {reset: between-blocks | never}`
    api_key: str | None = None,
    timeout_s: float = 30.0,
) -> CacheResetOutcome:
    """POST each of the engine's reset endpoints in turn; the first that does not answer 2xx stops it (refused)."""
    if mode == "never":
        return CacheResetOutcome(block, "off")
    if reset is None or not reset.paths:
        return CacheResetOutcome(block, "unavailable")
    root = base_url.rstrip("/").removesuffix("/v1")  # the endpoints live at the server root, beside /metrics
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    for path in reset.paths:
        why = await _post(session, root + path, headers, timeout_s)
        if why is not None:
            return CacheResetOutcome(block, "refused", reset.paths, f"POST {path}: {why}")
    return CacheResetOutcome(block, "reset", reset.paths)


async def _post(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None, timeout_s: float
) -> str | None:
    """None when the server answered 2xx; else what it said (status and its error message) or why it did not. A 2xx
    whose JSON says `"success": false` did not reset (vLLM 0.32's answer while blocks are still held)."""
    try:
        async with session.post(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            body = await read_body(resp, MAX_ERROR_BODY_BYTES, truncate=True)
            if 200 <= resp.status < 300:
                return f"HTTP {resp.status} with success: false" if _said_failure(body) else None
            err = error_from_body(body)
            said = f" ({one_line(err.message, 200)})" if err is not None and err.message else ""
            return f"HTTP {resp.status}{said}"
    except (aiohttp.ClientError, asyncio.TimeoutError, BodyTooLarge) as e:
        return one_line(f"no answer: {type(e).__name__} {e}".strip(), 200)


def _said_failure(body: bytes) -> bool:
    try:
        said = json.loads(body)
    except ValueError:
        return False  # a plain-text answer ("Cache flushed."): its status says it
    return isinstance(said, dict) and said.get("success") is False


def refusal_warning(arm_label: str, url: str, outcome: CacheResetOutcome, reset: CacheReset | None) -> ReportWarning:
    """The run's warning when a server refused: which, what it said, and what the server needs to allow it (the
    report words it with the two ways out)."""
    env = dict(reset.env) if reset is not None else {}
    fields = {"url": url, "detail": outcome.detail, "env": env}
    return ReportWarning(WarningKind.CACHE_RESET_REFUSED, arm_label, fields=fields)
