"""Bounded reads of what a server sends: every body the harness reads has a cap, and a body past it is an error.

The endpoints speculab measures are often half-broken (a proxy's HTML page, a buggy fork, a body that never ends);
without a cap one answer can grow the client until it is the thing being measured. The caps (docs/metrics.md,
"What a server may send"): a response body 64 MB, an error body 64 KB (only its start is shown), `/v1/models` and
`/version` 8 MB, `/metrics` 32 MB; a streamed line or event `protocol.sse.MAX_LINE_BYTES` (4 MB).
"""

from __future__ import annotations

import aiohttp

MB = 1024 * 1024
MAX_BODY_BYTES = 64 * MB  # a whole non-streamed response: long outputs with top logprobs are tens of MB
MAX_ERROR_BODY_BYTES = 64 * 1024  # an error answer: the message is clipped to a few hundred characters anyway
MAX_PROBE_BYTES = 8 * MB  # /v1/models, /version
MAX_METRICS_BYTES = 32 * MB  # /metrics: engines with many label sets expose a few MB
_READ = 256 * 1024

# Content types that say the answer to a stream request is a document, not an event stream: a proxy's error page,
# a JSON body (the server ignored stream=true), XML from a gateway. Anything else is read as SSE (servers differ
# in what they call it; a missing header is application/octet-stream to aiohttp).
NOT_A_STREAM = frozenset({"text/html", "application/xhtml+xml", "application/xml", "text/xml"})


class BodyTooLarge(ValueError):
    """The body passed its cap."""

    def __init__(self, cap: int):
        super().__init__(f"body over {_size(cap)}")


async def read_body(resp: aiohttp.ClientResponse, cap: int, *, truncate: bool = False) -> bytes:
    """The body, at most `cap` bytes: past it raise `BodyTooLarge`, or with `truncate` return the first `cap`
    bytes (error bodies, where only the start is shown)."""
    if resp.content_length is not None and resp.content_length > cap and not truncate:
        raise BodyTooLarge(cap)
    out = bytearray()
    while True:
        piece = await resp.content.read(min(_READ, cap + 1 - len(out)))
        if not piece:
            return bytes(out)
        out += piece
        if len(out) > cap:
            if truncate:
                return bytes(out[:cap])
            raise BodyTooLarge(cap)


def _size(n: int) -> str:
    return f"{n / MB:g} MB" if n >= MB else f"{n / 1024:g} KB"
