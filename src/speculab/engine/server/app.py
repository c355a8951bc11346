"""The OpenAI-compatible HTTP server: FastAPI routes over an `AsyncEngine`, assembled from its parts.

- guard.py: API key (401) and body-size limit (413), before any body is read or parsed;
- errors.py: every error as OpenAI JSON with its status (validation is 400, never 422);
- routes.py: the endpoints; engine_request.py: request -> prompt ids (off the event loop) and SamplingParams;
- generation.py: admission, streaming and whole responses, aborts on disconnect;
- connection.py: the HTTP/1.1 connection (431 for an oversized request head, 408 past the receive deadline) and
  exhaustion.py: the open-files limit, accept failures and the log rate limit, both used by `speculab serve`.
A request is only handed to the engine once it is valid, so a refused request never holds a slot, and one the
engine fails (a bug) answers 500 while the server keeps serving everyone else.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi import FastAPI
from prometheus_client.registry import Collector

from speculab import __version__
from speculab.engine.async_engine import AsyncEngine
from speculab.engine.server.engine_request import PromptLimits, ServerTokenizer
from speculab.engine.server.errors import install_error_handlers
from speculab.engine.server.guard import DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_REQUEST_BYTES, GuardConfig, RequestGuard
from speculab.engine.server.metrics import ServerMetrics
from speculab.engine.server.routes import Served, add_generation_routes, add_info_routes

__all__ = ["DEFAULT_MAX_HEADER_BYTES", "DEFAULT_MAX_REQUEST_BYTES", "AppConfig", "ServerTokenizer", "create_app"]


@dataclass(frozen=True, slots=True)
class AppConfig:
    served_model_name: str
    api_key: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # larger bodies get 413 before they are read
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES  # larger request heads get 431 (with connection.py)
    max_prompt_tokens: int | None = None  # None: the context minus one (room for one output token)
    metrics_public: bool = True  # /metrics without the API key, as vLLM does (the harness scrapes without one)
    # What it runs, for clients to see (`launch.served_args`): /version's `server_args` and `speculative_config`,
    # /v1/models' `root` (the model's directory, as vLLM's cards carry it)
    server_args: Mapping[str, Any] = field(default_factory=dict)
    model_root: str | None = None

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1 or self.max_header_bytes < 1:
            raise ValueError("max_request_bytes and max_header_bytes must be at least 1")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
            raise ValueError("max_prompt_tokens must be at least 1")

    @property
    def guard(self) -> GuardConfig:
        return GuardConfig(self.api_key, self.max_request_bytes, self.max_header_bytes, self.metrics_public)


def create_app(
    engine: AsyncEngine,
    tokenizer: ServerTokenizer,
    cfg: AppConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    collectors: Sequence[Collector] = (),
) -> FastAPI:
    """The FastAPI app; starting it starts the engine thread, stopping it stops the thread.

    `collectors` join /metrics (speculative decoding registers its acceptance counters this way).
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine.start()
        # Starlette streams every response inside an anyio task group, and anyio imports its asyncio backend on
        # the first one: about 0.2 s on a 2-core VM. Paid here, before /health answers, it is not a cold start
        # the first client's TTFT carries (speculab diagnose found it as one).
        async with anyio.create_task_group():
            pass
        yield
        engine.stop()

    # Under an API key the schema is served only with the key (guard.py); without one it is public as usual.
    app = FastAPI(title="speculab engine", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    metrics = ServerMetrics(engine, cfg.served_model_name, clock)
    for c in collectors:
        metrics.registry.register(c)
    app.state.engine, app.state.metrics = engine, metrics
    ecfg = engine.engine.cfg
    limits = PromptLimits(
        max_prompt_tokens=min(cfg.max_prompt_tokens or ecfg.max_model_len, ecfg.max_model_len - 1),
        max_model_len=ecfg.max_model_len,
        vocab_size=engine.engine.model.config.vocab_size,
    )
    served = Served(engine, tokenizer, metrics, cfg.served_model_name, limits, cfg.server_args, cfg.model_root)
    install_error_handlers(app, metrics.error)
    app.add_middleware(RequestGuard, cfg=cfg.guard, count_error=metrics.error)
    add_info_routes(app, served)
    add_generation_routes(app, served)
    return app
