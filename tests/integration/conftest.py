"""Fixtures for the integration tests: an HTTP session without a connection limit (see fakes.raw_sse for `post`)."""

from __future__ import annotations

import aiohttp
import pytest


@pytest.fixture
async def session():
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        yield s
