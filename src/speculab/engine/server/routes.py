"""The HTTP routes: the two OpenAI generation endpoints, the model list, /health, /version, /metrics and
/reset_prefix_cache."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from speculab import __version__
from speculab.engine.async_engine import AsyncEngine
from speculab.engine.server import engine_request as er
from speculab.engine.server.errors import error_response
from speculab.engine.server.generation import admit, collect, stream
from speculab.engine.server.metrics import ServerMetrics
from speculab.engine.server.streaming import Rendering
from speculab.engine.speculative.config import METHODS
from speculab.protocol import openai as oa


@dataclass
class Served:
    """What the routes serve: the engine, its tokenizer and metrics, the model's name and the prompt limits."""

    engine: AsyncEngine
    tokenizer: er.ServerTokenizer
    metrics: ServerMetrics
    model_name: str
    limits: er.PromptLimits
    server_args: Mapping[str, Any] = field(default_factory=dict)  # what it runs (/version), secrets left out
    model_root: str | None = None  # the model's directory (/v1/models `root`)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def check_model(self, name: str) -> None:
        if name != self.model_name:
            raise oa.ApiError(
                404,
                f"model {name!r} does not exist; this server serves {self.model_name!r}",
                param="model",
                code="model_not_found",
            )

    def models(self) -> dict[str, Any]:
        listed = oa.models_list([self.model_name], oa.now_s(), max_model_len=self.limits.max_model_len)
        if self.model_root is not None:  # as vLLM's cards: where the served checkpoint is (`speculab methods --url`)
            for card in listed["data"]:
                card["root"] = self.model_root
        return listed

    def version(self) -> dict[str, Any]:
        """/version: "name" tells speculab's endpoint detection this is not vLLM (whose /version is only {"version"});
        "speculative_methods" is what this release's --speculative-config accepts (`speculab methods --url`);
        "speculative_config" (null: plain decoding) and "server_args" say what this server runs, so a client can
        label an arm and check that two servers differ only in speculation without their command lines."""
        said: dict[str, Any] = {"name": "speculab", "version": __version__, "speculative_methods": list(METHODS)}
        if self.server_args:  # an app built without them (a test's) says nothing rather than "plain"
            said["server_args"] = dict(self.server_args)
            if "speculative_config" in self.server_args:  # absent: a speculator given from code, unknown here
                said["speculative_config"] = self.server_args["speculative_config"]
        return said

    def rendering(self, req: oa.CompletionRequest | oa.ChatCompletionRequest, logprobs: int | None) -> Rendering:
        chat = isinstance(req, oa.ChatCompletionRequest)
        opts = req.stream_options or oa.StreamOptions()
        return Rendering(
            chat=chat,
            request_id=oa.new_id("chatcmpl" if chat else "cmpl") + f"-{next(self._ids)}",
            model=self.model_name,
            created=oa.now_s(),
            token_text=self.tokenizer.token_text,
            want_logprobs=logprobs is not None,
            include_usage=opts.include_usage,
            continuous_usage=opts.continuous_usage_stats,
        )

    async def generate(
        self,
        request: Request,
        req: oa.CompletionRequest | oa.ChatCompletionRequest,
        prompt_ids: list[int],
        max_tokens: int,
        logprobs: int | None,
    ) -> Response:
        params = er.sampling_params(req, max_tokens, logprobs, self.limits.vocab_size)
        gen = admit(self.engine, self.metrics, self.rendering(req, logprobs), prompt_ids, params)
        if isinstance(gen, Response):
            return gen
        return stream(gen) if req.stream else await collect(request, gen)


def add_generation_routes(app: FastAPI, s: Served) -> None:
    @app.post("/v1/completions")
    async def completions(request: Request, req: oa.CompletionRequest) -> Response:
        s.check_model(req.model)
        prompt_ids = await er.completion_prompt(s.tokenizer, req, s.limits)
        return await s.generate(request, req, prompt_ids, er.completion_max_tokens(req), req.logprobs)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request, req: oa.ChatCompletionRequest) -> Response:
        s.check_model(req.model)
        prompt_ids = await er.chat_prompt(s.tokenizer, req, s.limits)
        max_tokens = er.chat_max_tokens(req, len(prompt_ids), s.limits.max_model_len)
        logprobs = (req.top_logprobs or 0) if req.logprobs else None
        return await s.generate(request, req, prompt_ids, max_tokens, logprobs)


def add_info_routes(app: FastAPI, s: Served) -> None:
    @app.get("/health")
    async def health() -> Response:
        if s.engine.error is not None:
            return error_response(503, f"engine failed: {s.engine.error}")
        if s.engine.shutting_down:
            return error_response(503, "the server is shutting down")
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> dict[str, Any]:
        return s.version()

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(s.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/reset_prefix_cache")
    async def reset_prefix_cache() -> dict[str, Any]:
        # vLLM's name for it, so a harness empties every engine's cache alike between blocks. This engine keeps no
        # prompt's KV cache past its own request (no prefix sharing): there is never anything to free.
        return {"object": "prefix_cache.reset", "success": True, "freed_blocks": 0}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return s.models()

    @app.get("/v1/models/{name:path}")
    async def model_card(name: str) -> dict[str, Any]:
        s.check_model(name)
        return s.models()["data"][0]
